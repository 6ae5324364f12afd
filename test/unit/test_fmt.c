/*
 * fmt: human units at their boundaries, CSV quoting (RFC 4180) and JSON
 * string escaping, including bytes that are not UTF-8.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tools/fmt.h"

/* What f wrote for s, in a string the caller frees. */
static char *capture(void (*f)(FILE *, const char *), const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	f(out, s);
	assert_int_equal(fclose(out), 0);
	return buf;
}

static void expect(void (*f)(FILE *, const char *), const char *in, const char *want)
{
	char *got = capture(f, in);

	assert_string_equal(got, want);
	free(got);
}

static void test_fmt_duration_units(void **state)
{
	char b[FMT_UNIT_MAX];

	(void)state;
	assert_string_equal(fmt_duration(b, sizeof(b), 0), "0 ns");
	assert_string_equal(fmt_duration(b, sizeof(b), 999), "999 ns");
	assert_string_equal(fmt_duration(b, sizeof(b), 1000), "1.00 us");
	assert_string_equal(fmt_duration(b, sizeof(b), 15170), "15.17 us");
	assert_string_equal(fmt_duration(b, sizeof(b), 2500000), "2.50 ms");
	assert_string_equal(fmt_duration(b, sizeof(b), 1e9), "1.000 s");
	assert_string_equal(fmt_duration(b, sizeof(b), 12345678901.0), "12.346 s");
}

static void test_fmt_bytes_units(void **state)
{
	char b[FMT_UNIT_MAX];

	(void)state;
	assert_string_equal(fmt_bytes(b, sizeof(b), 0), "0 B");
	assert_string_equal(fmt_bytes(b, sizeof(b), 1023), "1023 B");
	assert_string_equal(fmt_bytes(b, sizeof(b), 1024), "1.00 KiB");
	assert_string_equal(fmt_bytes(b, sizeof(b), 1536), "1.50 KiB");
	assert_string_equal(fmt_bytes(b, sizeof(b), 3.0 * 1024 * 1024 * 1024), "3.00 GiB");
	assert_string_equal(fmt_bytes(b, sizeof(b), 5000.0 * 1024 * 1024 * 1024 * 1024),
			    "5000.00 TiB");
}

static void test_fmt_csv_quoting(void **state)
{
	(void)state;
	expect(fmt_csv, "malloc", "malloc");
	expect(fmt_csv, "a,b", "\"a,b\"");
	expect(fmt_csv, "say \"hi\"", "\"say \"\"hi\"\"\"");
	expect(fmt_csv, "two\nlines", "\"two\nlines\"");
	expect(fmt_csv, "", "");
	expect(fmt_csv, NULL, "");
}

static void test_fmt_json_escaping(void **state)
{
	(void)state;
	expect(fmt_json, "plain", "\"plain\"");
	expect(fmt_json, "q\"b\\", "\"q\\\"b\\\\\"");
	expect(fmt_json, "t\tn\n\x01", "\"t\\tn\\n\\u0001\"");
	expect(fmt_json, NULL, "null");
	/* Valid UTF-8 passes through; stray bytes become U+FFFD. */
	expect(fmt_json, "caf\xc3\xa9", "\"caf\xc3\xa9\"");
	expect(fmt_json, "bad\xff" "x", "\"bad\\ufffdx\"");
	expect(fmt_json, "cut\xc3", "\"cut\\ufffd\"");
	expect(fmt_json, "overlong\xc0\xaf", "\"overlong\\ufffd\\ufffd\"");
	expect(fmt_json, "surrogate\xed\xa0\x80", "\"surrogate\\ufffd\\ufffd\\ufffd\"");
}

/*
 * Short kernel names: real names PyTorch 2.x runs on CUDA (as CUPTI
 * reports them, demangled), each with the name Nsight Systems shows for
 * it; and names that are not C++ at all.
 */
static void test_fmt_short_names(void **state)
{
	static const struct {
		const char *full, *want;
	} names[] = {
		{ "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
		  " at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>,"
		  " at::detail::Array<char*, 3>)", "vectorized_elementwise_kernel" },
		{ "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
		  "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::"
		  "MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float,"
		  " float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda"
		  "(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float,"
		  " float, float, at::native::binary_internal::MulFunctor<float> > >(at::"
		  "TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::"
		  "binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})",
		  "elementwise_kernel" },
		{ "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::"
		  "MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp"
		  "<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
		  "reduce_kernel" },
		{ "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2,"
		  " 64, 64>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float,"
		  " unsigned int, 64, 64>, at::native::(anonymous namespace)::TensorSizeStride<"
		  "unsigned int, 4u>, int, unsigned int)", "CatArrayBatchedCopy" },
		{ "void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false,"
		  " false>(float*, float const*, int, int, int, bool const*, int, bool)",
		  "softmax_warp_forward" },
		{ "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>("
		  "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)", "Kernel2" },
		{ "ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn" },
		{ "gemm(float*, float*)", "gemm" },
		{ "void k<int, 2>(int*)", "k" },
		{ "Foo::operator()(int) const", "operator()" },
		{ "void a::b<c>::operator<<(int)", "operator<<" },
		/* Not demangled, or not a name that parses: as they are. */
		{ "_Z4gemmPfS_", "_Z4gemmPfS_" },
		{ "bad<(", "bad<(" },
	};
	char buf[256], small[6];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_string_equal(fmt_short_name(buf, sizeof(buf), names[i].full), names[i].want);
	/* A short buffer truncates, terminated. */
	assert_string_equal(fmt_short_name(small, sizeof(small), names[0].full), "vecto");
	assert_string_equal(fmt_short_name(buf, sizeof(buf), NULL), "?");
}

/*
 * Names shown together: alike short forms of different kernels keep their
 * template arguments, then numbers; equal names read equal; the rest stay
 * short.  The Kernel2s are real cuBLAS kernels of one PyTorch run, which a
 * table once showed as three rows "Kernel2".
 */
static void test_fmt_short_names_distinct(void **state)
{
	static const char *const names[] = {
		"void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>("
		"cutlass_80_simt_sgemm_128x128_8x4_nn_align1::Params)",
		"void at::native::reduce_kernel<512, 1>(int)",
		"void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>("
		"cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)",
		NULL,
		"void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>("
		"cutlass_80_simt_sgemm_128x128_8x4_nn_align1::Params)",
		/* alike even with their arguments: numbered in the set's order */
		"void a::k<1>(int)", "void b::k<1>(int)", "void a::k<1>(float)",
		"void b::k<1>(int)",
		/* arguments longer than FMT_DISTINCT_MAX: cut, marked */
		"void k2<aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1>(int)",
		"void k2<aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2>(int)",
	};
	size_t n = sizeof(names) / sizeof(names[0]);
	char **v = NULL;

	(void)state;
	assert_int_equal(fmt_short_names(names, n, &v), 0);
	assert_string_equal(v[0], "Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>");
	assert_string_equal(v[1], "reduce_kernel");
	assert_string_equal(v[2], "Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>");
	assert_null(v[3]);
	assert_string_equal(v[4], v[0]);
	assert_string_equal(v[5], "k<1> [1]");
	assert_string_equal(v[6], "k<1> [2]");
	assert_string_equal(v[7], "k<1> [3]");
	assert_string_equal(v[8], "k<1> [2]");
	/* both cut alike: numbered */
	assert_int_equal(strlen(v[9]), FMT_DISTINCT_MAX + 4);
	assert_string_equal(v[9] + FMT_DISTINCT_MAX - 3, "... [1]");
	assert_string_equal(v[10] + FMT_DISTINCT_MAX - 3, "... [2]");
	fmt_short_names_free(v, n);
	assert_int_equal(fmt_short_names(names, 0, &v), 0);
	fmt_short_names_free(v, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fmt_duration_units),
		cmocka_unit_test(test_fmt_bytes_units),
		cmocka_unit_test(test_fmt_csv_quoting),
		cmocka_unit_test(test_fmt_json_escaping),
		cmocka_unit_test(test_fmt_short_names),
		cmocka_unit_test(test_fmt_short_names_distinct),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

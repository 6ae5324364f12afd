/*
 * fmt: human units at their boundaries, CSV quoting (RFC 4180) and JSON
 * string escaping, including bytes that are not UTF-8; text for people
 * (every rule of fmt.h's table, widths) and folded frames.
 */
#include <locale.h>
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
	/* a slope rounding to nothing has no sign */
	assert_string_equal(fmt_bytes(b, sizeof(b), -0.3), "0 B");
	assert_string_equal(fmt_bytes(b, sizeof(b), -0.6), "-1 B");
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
	expect(fmt_csv, "cr\rtab\t", "\"cr\rtab\t\"");
	/* UTF-8 as it is, a stray byte U+FFFD (as in JSON) */
	expect(fmt_csv, "caf\xc3\xa9", "caf\xc3\xa9");
	expect(fmt_csv, "bad\xff,x", "\"bad\xef\xbf\xbd,x\"");
}

/* A text field a spreadsheet would run as a formula (OWASP's CSV
 * injection) is quoted with a ' in front; one that starts with ' has one
 * more only when a formula follows its 's, so that dropping the first '
 * of such a quoted field reads every name back. */
static void test_fmt_csv_formulas(void **state)
{
	(void)state;
	expect(fmt_csv, "=HYPERLINK(\"http://x\",\"y\")", "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"");
	expect(fmt_csv, "+1", "\"'+1\"");
	expect(fmt_csv, "-2+3", "\"'-2+3\"");
	expect(fmt_csv, "@SUM(A1)", "\"'@SUM(A1)\"");
	expect(fmt_csv, "\t=1", "\"'\t=1\"");
	expect(fmt_csv, "\r=1", "\"'\r=1\"");
	expect(fmt_csv, "-", "\"'-\"");
	expect(fmt_csv, "'=1", "\"''=1\"");
	expect(fmt_csv, "''-x,y", "\"'''-x,y\"");
	/* not at the start, or no formula after the 's: as before */
	expect(fmt_csv, "a=1", "a=1");
	expect(fmt_csv, "'train' mean", "'train' mean");
	expect(fmt_csv, "'", "'");
	expect(fmt_csv, "\n=1", "\"\n=1\"");
	assert_true(fmt_csv_guarded("=") && fmt_csv_guarded("''@") && !fmt_csv_guarded("'a="));
	assert_false(fmt_csv_guarded(NULL) || fmt_csv_guarded("") || fmt_csv_guarded("''"));
	assert_true(fmt_csv_quoted("-1") && fmt_csv_quoted("a,b") && !fmt_csv_quoted("a"));
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
	/* Every C0 byte and DEL escaped; C1, separators and bidirectional
	 * formatting as \uXXXX (the same string, nothing a terminal obeys). */
	for (int c = 1; c < 0x20; c++) {
		char in[2] = { (char)c, 0 }, *got = capture(fmt_json, in);

		assert_int_equal(got[1], '\\');
		free(got);
	}
	expect(fmt_json, "\x7f\r", "\"\\u007f\\u000d\"");
	expect(fmt_json, "csi\xc2\x9b" "2J", "\"csi\\u009b2J\"");
	expect(fmt_json, "\xc2\xa0nbsp", "\"\xc2\xa0nbsp\"");
	expect(fmt_json, "ls\xe2\x80\xa8rlo\xe2\x80\xae", "\"ls\\u2028rlo\\u202e\"");
}

static void esc_line(FILE *out, const char *s)
{
	fmt_esc_write(out, s, 1);
}

static void esc_value(FILE *out, const char *s)
{
	fmt_esc_write(out, s, 0);
}

/* Every rule of fmt.h's table, once each. */
static void test_fmt_esc_rules(void **state)
{
	(void)state;
	expect(esc_value, "plain text, caf\xc3\xa9", "plain text, caf\xc3\xa9");
	expect(esc_value, "a\nb\rc\td", "a\\nb\\rc\\td");
	expect(esc_value, "\x1b]0;x\x07", "\\x1b]0;x\\x07");
	expect(esc_value, "\x01\x1f\x7f", "\\x01\\x1f\\x7f");
	expect(esc_value, "bad\xff\xc3", "bad\\xff\\xc3");
	expect(esc_value, "overlong\xc0\xaf", "overlong\\xc0\\xaf");
	expect(esc_value, "c1\xc2\x80\xc2\x9b\xc2\x9f", "c1\\u0080\\u009b\\u009f");
	expect(esc_value, "\xe2\x80\xa8\xe2\x80\xa9", "\\u2028\\u2029");
	expect(esc_value,
	       "\xd8\x9c\xe2\x80\x8e\xe2\x80\x8f\xe2\x80\xaa\xe2\x80\xae\xe2\x81\xa6\xe2\x81\xa9",
	       "\\u061c\\u200e\\u200f\\u202a\\u202e\\u2066\\u2069");
	/* next to them, but shown: NBSP, the zero width joiner, U+2070 */
	expect(esc_value, "\xc2\xa0\xe2\x80\x8d\xe2\x81\xb0", "\xc2\xa0\xe2\x80\x8d\xe2\x81\xb0");
	/* a backslash is itself */
	expect(esc_value, "a\\x1b", "a\\x1b");
	/* the text's own lines kept, all else escaped */
	expect(esc_line, "one\ntwo\r\x1b\n", "one\ntwo\\r\\x1b\n");
	expect(esc_value, NULL, "");
}

/* esc_copy(), the collector's log lines: the same escapes, and a line cut
 * where it must be is never cut inside an escape or a UTF-8 sequence. */
static void test_esc_copy_bounded(void **state)
{
	const char *s = "job\x1b]0;x\x07\ncaf\xc3\xa9\xff";
	char out[64];
	size_t n;

	(void)state;
	n = esc_copy(out, sizeof(out), s, strlen(s));
	assert_int_equal(n, strlen(out));
	assert_string_equal(out, "job\\x1b]0;x\\x07\\ncaf\xc3\xa9\\xff");
	/* room for "job" and 3 bytes: not a part of "\x1b" */
	assert_int_equal(esc_copy(out, 7, s, strlen(s)), 3);
	assert_string_equal(out, "job");
	/* "job\x1b]0;x\x07\ncaf" escaped is 20 bytes: room for 21 does not
	 * split the 2-byte e-acute */
	assert_int_equal(esc_copy(out, 22, s, strlen(s)), 20);
	assert_string_equal(out, "job\\x1b]0;x\\x07\\ncaf");
	esc_copy(out, 23, s, strlen(s));
	assert_string_equal(out, "job\\x1b]0;x\\x07\\ncaf\xc3\xa9");
	assert_int_equal(esc_copy(out, 1, s, strlen(s)), 0);
	assert_string_equal(out, "");
}

static void test_fmt_esc_width_and_copies(void **state)
{
	const char *hostile = "\x1b]0;x\x07|\xc2\x9b|\xff", *plain = "caf\xc3\xa9";
	const char *ring[FMT_ESC_RING];

	(void)state;
	/* a column a character (é one), an escape its length */
	assert_int_equal(fmt_esc_width(plain), 4);
	assert_int_equal(fmt_esc_width(hostile), strlen("\\x1b]0;x\\x07|\\u009b|\\xff"));
	assert_int_equal(fmt_esc_width(""), 0);
	assert_int_equal(fmt_esc_width(NULL), 0);
	/* nothing to escape: the string itself */
	assert_ptr_equal(fmt_esc(plain), plain);
	assert_string_equal(fmt_esc(NULL), "(null)");
	/* FMT_ESC_RING copies live at once */
	for (int i = 0; i < FMT_ESC_RING; i++)
		ring[i] = fmt_esc(i % 2 ? "a\nb" : hostile);
	for (int i = 0; i < FMT_ESC_RING; i++)
		assert_string_equal(ring[i], i % 2 ? "a\\nb" : "\\x1b]0;x\\x07|\\u009b|\\xff");
}

/* Columns as a terminal shows them (wcwidth() in a UTF-8 locale): a wide
 * East Asian character or an emoji two, a combining mark or zero-width
 * character none; whatever the process's locale (C here), and without
 * changing it. */
static void test_fmt_text_width(void **state)
{
	static const struct {
		const char *s;
		size_t cols;
	} t[] = {
		{ "abc", 3 },
		{ "\xe4\xb8\xad", 2 },                    /* 中 U+4E2D */
		{ "\xe8\xae\xad\xe7\xbb\x83 step", 9 },   /* 训练 step */
		{ "\xef\xbc\xa1", 2 },                    /* Ａ fullwidth U+FF21 */
		{ "\xea\xb0\x80", 2 },                    /* 가 U+AC00 */
		{ "k\xf0\x9f\x98\x80", 3 },              /* k😀 U+1F600 */
		{ "cafe\xcc\x81", 4 },                     /* e + U+0301 */
		{ "a\xe2\x80\x8b" "b", 2 },               /* U+200B zero width */
		{ "caf\xc3\xa9", 4 },
		{ "\xff" "a", 2 },                          /* not UTF-8: one */
		{ "", 0 },
	};
	char num[32];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		print_message("%zu\n", i);
		assert_int_equal(fmt_text_width(t[i].s, strlen(t[i].s)), t[i].cols);
	}
	/* through the escaping a table pads by */
	assert_int_equal(fmt_esc_width("\xe4\xb8\xad\t"), 4);
	assert_int_equal(fmt_esc_width("\xe4\xb8\xad\xc2\x9b"), 8);
	/* cut between characters, within the columns */
	assert_int_equal(fmt_text_cut("\xe4\xb8\xad\xe6\x96\x87", 3), 3);
	assert_int_equal(fmt_text_cut("\xe4\xb8\xad\xe6\x96\x87", 4), 6);
	assert_int_equal(fmt_text_cut("\xe4\xb8\xad\xe6\x96\x87", 1), 0);
	assert_int_equal(fmt_text_cut("cafe\xcc\x81!", 4), 6);
	assert_int_equal(fmt_text_cut("abc", 9), 3);
	/* the thread's locale and the numbers it writes are as they were */
	assert_true(uselocale((locale_t)0) == LC_GLOBAL_LOCALE);
	snprintf(num, sizeof(num), "%.1f", 1.5);
	assert_string_equal(num, "1.5");
	assert_int_equal(MB_CUR_MAX, 1);
}

static void test_fmt_folded_frame(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "main (a.c:12)", "main (a.c:12)" },
		{ "f;g (x;y.c:1)", "f:g (x:y.c:1)" },
		{ "two\nlines\r\x1b[0m", "two\\nlines\\r\\x1b[0m" },
		/* what flamegraph.pl reads as a count, the second of a
		 * differential line: the space becomes '_' */
		{ "sym 42", "sym_42" },
		{ "sym  42", "sym _42" },
		{ "sym 4.5", "sym_4.5" },
		{ "sym 42.", "sym_42." },
		/* not a count: as it is */
		{ "sym 1.2.3", "sym 1.2.3" },
		{ "sym .5", "sym .5" },
		{ "sym x42", "sym x42" },
		{ "42", "42" },
		{ "", "" },
		/* a tab before the digits is escaped first: no blank left */
		{ "sym\t42", "sym\\t42" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = fmt_folded_frame(cases[i].in);

		assert_non_null(got);
		assert_string_equal(got, cases[i].want);
		/* plain exactly when the frame is written as it is */
		assert_int_equal(fmt_folded_plain(cases[i].in), !strcmp(cases[i].in, cases[i].want));
		free(got);
	}
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
		cmocka_unit_test(test_fmt_csv_formulas),
		cmocka_unit_test(test_fmt_json_escaping),
		cmocka_unit_test(test_fmt_esc_rules),
		cmocka_unit_test(test_esc_copy_bounded),
		cmocka_unit_test(test_fmt_esc_width_and_copies),
		cmocka_unit_test(test_fmt_text_width),
		cmocka_unit_test(test_fmt_folded_frame),
		cmocka_unit_test(test_fmt_short_names),
		cmocka_unit_test(test_fmt_short_names_distinct),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

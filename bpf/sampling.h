/*
 * The heap byte sampler of preload/sampler.h in integer arithmetic, for the
 * BPF programs (which have no floating point).  Same process: every byte
 * is a point of a Poisson process with mean spacing `mean`, an allocation
 * is sampled when a point falls in it, so P(sampled) = 1 - exp(-n/mean)
 * and the collector's weights stay unbiased.  The distance to the next
 * point is drawn as in sampler_draw(): -ln(u) * mean + 1 with u uniform in
 * (0, 1] on 53 bits; here -ln(u) = (53 - log2(k)) * ln 2 for u = k / 2^53,
 * with log2 computed to 32 fractional bits by repeated squaring, so a draw
 * differs from the double-precision one by under a part in 10^7 of itself
 * plus a billionth of the mean (tested in test/unit/test_bpf_sampling.c).
 *
 * Header only, no libc: included by bpf/probes.bpf.c and by its unit test
 * (test/unit/test_bpf_sampling.c), which checks it against sampler.h.  The
 * includer provides __u32/__u64 and AT_INLINE (always_inline for BPF).
 */
#ifndef SHIMMER_BPF_SAMPLING_H
#define SHIMMER_BPF_SAMPLING_H

#ifndef AT_INLINE
#define AT_INLINE static inline
#endif

/* The index of the highest set bit of x (x != 0). */
AT_INLINE __u32 at_ilog2(__u64 x)
{
	__u32 n = 0;

	if (x >> 32) { x >>= 32; n += 32; }
	if (x >> 16) { x >>= 16; n += 16; }
	if (x >> 8) { x >>= 8; n += 8; }
	if (x >> 4) { x >>= 4; n += 4; }
	if (x >> 2) { x >>= 2; n += 2; }
	if (x >> 1) n += 1;
	return n;
}

/* log2(k) in 32.32 fixed point, for k >= 1. */
AT_INLINE __u64 at_log2_q32(__u64 k)
{
	__u32 n = at_ilog2(k), i;
	__u64 x, frac = 0;

	/* x = k / 2^n in 1.31 fixed point, in [1, 2) */
	x = n >= 31 ? k >> (n - 31) : k << (31 - n);
#ifdef __clang__
#pragma unroll
#endif
	for (i = 0; i < 32; i++) {
		x = (x * x) >> 31; /* x^2, in [1, 4) */
		frac <<= 1;
		if (x >= (2ull << 31)) {
			x >>= 1;
			frac |= 1;
		}
	}
	return (__u64)n << 32 | frac;
}

/* (d * m) >> 48 for d < 2^40, m < 2^60, from 32-bit halves (the BPF target
 * has no 128-bit product); the dropped carries of the low halves cost at
 * most 2 units of the result. */
AT_INLINE __u64 at_mul_shr48(__u64 d, __u64 m)
{
	__u64 dh = d >> 32, dl = d & 0xffffffffu, mh = m >> 32, ml = m & 0xffffffffu;

	return ((dh * mh) << 16) + ((dh * ml) >> 16) + ((dl * mh) >> 16) +
	       ((dl * ml) >> 48);
}

/* mean * ln 2 in 48.16 fixed point: what at_draw() scales by.  The engine
 * computes it once (in double) and hands it to the BPF program. */
#define AT_LN2_Q32 2977044472ull /* ln 2 * 2^32, rounded */

/*
 * A distance to the next sample, for k uniform in [1, 2^53] and
 * mean_ln2_q16 = mean * ln 2 * 2^16: -log2(k / 2^53) * ln 2 * mean + 1.
 */
AT_INLINE __u64 at_draw(__u64 k, __u64 mean_ln2_q16)
{
	__u64 d = ((__u64)53 << 32) - at_log2_q32(k); /* -log2(u), 32.32 */

	return at_mul_shr48(d, mean_ln2_q16) + 1;
}

#endif /* SHIMMER_BPF_SAMPLING_H */

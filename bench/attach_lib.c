/*
 * One of attach_bench's filler libraries: some code and data, a function
 * with its own symbol, as an ordinary small shared object has.
 */
int shimmer_bench_filler(int x);
int shimmer_bench_filler_data[64] = { 1 };

int shimmer_bench_filler(int x)
{
	return x * 3 + shimmer_bench_filler_data[x & 63];
}

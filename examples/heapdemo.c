/*
 * heapdemo: a small program to profile with shimmer.  Four threads each
 * build up a working set of heap blocks (a "layer cache" that grows to 64
 * entries of 16-272 KiB, then shrinks back), and one "trainer" thread does
 * ten steps of a training loop on the (fake) GPU: cudaMalloc of the
 * activations, a host-to-device copy, two kernel launches, a synchronize
 * and a device-to-host copy of the result.  Runs for about a second.
 *
 *   build/bin/shimmer run -- build/examples/heapdemo
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NCACHE 4
#define CACHE_MAX 64
#define STEPS 10

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void *cache_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	void *blocks[CACHE_MAX] = { 0 };

	for (int round = 0; round < 3; round++) {
		/* Grow: fill the cache. */
		for (int i = 0; i < CACHE_MAX; i++) {
			size_t size = (16 + (size_t)(rand_r(&seed) % 256)) << 10;

			blocks[i] = malloc(size);
			if (blocks[i])
				memset(blocks[i], i, 64);
			if (i % 8 == 7)
				nap_ms(5);
		}
		/* Shrink: evict all but a few, largest index first. */
		for (int i = CACHE_MAX - 1; i >= 4; i--) {
			free(blocks[i]);
			blocks[i] = NULL;
		}
		nap_ms(40);
	}
	for (int i = 0; i < 4; i++)
		free(blocks[i]);
	return NULL;
}

static void kernel_stub(void)
{
}

static int check(cudaError_t err, const char *what)
{
	if (err != cudaSuccess) {
		fprintf(stderr, "heapdemo: %s: %s\n", what, cudaGetErrorString(err));
		return -1;
	}
	return 0;
}

static void *trainer(void *arg)
{
	const size_t batch = 4u << 20;
	float *host = malloc(batch);
	void *weights = NULL;
	int *ok = arg;

	*ok = 0;
	if (!host || check(cudaMalloc(&weights, 64u << 20), "cudaMalloc weights"))
		goto out;
	for (int step = 0; step < STEPS; step++) {
		void *act = NULL, *args[1] = { &act };
		dim3 grid = { 256, 1, 1 }, block = { 256, 1, 1 };

		for (size_t i = 0; i < batch / sizeof(float); i += 1024)
			host[i] = (float)(step + i);
		if (check(cudaMalloc(&act, batch), "cudaMalloc activations") ||
		    check(cudaMemcpy(act, host, batch, cudaMemcpyHostToDevice), "cudaMemcpy") ||
		    check(cudaLaunchKernel((const void *)(uintptr_t)kernel_stub, grid, block, args,
					   0, 0), "forward") ||
		    check(cudaLaunchKernel((const void *)(uintptr_t)kernel_stub, grid, block, args,
					   4096, 0), "backward") ||
		    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ||
		    check(cudaMemcpy(host, act, 4096, cudaMemcpyDeviceToHost), "cudaMemcpy back") ||
		    check(cudaFree(act), "cudaFree"))
			goto out;
		nap_ms(60);
	}
	*ok = 1;
out:
	if (weights)
		cudaFree(weights);
	free(host);
	return NULL;
}

int main(void)
{
	pthread_t caches[NCACHE], train;
	int ok = 0;

	printf("heapdemo: %d cache threads and a %d-step training loop\n", NCACHE, STEPS);
	fflush(stdout);
	for (int i = 0; i < NCACHE; i++)
		pthread_create(&caches[i], NULL, cache_thread, (void *)(uintptr_t)(i + 1));
	pthread_create(&train, NULL, trainer, &ok);
	for (int i = 0; i < NCACHE; i++)
		pthread_join(caches[i], NULL);
	pthread_join(train, NULL);
	printf("heapdemo: %s\n", ok ? "done" : "failed");
	return ok ? 0 : 1;
}

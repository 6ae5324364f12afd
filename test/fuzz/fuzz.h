/*
 * What the fuzz targets share: a scratch store that is started afresh now
 * and then (it would grow without end), and the collector's clock.  Each
 * target (fuzz_*.c) defines LLVMFuzzerTestOneInput(); built with clang's
 * -fsanitize=fuzzer it is a libFuzzer binary (`make fuzz`), built with
 * driver.c it replays files (the seed corpus and every input that once
 * failed, in `make test`).
 */
#ifndef SHIMMER_TEST_FUZZ_H
#define SHIMMER_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/client.h"
#include "collector/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_path[64];

/* The scratch store and its side files go at exit. */
static inline void fuzz_cleanup(void)
{
	char side[80];

	unlink(fuzz_path);
	snprintf(side, sizeof(side), "%s-wal", fuzz_path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", fuzz_path);
	unlink(side);
}

/* A collector with a fresh store every 2000 calls. */
static inline struct collector *fuzz_collector(void)
{
	static struct collector co;
	static unsigned uses;
	char *path = fuzz_path;

	if (co.store && ++uses % 2000)
		return &co;
	log_level = -1; /* rejections are expected: no log lines */
	if (co.store) {
		while (co.clients)
			client_free(co.clients);
		store_close(co.store);
		fuzz_cleanup();
	} else {
		atexit(fuzz_cleanup);
	}
	snprintf(path, sizeof(fuzz_path), "/tmp/shimmer-fuzz-%d.db", (int)getpid());
	unlink(path);
	co.store = store_open(path);
	if (!co.store)
		abort();
	clock_start(&co.clock, 1000000, 1000);
	clock_update(&co.clock, 3000000, 2000);
	return &co;
}

#endif

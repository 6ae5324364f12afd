/*
 * Region contents: the shared memory a hostile producer writes at will.
 * An input is [u8 flags][u64 limit][region bytes...] (flags: bit 0 the
 * clock, bit 1 sample mode, bits 2-3 the heap's rows, aggregates or both):
 * the bytes are laid
 * over a region of 2 slots of 4 KiB from its start (the header's magic,
 * version and geometry are then set right, so that it maps), and the ring
 * source drains it into the ingest sink (the rows of a real store): a pass
 * up to limit, a final pass, the counters.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "collector/ingest.h"
#include "collector/ring.h"
#include "fuzz.h"
#include "wire.h"

#define RING 4096u
#define NSLOTS 2u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct collector *co = fuzz_collector();
	struct ring_geometry g = { NSLOTS, RING, SHM_REGION_BYTES(NSLOTS, RING) };
	struct shm_region h;
	uint64_t limit = UINT64_MAX;
	struct ingest_conf ic = { .store = co->store, .proc_id = 1, .tsc = &co->clock,
				  .malloc_mode = SHM_MALLOC_ALL, .sample_bytes = 4096,
				  .nstreams = NSLOTS };
	struct ingest *in;
	struct ring *r;
	char why[256];
	int fd, err;

	if (size < 9)
		return 0;
	ic.clock = data[0] & 1 ? SHM_CLOCK_TSC : SHM_CLOCK_MONOTONIC;
	ic.malloc_mode = data[0] >> 1 & 1 ? SHM_MALLOC_SAMPLE : SHM_MALLOC_ALL;
	ic.heap_rows = (data[0] >> 2 & 3) == 0 ? SHM_HELLO_HEAP_ROWS
		       : (data[0] >> 2 & 3) == 1 ? SHM_HELLO_HEAP_AGG
						 : SHM_HELLO_HEAP_ROWS | SHM_HELLO_HEAP_AGG;
	memcpy(&limit, data + 1, 8);
	data += 9;
	size -= 9;
	if (size > g.region_bytes)
		size = g.region_bytes;
	fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)g.region_bytes) < 0 ||
	    (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	memset(&h, 0, sizeof(h));
	if (pread(fd, &h, sizeof(h), 0) < 0)
		abort();
	h.magic = SHM_MAGIC;
	h.version = SHM_WIRE_VERSION;
	h.nslots = NSLOTS;
	h.ring_bytes = RING;
	if (pwrite(fd, &h, sizeof(h), 0) != sizeof(h) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		abort();
	r = ring_new(fd, &g, why, sizeof(why));
	in = ingest_new(&ic);
	if (!r || !in)
		abort();
	err = ring_drain(r, limit, ingest_sink(in));
	if (!err || err == -EBADMSG)
		err = ring_drain(r, UINT64_MAX, ingest_sink(in));
	if (!err || err == -EBADMSG)
		err = ring_flush(r, ingest_sink(in));
	if (!err || err == -EBADMSG)
		err = ingest_end(in);
	if (err && err != -EBADMSG)
		abort();
	store_commit(co->store);
	ring_free(r);
	ingest_free(in);
	close(fd);
	return 0;
}

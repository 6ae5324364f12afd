/*
 * Mapping a region: a HELLO's geometry against a memfd of any size, seals
 * and header.  An input is [u32 nslots][u32 ring_bytes][u64 region_bytes]
 * [u64 file size][u8 seals][header bytes...]; the memfd is made so (its
 * size at most 1 MiB), and ring_new() must refuse it or map a region that
 * drains without a fault.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "collector/ring.h"
#include "fuzz.h"
#include "wire.h"

static int nop_record(void *ctx, uint32_t s, uint32_t t, const union rec *r)
{
	(void)ctx, (void)s, (void)t, (void)r;
	return 0;
}

static void nop_stream(void *ctx, uint32_t s)
{
	(void)ctx, (void)s;
}

static int nop_counts(void *ctx, uint32_t t, uint16_t fn, uint64_t n, uint64_t b)
{
	(void)ctx, (void)t, (void)fn, (void)n, (void)b;
	return 0;
}

static int nop_drops(void *ctx, uint32_t t, const char *why, uint64_t n)
{
	(void)ctx, (void)t, (void)why, (void)n;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct rec_sink sink = { nop_record, nop_stream, nop_counts, nop_drops, NULL };
	struct ring_geometry g;
	uint64_t file;
	uint8_t seals;
	char why[256];
	struct ring *r;
	int fd;

	if (size < 25)
		return 0;
	memcpy(&g.nslots, data, 4);
	memcpy(&g.ring_bytes, data + 4, 4);
	memcpy(&g.region_bytes, data + 8, 8);
	memcpy(&file, data + 16, 8);
	seals = data[24];
	data += 25;
	size -= 25;
	file %= (1u << 20) + 1;
	fd = memfd_create("fuzz", MFD_CLOEXEC | (seals & 0x80 ? 0 : MFD_ALLOW_SEALING));
	if (fd < 0 || ftruncate(fd, (off_t)file) < 0)
		abort();
	if (size > file)
		size = (size_t)file;
	if (size && pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	fcntl(fd, F_ADD_SEALS, seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL));
	r = ring_new(fd, &g, why, sizeof(why));
	if (!r && errno != EBADMSG && errno != ENOMEM)
		abort();
	if (r) {
		int err = ring_drain(r, UINT64_MAX, &sink);

		if (err && err != -EBADMSG)
			abort();
		ring_free(r);
	}
	close(fd);
	return 0;
}

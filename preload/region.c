/*
 * Region setup and slot ownership.  The collector refuses unsealed
 * regions: once it has mapped the memfd, a client that shrank the file
 * would kill it with SIGBUS.  So we seal size and seals right after sizing.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "region.h"

int region_create(struct region *r, uint32_t nslots, uint32_t ring_bytes)
{
	uint64_t bytes = SHM_REGION_BYTES(nslots, ring_bytes);
	struct stat sb;
	void *map;
	int fd, err;

	*r = (struct region){ .fd = -1, .nslots = nslots, .ring_bytes = ring_bytes };
	fd = memfd_create("shimmer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0) {
		err = -errno;
		goto out;
	}
	map = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	r->hdr = map;
	r->bytes = bytes;
	r->fd = fd;
	r->hdr->magic = SHM_MAGIC;
	r->hdr->version = SHM_WIRE_VERSION;
	r->hdr->nslots = nslots;
	r->hdr->ring_bytes = ring_bytes;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		err = -errno;
		munmap(map, bytes);
		r->hdr = 0;
		r->bytes = 0;
		r->fd = -1;
		goto out;
	}
	if (fstat(fd, &sb) == 0) {
		r->fd_dev = (uint64_t)sb.st_dev;
		r->fd_ino = (uint64_t)sb.st_ino;
	}
	return 0;
out:
	close(fd);
	return err;
}

int region_fd(struct region *r)
{
	struct stat sb;

	if (r->fd >= 0 && (fstat(r->fd, &sb) < 0 || (uint64_t)sb.st_ino != r->fd_ino ||
			  (uint64_t)sb.st_dev != r->fd_dev || !r->fd_ino))
		r->fd = -1; /* the program's now: never ours to close or send */
	return r->fd;
}

void region_destroy(struct region *r)
{
	if (r->hdr)
		munmap(r->hdr, r->bytes);
	if (region_fd(r) >= 0)
		close(r->fd);
	r->hdr = 0;
	r->bytes = 0;
	r->fd = -1;
}

int region_claim(struct region *r, uint32_t hint, uint32_t tid)
{
	uint32_t i, idx, hwm;

	for (i = 0; i < r->nslots; i++) {
		struct shm_slot *s;
		uint32_t st = SHM_SLOT_FREE;

		idx = (hint + i) % r->nslots;
		s = region_slot(r, idx);
		if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) != SHM_SLOT_FREE ||
		    !__atomic_compare_exchange_n(&s->state, &st, SHM_SLOT_ACTIVE, 0,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&s->tid, tid, __ATOMIC_RELAXED);
		__atomic_store_n(&s->generation, s->generation + 1, __ATOMIC_RELAXED);
		memset(s->count, 0, sizeof(s->count));
		memset(s->bytes, 0, sizeof(s->bytes));
		hwm = __atomic_load_n(&r->hdr->slots_hwm, __ATOMIC_RELAXED);
		while (hwm < idx + 1 &&
		       !__atomic_compare_exchange_n(&r->hdr->slots_hwm, &hwm, idx + 1, 1,
						    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
		return (int)idx;
	}
	return -ENOSPC;
}

void region_retire(struct shm_slot *slot)
{
	__atomic_store_n(&slot->state, SHM_SLOT_RETIRED, __ATOMIC_RELEASE);
}

int region_retired(const struct region *r)
{
	uint32_t i, hwm = __atomic_load_n(&r->hdr->slots_hwm, __ATOMIC_ACQUIRE);

	for (i = 0; i < hwm && i < r->nslots; i++)
		if (__atomic_load_n(&region_slot(r, i)->state, __ATOMIC_RELAXED) == SHM_SLOT_RETIRED)
			return 1;
	return 0;
}

int region_reap(struct region *r, uint32_t pid)
{
	uint32_t i, hwm = __atomic_load_n(&r->hdr->slots_hwm, __ATOMIC_ACQUIRE);
	int n = 0;

	for (i = 0; i < hwm && i < r->nslots; i++) {
		struct shm_slot *s = region_slot(r, i);
		uint32_t st = SHM_SLOT_ACTIVE;
		uint32_t tid = __atomic_load_n(&s->tid, __ATOMIC_RELAXED);

		if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) != SHM_SLOT_ACTIVE ||
		    syscall(SYS_tgkill, pid, tid, 0) == 0 || errno != ESRCH)
			continue;
		if (__atomic_compare_exchange_n(&s->state, &st, SHM_SLOT_RETIRED, 0,
						__ATOMIC_RELEASE, __ATOMIC_RELAXED))
			n++;
	}
	return n;
}

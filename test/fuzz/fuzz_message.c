/*
 * Socket messages: an input is a sequence of messages, each as
 * [u8 flags][u16 length][length bytes]; flags bit 0 sends the region's
 * memfd with it, bit 1 makes the peer (as the kernel would tell it) the
 * pid and uid the message claims at its HELLO offsets.  The region is a
 * valid one (1 slot of 4 KiB) made for each input.  Every message goes
 * through client_message() as recvmsg() would hand it over; then a drain
 * and the end, as when the socket closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "fuzz.h"
#include "wire.h"

#define RING 4096u

static int region(void)
{
	struct shm_region h = { .magic = SHM_MAGIC, .version = SHM_WIRE_VERSION,
				.nslots = 1, .ring_bytes = RING };
	int fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)SHM_REGION_BYTES(1, RING)) < 0 ||
	    pwrite(fd, &h, sizeof(h), 0) != sizeof(h) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		abort();
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct collector *co = fuzz_collector();
	struct client *c = client_new(co, -1);
	int memfd = region(), err = 0;

	if (!c)
		abort();
	for (size_t at = 0; at + 3 <= size && !err;) {
		uint8_t flags = data[at];
		size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
		int fd = -1;

		at += 3;
		if (len > size - at)
			len = size - at;
		if (flags & 2 && len >= sizeof(struct shm_msg_hello)) {
			struct shm_msg_hello h;

			memcpy(&h, data + at, sizeof(h));
			client_set_peer(c, h.pid, h.uid);
		}
		if (flags & 1)
			fd = dup(memfd);
		err = client_message(c, data + at, len, &fd, fd >= 0, 0);
		at += len;
	}
	if (!err)
		err = client_drain(c);
	if (err != 0 && err != -EBADMSG)
		abort(); /* anything but a refusal is the store's: it must not happen here */
	client_end(c, err ? CLIENT_REJECTED : CLIENT_CLOSED, 1);
	client_free(c);
	close(memfd);
	return 0;
}

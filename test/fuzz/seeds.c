/*
 * Writes the seed corpus of the fuzz targets (test/fuzz/corpus/TARGET/),
 * built from common/wire.h so that the seeds follow the wire format:
 * `make fuzz-seeds` runs it.  Each seed is a valid input a target should
 * accept (or a known-hostile one), for libFuzzer to mutate from.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wire.h"

#define RING 4096u

static const char *dir;

static void put(const char *target, const char *name, const void *data, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", dir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* ---- message: [u8 flags][u16 len][message] ... ---- */

static uint8_t buf[1 << 16];
static size_t blen;

static void msg(uint8_t flags, const void *m, size_t len)
{
	buf[blen++] = flags;
	buf[blen++] = (uint8_t)len;
	buf[blen++] = (uint8_t)(len >> 8);
	memcpy(buf + blen, m, len);
	blen += len;
}

static void hdr(struct shm_msg_hdr *h, uint16_t type, uint32_t len)
{
	*h = (struct shm_msg_hdr){ SHM_MAGIC, SHM_WIRE_VERSION, type, len, 0 };
}

/* HELLO with flags (SHM_HELLO_*: a reconnect's too). */
static void hello_flags(uint32_t flags)
{
	static const char text[] = "/bin/prog" "prog\0-x" "host" "pgid:1";
	uint8_t m[sizeof(struct shm_msg_hello) + sizeof(text)];
	struct shm_msg_hello h = {
		.pid = 42, .ppid = 1, .uid = 1000, .rank = -1, .local_rank = -1,
		.malloc_mode = SHM_MALLOC_ALL, .clock = SHM_CLOCK_MONOTONIC,
		.sample_bytes = 4096, .start_mono_ns = 1000, .start_ts = 1000,
		.region_bytes = SHM_REGION_BYTES(1, RING), .nslots = 1, .ring_bytes = RING,
		.exe_len = 9, .argv_len = 7, .host_len = 4, .job_len = 6,
		.job_kind = SHM_JOB_PGID, .flags = flags,
	};

	hdr(&h.hdr, SHM_MSG_HELLO, (uint32_t)(sizeof(h) + 26));
	memcpy(m, &h, sizeof(h));
	memcpy(m + sizeof(h), text, 26);
	msg(3, m, sizeof(h) + 26);
}

static void hello(void)
{
	hello_flags(0);
}

static void string(uint32_t id, const char *text)
{
	uint8_t m[1024];
	struct shm_msg_string s = { .id = id, .len = (uint32_t)strlen(text) };

	hdr(&s.hdr, SHM_MSG_STRING, (uint32_t)(sizeof(s) + s.len));
	memcpy(m, &s, sizeof(s));
	memcpy(m + sizeof(s), text, s.len);
	msg(0, m, sizeof(s) + s.len);
}

static void messages(void)
{
	struct shm_msg_thread t = { .slot = 0, .tid = 42, .name_id = 1, .ts = 2000 };
	struct shm_msg_bye b = { .ts = 9000 };
	struct shm_msg_signal f = { .signo = 11, .code = 1, .addr = 0x10, .tid = 42, .ts = 8000 };
	struct shm_msg_hdr k;
	uint8_t g[sizeof(struct shm_msg_gpu_status) + 8];
	struct shm_msg_gpu_status gs = { .status = SHM_GPU_ERROR, .len = 8 };

	hdr(&t.hdr, SHM_MSG_THREAD, sizeof(t));
	hdr(&b.hdr, SHM_MSG_BYE, sizeof(b));
	hdr(&f.hdr, SHM_MSG_SIGNAL, sizeof(f));
	hdr(&k, SHM_MSG_KICK, sizeof(k));
	hdr(&gs.hdr, SHM_MSG_GPU_STATUS, sizeof(g));
	memcpy(g, &gs, sizeof(gs));
	memcpy(g + sizeof(gs), "no cupti", 8);

	blen = 0;
	hello();
	put("message", "hello", buf, blen);
	string(1, "main");
	string(2, "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE");
	msg(0, &t, sizeof(t));
	msg(0, g, sizeof(g));
	msg(0, &k, sizeof(k));
	msg(0, &b, sizeof(b));
	put("message", "session", buf, blen);
	blen = 0;
	hello();
	msg(0, &f, sizeof(f));
	put("message", "signal", buf, blen);
	blen = 0;
	hello();
	string(3, "_Z1fI1AIiES_IS1_S1_ES_IS2_S2_ES_IS3_S3_ES_IS4_S4_ES_IS5_S5_ES_IS6_S6_E"
		  "S_IS7_S7_ES_IS8_S8_ES_IS9_S9_ES_ISA_SA_ES_ISB_SB_ES_ISC_SC_ES_ISD_SD_E"
		  "S_ISE_SE_ES_ISF_SF_ES_ISG_SG_ES_ISH_SH_ES_ISI_SI_ES_ISJ_SJ_ES_ISK_SK_E"
		  "S_ISL_SL_ES_ISM_SM_ES_ISN_SN_ES_ISO_SO_EEvv");
	put("message", "demangle-bomb", buf, blen);
	/* a process that lost its collector says HELLO again (the fuzz
	 * target's store holds no row to continue: refused, as a forged one) */
	blen = 0;
	hello_flags(SHM_HELLO_RECONNECT | SHM_HELLO_LOSSLESS);
	string(1, "main");
	msg(0, &t, sizeof(t));
	msg(0, &b, sizeof(b));
	put("message", "reconnect", buf, blen);
}

/* ---- ring: [u8 clock][u64 limit][region] ---- */

static uint8_t region[9 + SHM_REGION_BYTES(2, RING)];

static struct shm_slot *slot(uint32_t i)
{
	return (struct shm_slot *)(region + 9 + SHM_REGION_HDR_BYTES + i * SHM_SLOT_STRIDE(RING));
}

static void push(uint32_t i, const void *rec, size_t len)
{
	struct shm_slot *s = slot(i);

	memcpy((uint8_t *)s + SHM_SLOT_CTL_BYTES + s->head % RING, rec, len);
	s->head += len;
}

static void rings(void)
{
	struct shm_region *h = (struct shm_region *)(region + 9);
	uint64_t limit = UINT64_MAX;
	struct shm_rec_heap m = { .hdr = { SHM_REC_HEAP, sizeof(m), SHM_FN_MALLOC, SHM_F_TIMED },
				  .t_begin = 100, .t_end = 110, .ptr = 0x1000, .size = 64,
				  .stack_id = 1, .seq = 1 };
	struct shm_rec_heap fr = { .hdr = { SHM_REC_HEAP, sizeof(fr), SHM_FN_FREE, 0 },
				   .t_begin = 200, .ptr = 0x1000, .seq_free = 1 };
	struct shm_rec_cuda c = { .hdr = { SHM_REC_CUDA, sizeof(c), SHM_FN_CUDA_MALLOC, SHM_F_TIMED },
				  .t_begin = 120, .t_end = 130, .device = 0, .ptr = 0x7000, .bytes = 4096 };
	struct shm_rec_range push_r = { .hdr = { SHM_REC_RANGE, sizeof(push_r), 0, 0 }, .ts = 140,
					 .op = SHM_RANGE_PUSH, .name_id = 1 };
	struct shm_rec_range pop_r = { .hdr = { SHM_REC_RANGE, sizeof(pop_r), 0, 0 }, .ts = 150,
				       .op = SHM_RANGE_POP };
	struct shm_rec_kernel k = { .hdr = { SHM_REC_KERNEL, sizeof(k), 0, 0 }, .start = 160,
				    .end = 170, .correlation = 1, .name_id = 2 };
	struct shm_rec_api a = { .hdr = { SHM_REC_API, sizeof(a), 0, 0 }, .start = 155, .end = 158,
				 .correlation = 1, .domain = SHM_API_RUNTIME };
	struct shm_rec_gpu_window w = { .hdr = { SHM_REC_GPU_WINDOW, sizeof(w), 0, 0 }, .start = 150,
					.end = 180, .since = 100, .calls = 1 };
	struct {
		struct shm_rec_stack h;
		uint64_t pc[2];
	} st = { { { SHM_REC_STACK, sizeof(st), 0, 0 }, 1, 2 }, { 0x400000, 0x400100 } };
	struct shm_rec_module mod = { .hdr = { SHM_REC_MODULE, sizeof(mod), 0, 0 }, .ts = 90,
				      .lo = 0x400000, .hi = 0x500000, .path_id = 3, .build_id_len = 2 };
	struct shm_rec_counter ctr = { .hdr = { SHM_REC_COUNTER, sizeof(ctr), 0, 0 }, .ts = 175,
				       .name_id = 4, .value = 1.5 };

	region[0] = 0;
	memcpy(region + 1, &limit, 8);
	h->magic = SHM_MAGIC;
	h->version = SHM_WIRE_VERSION;
	h->nslots = 2;
	h->ring_bytes = RING;
	h->slots_hwm = 2;
	for (uint32_t i = 0; i < 2; i++) {
		slot(i)->state = SHM_SLOT_ACTIVE;
		slot(i)->tid = 100 + i;
		slot(i)->generation = 1;
		slot(i)->count[SHM_FN_MALLOC] = 1;
	}
	push(0, &mod, sizeof(mod));
	push(0, &st, sizeof(st));
	push(0, &m, sizeof(m));
	push(0, &c, sizeof(c));
	push(0, &push_r, sizeof(push_r));
	push(0, &pop_r, sizeof(pop_r));
	push(1, &a, sizeof(a));
	push(1, &fr, sizeof(fr));
	push(1, &k, sizeof(k));
	push(1, &w, sizeof(w));
	push(1, &ctr, sizeof(ctr));
	slot(1)->state = SHM_SLOT_RETIRED;
	put("ring", "records", region, sizeof(region));
	/* the same, drained in two passes at 150 */
	limit = 150;
	memcpy(region + 1, &limit, 8);
	put("ring", "two-passes", region, sizeof(region));
}

/* ---- region: [u32 nslots][u32 ring][u64 region_bytes][u64 file][u8 seals][hdr] ---- */

static void regions(void)
{
	uint8_t in[25 + sizeof(struct shm_region)];
	struct shm_region h = { .magic = SHM_MAGIC, .version = SHM_WIRE_VERSION, .nslots = 1,
				.ring_bytes = RING };
	uint32_t nslots = 1, ring = RING;
	uint64_t bytes = SHM_REGION_BYTES(1, RING), file = bytes;

	memcpy(in, &nslots, 4);
	memcpy(in + 4, &ring, 4);
	memcpy(in + 8, &bytes, 8);
	memcpy(in + 16, &file, 8);
	in[24] = 0x01 | 0x04; /* F_SEAL_SHRINK | F_SEAL_GROW */
	memcpy(in + 25, &h, sizeof(h));
	put("region", "valid", in, sizeof(in));
	file = 4096;
	memcpy(in + 16, &file, 8);
	put("region", "short", in, sizeof(in));
	in[24] = 0;
	file = bytes;
	memcpy(in + 16, &file, 8);
	put("region", "unsealed", in, sizeof(in));
}

static void names(void)
{
	static const char *const n[] = {
		"_Z3fooi",
		"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5"
		"ArrayIPcLi1EEEEEviT0_T1_",
		"_Z1fI1AIiES_IS1_S1_ES_IS2_S2_ES_IS3_S3_ES_IS4_S4_ES_IS5_S5_ES_IS6_S6_ES_IS7_S7_E"
		"S_IS8_S8_ES_IS9_S9_ES_ISA_SA_ES_ISB_SB_ES_ISC_SC_ES_ISD_SD_ES_ISE_SE_ES_ISF_SF_E"
		"S_ISG_SG_ES_ISH_SH_ES_ISI_SI_ES_ISJ_SJ_ES_ISK_SK_ES_ISL_SL_ES_ISM_SM_ES_ISN_SN_E"
		"S_ISO_SO_EEvv",
		"cuLaunchKernel",
	};
	char name[16];

	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
		snprintf(name, sizeof(name), "name%zu", i);
		put("demangle", name, n[i], strlen(n[i]));
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seeds DIR\n");
		return 2;
	}
	dir = argv[1];
	mkdir(dir, 0755);
	messages();
	rings();
	regions();
	names();
	return 0;
}

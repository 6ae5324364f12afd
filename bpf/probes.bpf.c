// SPDX-License-Identifier: GPL-2.0
/*
 * shimmer's BPF programs: the kernel side of `shimmer attach` and of
 * SHIMMER_OFFCPU=1 (the user side is collector/bpfsrc.c; bpf/probes.h holds
 * what both agree on).
 *
 *  - shm_call_enter/shm_call_exit: uprobe and uretprobe on the CUDA runtime's
 *    allocation, free, copy, launch and synchronization calls and on the
 *    driver's launch entry points.  The probe's cookie names the function
 *    and the shape of its arguments; the return makes one record.
 *  - shm_heap_enter/shm_heap_exit: the malloc family, with the shim's
 *    Poisson byte sampling decided here (bpf/sampling.h), so only sampled
 *    allocations, and the frees of sampled blocks, reach user space; every
 *    call is counted exactly in the thread's entry of `threads`.
 *  - shm_offcpu: sched_switch; a traced thread going off the CPU leaves its
 *    time, state and user stack in `offcpu`, and coming back makes a record.
 *
 * Only the target process (its tgid, a load-time constant) is traced: the
 * uprobes are attached for that pid, and each program checks the tgid again
 * because a kernel may run a perf-attached program for any process that
 * maps the probed file.
 *
 * A call's entry and return meet through the thread's stack of pending
 * calls: the return pops the entry whose stack pointer it matches, and
 * discards deeper ones whose returns never came (longjmp, exceptions).
 * A probed call made inside another of its family on the same thread
 * (glibc's realloc calling malloc, the runtime calling itself), or made by
 * a direct call from inside its own library (AT_CF_SKIP_DIRECT), is the
 * library's own and is not recorded, as the shim never sees those either.
 *
 * Load: one program run per probed call, a few hundred instructions, no
 * loop but the bounded ones over pending[] and the sampler's log2.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "probes.h"

#define AT_INLINE static __always_inline
#include "sampling.h"

char LICENSE[] SEC("license") = "GPL";

#define EEXIST 17 /* bpf_get_stackid(): another stack holds the bucket */
#define ENOMEM 12

/* Set by the engine before load. */
const volatile __u32 target_tgid = 0;
const volatile __u64 mean_ln2_q16 = 0; /* heap sample mean * ln 2 * 2^16; 0: heap off */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, AT_STACK_DEPTH * sizeof(__u64));
	__uint(max_entries, 16384);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct at_thread);
} threads SEC(".maps");

/* Live sampled heap blocks: their frees are the only ones shipped. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 18);
	__type(key, __u64);
	__type(value, __u8);
} sampled_blocks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct at_off);
} offcpu SEC(".maps");

/* Losses with no thread entry to count them in (enum at_drop). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AT_DROP_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static const struct at_thread zero_thread;
static const struct at_off zero_off;

AT_INLINE void lose(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &why);

	if (n)
		(*n)++;
}

AT_INLINE int ours(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

AT_INLINE __u32 tid_now(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

AT_INLINE __u64 draw(void)
{
	__u64 k = ((__u64)bpf_get_prandom_u32() << 21 ^ bpf_get_prandom_u32()) &
		  ((1ull << 53) - 1);

	return at_draw(k + 1, mean_ln2_q16);
}

/* The calling thread's entry, made on its first probed call. */
AT_INLINE struct at_thread *thread_get(__u32 tid)
{
	struct at_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t)
		return t;
	/* EEXIST cannot happen (only this thread makes its entry); a full
	 * table shows in the lookup. */
	bpf_map_update_elem(&threads, &tid, &zero_thread, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t) {
		lose(AT_DROP_NO_THREAD);
		return 0;
	}
	if (t->countdown == 0) {
		t->device = -1;
		t->countdown = mean_ln2_q16 ? draw() : 1;
	}
	return t;
}

AT_INLINE struct at_pending *push(struct at_thread *t, __u64 sp, __u32 cookie)
{
	__u32 d = t->depth;
	struct at_pending *p;

	if (d >= AT_MAX_PENDING) {
		t->dropped[AT_DROP_NESTED]++;
		return 0;
	}
	p = &t->pending[d & (AT_MAX_PENDING - 1)];
	t->depth = d + 1;
	p->sp = sp;
	p->cookie = cookie;
	p->flags = 0;
	p->stackid = -1;
	p->ret1 = 0;
	return p;
}

AT_INLINE void unwind_depth(struct at_thread *t, __u32 flags)
{
	if ((flags & AT_PF_HEAPD) && t->heap_depth)
		t->heap_depth--;
	if ((flags & AT_PF_CUDAD) && t->cuda_depth)
		t->cuda_depth--;
}

/* The pending entry of the call returning with stack pointer sp (its
 * entry's plus the popped return address), or NULL when its entry was not
 * seen (it began before the attach, or pending[] was full). */
AT_INLINE struct at_pending *pop(struct at_thread *t, __u64 sp)
{
	int i;

	for (i = 0; i < AT_MAX_PENDING; i++) {
		__u32 d = t->depth;
		struct at_pending *p;

		if (d == 0)
			return 0;
		p = &t->pending[(d - 1) & (AT_MAX_PENDING - 1)];
		if (p->sp + 8 > sp)
			return 0; /* an outer call's: this return's entry is unknown */
		t->depth = d - 1;
		unwind_depth(t, p->flags);
		if (p->sp + 8 == sp)
			return p;
		/* deeper than this return: that call never returned */
	}
	return 0;
}

AT_INLINE void save_args(struct at_pending *p, struct pt_regs *ctx)
{
	p->a[0] = PT_REGS_PARM1(ctx);
	p->a[1] = PT_REGS_PARM2(ctx);
	p->a[2] = PT_REGS_PARM3(ctx);
	p->a[3] = PT_REGS_PARM4(ctx);
	p->a[4] = PT_REGS_PARM5(ctx);
	p->a[5] = ctx->r9; /* libbpf 1.1 has no PT_REGS_PARM6; x86-64 only */
}

/* The user stack at a probe's entry; ret1 is the return address (the
 * caller), which kernels before 6.12 leave out of a stack taken at a
 * function's first instruction. */
AT_INLINE void take_stack(struct at_pending *p, struct pt_regs *ctx, __u64 sp)
{
	p->stackid = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	bpf_probe_read_user(&p->ret1, sizeof(p->ret1), (void *)sp);
}

AT_INLINE void stack_lost(struct at_thread *t, struct at_pending *p)
{
	if (p->stackid == -EEXIST || p->stackid == -ENOMEM)
		t->dropped[AT_DROP_STACK]++;
}

AT_INLINE __u64 read_u64(__u64 addr)
{
	__u64 v = 0;

	if (addr)
		bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* Whether the call that entered the probe at ip (sp at entry) was a
 * direct call to ip: the 5 bytes before the return address are call
 * rel32 with ip as its target. */
AT_INLINE int direct_call(__u64 sp, __u64 ip)
{
	__u64 ret = 0;
	__u8 insn[5];
	__s32 rel;

	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)sp) || ret < 5 ||
	    bpf_probe_read_user(insn, sizeof(insn), (void *)(ret - 5)) || insn[0] != 0xe8)
		return 0;
	__builtin_memcpy(&rel, insn + 1, sizeof(rel));
	return ret + (__s64)rel == ip;
}

/*
 * What every entry probe does first: the calling thread of this process,
 * and a pending entry pushed for its return to find.  NULL when there is
 * nothing to do; flags AT_PF_NESTED when the call came directly from
 * inside its own library (AT_CF_SKIP_DIRECT), which is then left alone.
 */
AT_INLINE struct at_pending *enter(struct pt_regs *ctx, __u32 cookie, __u64 sp,
				   struct at_thread **tp)
{
	struct at_pending *p;

	if (!ours())
		return 0;
	*tp = thread_get(tid_now());
	if (!*tp)
		return 0;
	p = push(*tp, sp, cookie);
	if (p && (AT_COOKIE_FLAGS(cookie) & AT_CF_SKIP_DIRECT) && direct_call(sp, PT_REGS_IP(ctx)))
		p->flags = AT_PF_NESTED;
	return p;
}

/* Whether p is a call made inside another of its family on this thread
 * (then marked nested: 1); else it counts in depth (flag says so, for the
 * return) and 0. */
AT_INLINE int outermost(__u32 *depth, struct at_pending *p, __u32 flag)
{
	if (*depth) {
		p->flags = AT_PF_NESTED;
		return 1;
	}
	(*depth)++;
	p->flags = flag;
	return 0;
}

AT_INLINE int is_alloc(__u32 shape)
{
	return shape >= AT_SH_ALLOC && shape <= AT_SH_PITCH;
}

/* ---- CUDA runtime and driver calls ---- */

SEC("uprobe")
int BPF_KPROBE(shm_call_enter)
{
	__u32 cookie = (__u32)bpf_get_attach_cookie(ctx), shape = AT_COOKIE_SHAPE(cookie);
	__u64 sp = PT_REGS_SP(ctx);
	struct at_thread *t;
	struct at_pending *p = enter(ctx, cookie, sp, &t);

	if (!p || p->flags == AT_PF_NESTED)
		return 0;
	if (shape != AT_SH_DRIVER && outermost(&t->cuda_depth, p, AT_PF_CUDAD))
		return 0;
	save_args(p, ctx);
	if (shape == AT_SH_LAUNCH) {
		p->s[0] = read_u64(sp + 8);
		p->s[1] = read_u64(sp + 16);
	}
	if (is_alloc(shape))
		take_stack(p, ctx, sp);
	p->t_begin = bpf_ktime_get_ns();
	return 0;
}

/* The fields of a runtime call from its arguments (bpf/probes.h). */
AT_INLINE void decode_call(struct at_ev_call *e, const struct at_pending *p, __u32 shape)
{
	const __u64 *a = p->a;
	struct at_launch_config cfg;
	int ok = e->ret == 0;

	switch (shape) {
	case AT_SH_ALLOC:
	case AT_SH_ALLOC_FLAGS:
	case AT_SH_ALLOC_STREAM:
	case AT_SH_ALLOC_POOL:
		e->ptr = ok ? read_u64(a[0]) : 0;
		e->bytes = a[1];
		if (shape == AT_SH_ALLOC_FLAGS || shape == AT_SH_ALLOC_POOL)
			e->aux = shape == AT_SH_ALLOC_FLAGS ? (__u32)a[2] : a[2];
		if (shape == AT_SH_ALLOC_STREAM)
			e->stream = a[2];
		if (shape == AT_SH_ALLOC_POOL)
			e->stream = a[3];
		break;
	case AT_SH_PITCH:
		e->ptr = ok ? read_u64(a[0]) : 0;
		e->aux = ok ? read_u64(a[1]) : 0;
		e->bytes = e->aux * a[3];
		e->aux2 = a[2];
		break;
	case AT_SH_FREE_STREAM:
		e->stream = a[1];
		/* fall through */
	case AT_SH_FREE:
		e->ptr = a[0];
		break;
	case AT_SH_COPY_STREAM:
		e->stream = a[4];
		/* fall through */
	case AT_SH_COPY:
		e->ptr = a[0];
		e->aux = a[1];
		e->bytes = a[2];
		e->kind = (__u32)a[3];
		break;
	case AT_SH_PEER:
		e->ptr = a[0];
		e->device = (__s32)a[1];
		e->aux = a[2];
		e->aux2 = (__u64)(__s64)(__s32)a[3];
		e->bytes = a[4];
		e->stream = a[5];
		break;
	case AT_SH_MEMSET_STREAM:
		e->stream = a[3];
		/* fall through */
	case AT_SH_MEMSET:
		e->ptr = a[0];
		e->aux = (__u64)(__s64)(__s32)a[1];
		e->bytes = a[2];
		break;
	case AT_SH_LAUNCH:
		e->aux = a[0];
		e->grid[0] = (__u32)a[1];
		e->grid[1] = (__u32)(a[1] >> 32);
		e->grid[2] = (__u32)a[2];
		e->block[0] = (__u32)a[3];
		e->block[1] = (__u32)(a[3] >> 32);
		e->block[2] = (__u32)a[4];
		e->bytes = p->s[0];
		e->stream = p->s[1];
		break;
	case AT_SH_LAUNCH_EXC:
		e->aux = a[1];
		if (a[0] && bpf_probe_read_user(&cfg, sizeof(cfg), (void *)a[0]) == 0) {
			e->grid[0] = cfg.grid[0];
			e->grid[1] = cfg.grid[1];
			e->grid[2] = cfg.grid[2];
			e->block[0] = cfg.block[0];
			e->block[1] = cfg.block[1];
			e->block[2] = cfg.block[2];
			e->bytes = cfg.dynamic_smem;
			e->stream = cfg.stream;
		}
		break;
	case AT_SH_GRAPH:
		e->aux = a[0];
		e->stream = a[1];
		break;
	case AT_SH_STREAM:
		e->stream = a[0];
		break;
	case AT_SH_EVENT:
		e->aux = a[0];
		break;
	case AT_SH_WAIT_EVENT:
		e->stream = a[0];
		e->aux = a[1];
		e->kind = (__u32)a[2];
		break;
	}
}

SEC("uretprobe")
int BPF_KRETPROBE(shm_call_exit)
{
	__u32 tid = tid_now(), shape, fn;
	struct at_thread *t;
	struct at_pending *p;
	struct at_ev_call e = {};

	if (!ours())
		return 0;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		return 0;
	p = pop(t, PT_REGS_SP(ctx));
	if (!p || (p->flags & AT_PF_NESTED))
		return 0;
	e.t_end = bpf_ktime_get_ns();
	shape = AT_COOKIE_SHAPE(p->cookie);
	fn = AT_COOKIE_FN(p->cookie);
	e.ret = shape == AT_SH_DRIVER ? (__s64)(__u32)PT_REGS_RC(ctx)
				       : (__s64)(__s32)PT_REGS_RC(ctx);
	if (shape == AT_SH_SET_DEVICE || shape == AT_SH_GET_DEVICE) {
		__s32 dev = (__s32)p->a[0];

		if (e.ret == 0 && shape == AT_SH_GET_DEVICE &&
		    (!p->a[0] || bpf_probe_read_user(&dev, sizeof(dev), (void *)p->a[0])))
			return 0;
		if (e.ret == 0)
			t->device = dev;
		return 0;
	}
	e.h.type = AT_EV_CALL;
	e.h.tid = tid;
	e.cookie = p->cookie;
	e.t_begin = p->t_begin;
	e.device = t->device;
	e.stackid = p->stackid;
	e.ret1 = p->ret1;
	if (shape != AT_SH_DRIVER)
		decode_call(&e, p, shape);
	if (shape != AT_SH_DRIVER && fn > 0 && fn < AT_MAX_FN) {
		t->count[fn]++;
		t->bytes[fn] += e.bytes;
	}
	if (e.ret == 0 && is_alloc(shape))
		stack_lost(t, p);
	if (bpf_ringbuf_output(&events, &e, sizeof(e), 0))
		t->dropped[AT_DROP_RING_FULL]++;
	return 0;
}

/* ---- the malloc family ---- */

AT_INLINE int sample(struct at_thread *t, __u64 n)
{
	if (n < t->countdown) {
		t->countdown -= n;
		return 0;
	}
	t->countdown = draw();
	return 1;
}

/* calloc's request, ~0 when n * m overflows (as the shim counts it).  The
 * barrier keeps clang from turning the test into a 128-bit product, which
 * the BPF target cannot make. */
AT_INLINE __u64 product(__u64 n, __u64 m)
{
	__u64 limit;

	if (!m)
		return 0;
	limit = ~0ull / m;
	asm volatile("" : "+r"(limit));
	return n > limit ? ~0ull : n * m;
}

SEC("uprobe")
int BPF_KPROBE(shm_heap_enter)
{
	__u32 cookie = (__u32)bpf_get_attach_cookie(ctx), shape = AT_COOKIE_SHAPE(cookie);
	__u32 fn = AT_COOKIE_FN(cookie);
	__u64 sp = PT_REGS_SP(ctx), n, old = 0;
	struct at_thread *t;
	struct at_pending *p;
	int sampled = 0;

	if (!mean_ln2_q16)
		return 0;
	p = enter(ctx, cookie, sp, &t);
	if (!p || p->flags == AT_PF_NESTED)
		return 0;
	if (outermost(&t->heap_depth, p, AT_PF_HEAPD))
		return 0;
	save_args(p, ctx);
	switch (shape) {
	case AT_SH_CALLOC:
		n = product(p->a[0], p->a[1]);
		break;
	case AT_SH_REALLOC:
		old = p->a[0];
		n = p->a[1];
		break;
	case AT_SH_REALLOCARRAY:
		old = p->a[0];
		n = product(p->a[1], p->a[2]);
		break;
	case AT_SH_POSIX_MEMALIGN:
		n = p->a[2];
		break;
	case AT_SH_ALIGNED:
		n = p->a[1];
		break;
	case AT_SH_HEAP_FREE:
		old = p->a[0];
		n = 0;
		break;
	default:
		n = p->a[0];
	}
	p->n = n;
	/* free(NULL) frees nothing: not counted, as the shim counts
	 * (preload/heap.h) */
	if (fn < AT_MAX_FN && (shape != AT_SH_HEAP_FREE || old)) {
		t->count[fn]++;
		/* as the shim counts it (count_bytes()): a request above
		 * PTRDIFF_MAX, never granted, adds no bytes, or it would wrap
		 * the sum */
		t->bytes[fn] += n > 0x7fffffffffffffffULL ? 0 : n;
	}
	if (shape != AT_SH_HEAP_FREE)
		sampled = sample(t, n);
	/* Out of the set before the real call, so that another thread that
	 * gets the address at once cannot have its own sample erased. */
	if (old && bpf_map_delete_elem(&sampled_blocks, &old) == 0)
		p->flags |= AT_PF_RELEASED;
	if (!sampled && !(p->flags & AT_PF_RELEASED)) {
		p->flags |= AT_PF_SKIP;
		return 0;
	}
	if (sampled) {
		p->flags |= AT_PF_SAMPLED;
		take_stack(p, ctx, sp);
	}
	p->t_begin = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(shm_heap_exit)
{
	__u32 tid = tid_now(), shape;
	__u64 rv = PT_REGS_RC(ctx), ptr, old = 0;
	struct at_thread *t;
	struct at_pending *p;
	struct at_ev_call e = {};
	__u8 one = 1;
	int failed;

	if (!ours())
		return 0;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		return 0;
	p = pop(t, PT_REGS_SP(ctx));
	if (!p || (p->flags & (AT_PF_NESTED | AT_PF_SKIP)))
		return 0;
	e.t_end = bpf_ktime_get_ns();
	shape = AT_COOKIE_SHAPE(p->cookie);
	ptr = rv;
	if (shape == AT_SH_POSIX_MEMALIGN)
		ptr = (__s32)rv == 0 ? read_u64(p->a[0]) : 0;
	switch (shape) {
	case AT_SH_HEAP_FREE:
		old = p->a[0];
		failed = 0;
		break;
	case AT_SH_REALLOC:
	case AT_SH_REALLOCARRAY:
		old = p->a[0];
		failed = !ptr && p->n;
		break;
	default:
		failed = !ptr;
	}
	e.flags = p->flags & (AT_PF_SAMPLED | AT_PF_RELEASED);
	if (failed) {
		e.flags |= AT_PF_FAILED;
		/* The old block survives a failed realloc. */
		if ((e.flags & AT_PF_RELEASED) &&
		    bpf_map_update_elem(&sampled_blocks, &old, &one, BPF_NOEXIST) == 0)
			e.flags &= ~AT_PF_RELEASED;
	}
	if ((e.flags & AT_PF_SAMPLED) && ptr &&
	    bpf_map_update_elem(&sampled_blocks, &ptr, &one, BPF_ANY)) {
		/* Better a counted loss than a block whose free we could
		 * never report. */
		t->dropped[AT_DROP_SAMPLED_FULL]++;
		e.flags &= ~AT_PF_SAMPLED;
	}
	if (!(e.flags & (AT_PF_SAMPLED | AT_PF_RELEASED)))
		return 0;
	e.h.type = AT_EV_CALL;
	e.h.tid = tid;
	e.cookie = p->cookie;
	e.t_begin = p->t_begin;
	e.ret = (__s64)rv;
	e.device = -1;
	e.bytes = p->n;
	e.ptr = shape == AT_SH_HEAP_FREE ? old : ptr;
	if (shape == AT_SH_REALLOC || shape == AT_SH_REALLOCARRAY)
		e.aux = old;
	else if (shape == AT_SH_POSIX_MEMALIGN)
		e.aux = p->a[1];
	else if (shape == AT_SH_ALIGNED)
		e.aux = p->a[0];
	if (e.flags & AT_PF_SAMPLED) {
		e.stackid = p->stackid;
		e.ret1 = p->ret1;
		if (!failed)
			stack_lost(t, p);
	} else {
		e.stackid = -1;
	}
	if (bpf_ringbuf_output(&events, &e, sizeof(e), 0))
		t->dropped[AT_DROP_RING_FULL]++;
	return 0;
}

/* ---- off-CPU time ---- */

/* Kernels before 5.14 name the field `state`. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_DEAD 0x80

AT_INLINE __u32 off_state(int preempt, struct task_struct *prev)
{
	__u64 s;

	if (bpf_core_field_exists(prev->__state))
		s = BPF_CORE_READ(prev, __state);
	else
		s = BPF_CORE_READ((struct task_struct___pre514 *)prev, state);
	if (s & TASK_DEAD)
		return 0; /* exiting: it never comes back */
	if (preempt || s == 0)
		return AT_OFF_PREEMPTED;
	if (s & TASK_INTERRUPTIBLE)
		return AT_OFF_SLEEP;
	if (s & TASK_UNINTERRUPTIBLE)
		return AT_OFF_DISK;
	return AT_OFF_OTHER;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(shm_offcpu, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid;

	if (BPF_CORE_READ(prev, tgid) == target_tgid) {
		__u32 state = off_state(preempt, prev);
		struct pt_regs *regs;
		struct at_off *o;

		tid = BPF_CORE_READ(prev, pid);
		if (!state) {
			bpf_map_delete_elem(&offcpu, &tid);
			goto in;
		}
		o = bpf_map_lookup_elem(&offcpu, &tid);
		if (!o) {
			bpf_map_update_elem(&offcpu, &tid, &zero_off, BPF_NOEXIST);
			o = bpf_map_lookup_elem(&offcpu, &tid);
		}
		if (!o) {
			lose(AT_DROP_NO_THREAD);
			goto in;
		}
		o->t_out = now;
		o->state = state;
		o->stackid = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		regs = (struct pt_regs *)bpf_task_pt_regs(prev);
		o->ip = BPF_CORE_READ(regs, ip);
		o->sp = BPF_CORE_READ(regs, sp);
		o->bp = BPF_CORE_READ(regs, bp);
		if (bpf_probe_read_user(o->words, sizeof(o->words), (void *)o->sp))
			__builtin_memset(o->words, 0, sizeof(o->words));
	}
in:
	if (BPF_CORE_READ(next, tgid) == target_tgid) {
		struct at_ev_offcpu *e;
		struct at_off *o;

		tid = BPF_CORE_READ(next, pid);
		o = bpf_map_lookup_elem(&offcpu, &tid);
		if (!o)
			return 0; /* off since before the attach */
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (e) {
			e->h.type = AT_EV_OFFCPU;
			e->h.tid = tid;
			e->off = *o;
			e->t_in = now;
			bpf_ringbuf_submit(e, 0);
		} else {
			lose(AT_DROP_RING_FULL);
		}
		bpf_map_delete_elem(&offcpu, &tid);
	}
	return 0;
}

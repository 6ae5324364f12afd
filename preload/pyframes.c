/*
 * Python frames, read the way an out-of-process profiler reads them, but
 * from inside the thread: no GIL, no C API call that allocates or touches
 * a reference count.  The calling thread is inside one of our hooks, that
 * is, in C code; only it pushes and pops its own interpreter frames, so its
 * frame chain, the code objects the frames hold (strong references) and
 * their names cannot change while we walk.  This is what makes the walk
 * work where PyTorch releases the GIL around op dispatch and the caching
 * allocator calls cudaMalloc with its own mutex held: taking the GIL there
 * could deadlock, and the C API without it is unsafe.
 *
 * States: UNKNOWN (resolve on the next call), ABSENT (no runtime, or a
 * version whose layout we do not know: checked again only after a module
 * report found new objects, py_recheck), PRESENT (functions resolved and a
 * layout chosen).  Resolution may race between threads; each writes the
 * same values before publishing the state with release order.
 *
 * Functions used, none of which needs the GIL or allocates:
 * Py_IsInitialized (reads the runtime's flag; also guards the next call,
 * whose thread-specific key exists only once the runtime is up),
 * PyGILState_GetThisThreadState (pthread_getspecific of that key) and
 * PyCode_Addr2Line (walks the code's line table; 3.11 may use the code's
 * line array instead, read-only too).  Py_GetVersion picks the layout once.
 *
 * Layouts (x86-64 and other LP64 targets, default build; offsets checked
 * with offsetof against the internal headers of 3.11.7, 3.12.1 and
 * 3.13.0; "instr" is prev_instr in 3.11/3.12, instr_ptr in 3.13, and in
 * all three the instruction index is (instr - co_code_adaptive) code
 * units of 2 bytes, as _PyInterpreterFrame_LASTI computes it):
 *
 *                                      3.11   3.12   3.13
 *   PyThreadState.cframe                 56     56      -
 *   PyThreadState.current_frame           -      -     72
 *   _PyCFrame.current_frame               8      0      -
 *   _PyInterpreterFrame.f_code           32      0      0  (f_executable)
 *   _PyInterpreterFrame.previous         48      8      8
 *   _PyInterpreterFrame.instr            56     56     56
 *   _PyInterpreterFrame.owner (char)     69     70     70
 *   PyCodeObject.ob_size (code units)    16     16     16
 *   PyCodeObject.co_filename            112    112    112
 *   PyCodeObject.co_qualname            128    128    128
 *   PyCodeObject._co_firsttraceable     168    176    184
 *   PyCodeObject.co_code_adaptive       184    192    200
 *   sizeof(PyASCIIObject)                48     40     40
 *   PyCompactUnicodeObject.utf8_length   48     40     40
 *   PyCompactUnicodeObject.utf8          56     48     48
 *   sizeof(PyCompactUnicodeObject)       72     56     56
 *
 * PyASCIIObject: length at 16, state at 32 (kind bits 2..4, compact bit 5,
 * ascii bit 6) in all three.  Frame owners: 1 generator, 3 C stack (3.12,
 * 3.13: the interpreter's entry shims).  Frames are skipped as CPython's
 * own tracebacks skip them (_PyFrame_IsIncomplete): owned by the C stack,
 * or not owned by a generator with instr before the first traceable
 * instruction.  Free-threaded builds (3.13t) and any other version are
 * treated as having no frames.
 *
 * Validation: every pointer is non-NULL and 8-byte aligned, a frame's code
 * must have the type PyCode_Type and a name the type PyUnicode_Type (this
 * also catches an object header laid out otherwise), the instruction index
 * must fall inside the code, and the walk stops after a bounded number of
 * frames, skipped ones included.
 *
 * The code cache maps a code object to its interned file and function.
 * Threads fill it concurrently, so each slot is a small seqlock: a writer
 * that cannot take a slot at once does not cache, a reader that sees it
 * changing interns the names itself.  A code object's address is not its
 * identity: a class body's code is freed once the class is made, and a
 * function compiled later can take its place (`all` mode showed a method
 * as the class "ZipExtFile" of a module imported before).  So an entry
 * also holds the file and name objects' addresses and their hashes, each
 * checked on use; the thread's memo (pyframes.h) holds the objects'
 * addresses and the line table's.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "intern.h"
#include "pyframes.h"
#include "shim.h"
#include "utf8.h"

#define CACHE_SLOTS 4096u /* power of two */
/* Frames walked at most, skipped ones included: a bound for a corrupt
 * (cyclic) chain, far above any depth Python reaches with its default
 * recursion limit (1,000), since the outermost frames are the ones the
 * site is read from (an earlier bound of 512 frames named a library frame
 * as the site of a library recursion 600 deep).  The walk costs a few
 * loads a frame, on every allocation in `all` mode. */
#define PY_WALK_MAX 65536u
#define PY_RING 32u       /* frames beyond the inner ones noted (see py_frames) */
#define NAME_MAX_UTF8 512u

#define ST_KIND(s) (((s) >> 2) & 7u)
#define ST_COMPACT 0x20u
#define ST_ASCII 0x40u

/* Byte offsets into the interpreter's structs for one version. */
struct py_layout {
	uint16_t ts_frame;   /* PyThreadState: cframe, or current_frame */
	int16_t cf_frame;    /* _PyCFrame.current_frame; -1: no _PyCFrame */
	uint16_t fr_code;
	uint16_t fr_prev;
	uint16_t fr_instr;
	uint16_t fr_owner;
	int16_t owner_cstack; /* -1: none in this version */
	uint16_t co_firsttraceable;
	uint16_t co_code;
	uint16_t str_ascii;   /* sizeof(PyASCIIObject) */
	uint16_t str_utf8len;
	uint16_t str_utf8;
	uint16_t str_compact; /* sizeof(PyCompactUnicodeObject) */
};

static const struct py_layout layout_311 = {
	.ts_frame = 56, .cf_frame = 8, .fr_code = 32, .fr_prev = 48,
	.fr_instr = 56, .fr_owner = 69, .owner_cstack = -1,
	.co_firsttraceable = 168, .co_code = 184, .str_ascii = 48,
	.str_utf8len = 48, .str_utf8 = 56, .str_compact = 72,
};

static const struct py_layout layout_312 = {
	.ts_frame = 56, .cf_frame = 0, .fr_code = 0, .fr_prev = 8,
	.fr_instr = 56, .fr_owner = 70, .owner_cstack = 3,
	.co_firsttraceable = 176, .co_code = 192, .str_ascii = 40,
	.str_utf8len = 40, .str_utf8 = 48, .str_compact = 56,
};

static const struct py_layout layout_313 = {
	.ts_frame = 72, .cf_frame = -1, .fr_code = 0, .fr_prev = 8,
	.fr_instr = 56, .fr_owner = 70, .owner_cstack = 3,
	.co_firsttraceable = 184, .co_code = 200, .str_ascii = 40,
	.str_utf8len = 40, .str_utf8 = 48, .str_compact = 56,
};

/* Offsets common to the three versions. */
#define OB_TYPE 8
#define OB_SIZE 16
#define CO_FILENAME 112
#define CO_QUALNAME 128
#define CO_LINETABLE 136
#define STR_HASH 24
#define STR_LENGTH 16
#define STR_STATE 32
#define OWNER_GENERATOR 1

struct py_api {
	int (*is_initialized)(void);
	void *(*this_tstate)(void);
	int (*addr2line)(void *, int);
	const void *code_type;
	const void *str_type;
	const struct py_layout *l;
};

/* What identifies a code object's names: its address and its file and
 * qualified name objects', and their hashes (-1 when not computed). */
struct code_id {
	const void *code, *file, *func, *lines;
	int64_t file_hash, func_hash;
};

struct code_names {
	unsigned seq; /* odd while a writer fills the slot */
	uint32_t epoch; /* intern_epoch() before the names were interned */
	const void *code, *file, *func;
	int64_t file_hash, func_hash;
	uint32_t file_id;
	uint32_t func_id;
};

static struct py_api py;
int py_state; /* PY_UNKNOWN, PY_ABSENT or PY_PRESENT */
static struct code_names cache[CACHE_SLOTS];

#define RESOLVE(field, name)                                                  \
	do {                                                                  \
		*(void **)&py.field = dlsym(RTLD_DEFAULT, name);              \
		if (!py.field)                                                \
			return PY_ABSENT;                                     \
	} while (0)

/* The layout for Py_GetVersion()'s text, NULL if unknown. */
static const struct py_layout *pick_layout(const char *v)
{
	int major = 0, minor = 0;

	if (!v || sscanf(v, "%d.%d", &major, &minor) != 2 || major != 3)
		return NULL;
	if (strstr(v, "free-threading"))
		return NULL; /* another object header */
	if (sizeof(void *) != 8)
		return NULL;
	switch (minor) {
	case 11:
		return &layout_311;
	case 12:
		return &layout_312;
	case 13:
		return &layout_313;
	default:
		return NULL;
	}
}

static int resolve(void)
{
	const char *(*version)(void);

	RESOLVE(is_initialized, "Py_IsInitialized");
	RESOLVE(this_tstate, "PyGILState_GetThisThreadState");
	RESOLVE(addr2line, "PyCode_Addr2Line");
	RESOLVE(code_type, "PyCode_Type");
	RESOLVE(str_type, "PyUnicode_Type");
	*(void **)&version = dlsym(RTLD_DEFAULT, "Py_GetVersion");
	if (!version)
		return PY_ABSENT;
	py.l = pick_layout(version());
	return py.l ? PY_PRESENT : PY_ABSENT;
}

void py_recheck(void)
{
	int s = PY_ABSENT;

	__atomic_compare_exchange_n(&py_state, &s, PY_UNKNOWN, 0, __ATOMIC_RELAXED,
				    __ATOMIC_RELAXED);
}

static inline int bad_ptr(const void *p)
{
	return !p || ((uintptr_t)p & 7u);
}

static inline const void *load_ptr(const void *base, unsigned off)
{
	const void *p;

	memcpy(&p, (const char *)base + off, sizeof(p));
	return p;
}

static inline int64_t load_i64(const void *base, unsigned off)
{
	int64_t v;

	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

static inline uint32_t load_u32(const void *base, unsigned off)
{
	uint32_t v;

	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

/*
 * The interned text of a str object, 0 if it is not a compact str.  ASCII
 * data follows the PyASCIIObject; other compact strings carry a cached
 * UTF-8 copy when one was made, else we encode their 1-, 2- or 4-byte code
 * points ourselves (bounded, truncated at a character boundary).
 */
static uint32_t str_id(const void *s)
{
	const struct py_layout *l = py.l;
	char buf[NAME_MAX_UTF8];
	const unsigned char *d;
	const char *u;
	uint32_t st, kind, c;
	int64_t len, i;
	size_t n = 0;

	if (bad_ptr(s) || load_ptr(s, OB_TYPE) != py.str_type)
		return 0;
	st = load_u32(s, STR_STATE);
	len = load_i64(s, STR_LENGTH);
	if (!(st & ST_COMPACT) || len < 0)
		return 0;
	if (st & ST_ASCII)
		return intern_mem((const char *)s + l->str_ascii, (size_t)len);
	u = load_ptr(s, l->str_utf8);
	if (u) {
		len = load_i64(s, l->str_utf8len);
		return len >= 0 ? intern_mem(u, (size_t)len) : 0;
	}
	kind = ST_KIND(st);
	d = (const unsigned char *)s + l->str_compact;
	for (i = 0; i < len; i++) {
		if (kind == 1)
			c = d[i];
		else if (kind == 2)
			c = (uint32_t)d[2 * i] | (uint32_t)d[2 * i + 1] << 8;
		else if (kind == 4)
			memcpy(&c, d + 4 * i, 4);
		else
			return 0;
		if (!utf8_put(buf, &n, sizeof(buf), c))
			break;
	}
	return intern_mem(buf, n);
}

/* The file and function of code (id): the cache's when filled for the
 * same objects in this epoch (after a fork or a reconnect the names must
 * be announced again), else interned now; epoch is intern_epoch(), read
 * before. */
static void names(const struct code_id *id, uint32_t epoch, struct shm_pyframe *f)
{
	struct code_names *c = &cache[((uintptr_t)id->code >> 4) & (CACHE_SLOTS - 1)];
	const void *k, *kf, *kq;
	int64_t hf, hq;
	uint32_t file, func, ep;
	unsigned s1, s2;

	s1 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
	k = __atomic_load_n(&c->code, __ATOMIC_RELAXED);
	kf = __atomic_load_n(&c->file, __ATOMIC_RELAXED);
	kq = __atomic_load_n(&c->func, __ATOMIC_RELAXED);
	hf = __atomic_load_n(&c->file_hash, __ATOMIC_RELAXED);
	hq = __atomic_load_n(&c->func_hash, __ATOMIC_RELAXED);
	file = __atomic_load_n(&c->file_id, __ATOMIC_RELAXED);
	func = __atomic_load_n(&c->func_id, __ATOMIC_RELAXED);
	ep = __atomic_load_n(&c->epoch, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	s2 = __atomic_load_n(&c->seq, __ATOMIC_RELAXED);
	if (!(s1 & 1) && s1 == s2 && k == id->code && kf == id->file && kq == id->func &&
	    hf == id->file_hash && hq == id->func_hash && file && ep == epoch) {
		f->file_id = file;
		f->func_id = func;
		return;
	}
	f->file_id = str_id(id->file);
	f->func_id = str_id(id->func);
	/* A name not announced now (a full socket) is tried again next time,
	 * not cached as 0 for the life of the code object; nor is a name
	 * whose hash is not computed yet (its content would go unchecked). */
	if (!f->file_id || !f->func_id || id->file_hash == -1 || id->func_hash == -1 ||
	    (s1 & 1) ||
	    !__atomic_compare_exchange_n(&c->seq, &s1, s1 + 1, 0,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&c->code, id->code, __ATOMIC_RELAXED);
	__atomic_store_n(&c->file, id->file, __ATOMIC_RELAXED);
	__atomic_store_n(&c->func, id->func, __ATOMIC_RELAXED);
	__atomic_store_n(&c->file_hash, id->file_hash, __ATOMIC_RELAXED);
	__atomic_store_n(&c->func_hash, id->func_hash, __ATOMIC_RELAXED);
	__atomic_store_n(&c->file_id, f->file_id, __ATOMIC_RELAXED);
	__atomic_store_n(&c->func_id, f->func_id, __ATOMIC_RELAXED);
	__atomic_store_n(&c->epoch, epoch, __ATOMIC_RELAXED);
	__atomic_store_n(&c->seq, s1 + 2, __ATOMIC_RELEASE);
}

/* A str's cached hash, -1 when it is not one (str_id() says so too). */
static int64_t str_hash(const void *s)
{
	if (bad_ptr(s) || load_ptr(s, OB_TYPE) != py.str_type)
		return -1;
	return load_i64(s, STR_HASH);
}

/* This thread's innermost interpreter frame, NULL if none. */
static const void *top_frame(void)
{
	const struct py_layout *l = py.l;
	const void *ts, *p;

	if (!py.is_initialized())
		return NULL;
	ts = py.this_tstate();
	if (bad_ptr(ts))
		return NULL;
	p = load_ptr(ts, l->ts_frame);
	if (l->cf_frame >= 0 && !bad_ptr(p))
		p = load_ptr(p, (unsigned)l->cf_frame);
	return bad_ptr(p) ? NULL : p;
}

static inline uint32_t memo_slot(const void *code, uintptr_t instr)
{
	uint64_t h = ((uintptr_t)code >> 4) * 0x9e3779b97f4a7c15ull ^ (instr >> 1);

	return (uint32_t)(h ^ h >> 29) & (PY_MEMO_SLOTS - 1);
}

/* A frame to read: what frame() needs. */
struct raw_frame {
	const void *code;
	uintptr_t instr;
	int64_t lasti;
};

/* A frame beyond the inner ones, noted as the walk passed it. */
struct raw_note {
	const void *code;
	uintptr_t instr;
	char owner;
};

/*
 * Whether the frame (its code, instruction and owner, as read from it) is
 * one CPython's tracebacks show, filling *r: its code must be a code
 * object, and a frame not owned by a generator must be past the code's
 * first traceable instruction (_PyFrame_IsIncomplete).
 */
static inline int traceable(const void *code, uintptr_t instr, char owner, struct raw_frame *r)
{
	const struct py_layout *l = py.l;

	if (bad_ptr(code) || load_ptr(code, OB_TYPE) != py.code_type)
		return 0;
	r->code = code;
	r->instr = instr;
	r->lasti = (int64_t)(instr - ((uintptr_t)code + l->co_code)) / 2;
	return owner == OWNER_GENERATOR ||
	       r->lasti >= (int64_t)(int32_t)load_u32(code, l->co_firsttraceable);
}

/* The frame at instruction index lasti (instr) of code, into *out: the
 * thread's memo's when it holds it, else read and interned (and memoized
 * when its names could be announced). */
static inline __attribute__((always_inline)) void
frame(const struct raw_frame *r, uint32_t epoch, struct py_memo *memo, struct shm_pyframe *out)
{
	struct py_memo_entry *m = 0;
	struct code_id id;
	int64_t lasti = r->lasti;
	int line;

	id.code = r->code;
	id.file = load_ptr(r->code, CO_FILENAME);
	id.func = load_ptr(r->code, CO_QUALNAME);
	id.lines = load_ptr(r->code, CO_LINETABLE);
	if (memo) {
		m = &memo->slot[memo_slot(r->code, r->instr)];
		if (m->code == r->code && m->instr == r->instr && m->file == id.file &&
		    m->func == id.func && m->lines == id.lines) {
			*out = m->f;
			return;
		}
	}
	id.file_hash = str_hash(id.file);
	id.func_hash = str_hash(id.func);
	if (lasti < 0 || lasti >= load_i64(r->code, OB_SIZE))
		lasti = -1; /* PyCode_Addr2Line: the first line */
	memset(out, 0, sizeof(*out));
	/* -1 for an instruction the compiler gave no line (an exception
	 * handler's cleanup): 0, as tracemalloc writes it, not 4294967295. */
	line = py.addr2line((void *)r->code, (int)(lasti * 2));
	out->line = line > 0 ? (uint32_t)line : 0;
	names(&id, epoch, out);
	/* Only whole names: one not announced now is tried again. */
	if (memo && out->file_id && out->func_id) {
		m->code = r->code;
		m->instr = r->instr;
		m->file = id.file;
		m->func = id.func;
		m->lines = id.lines;
		m->f = *out;
	}
}

uint32_t py_frames(struct shm_pyframe *out, uint32_t max, struct py_memo *memo)
{
	int s = __atomic_load_n(&py_state, __ATOMIC_ACQUIRE);
	struct raw_frame r, keep[PY_OUTER + 2];
	struct raw_note ring[PY_RING];
	const struct py_layout *l;
	const void *f;
	uint32_t n = 0, walked = 0, epoch, inner, beyond = 0, k, nk;
	char owner;

	if (__builtin_expect(s == PY_ABSENT, 1))
		return 0;
	if (s == PY_UNKNOWN) {
		sigset_t mask;

		/* dlsym allocates (a failed one its error text): ours */
		shim_own_enter(&shim_tls, &mask);
		s = resolve();
		shim_own_leave(&shim_tls, &mask);
		__atomic_store_n(&py_state, s, __ATOMIC_RELEASE);
		if (s != PY_PRESENT)
			return 0;
	}
	l = py.l;
	/* Before any interning: names announced in an epoch that has ended
	 * must not be cached as this one's. */
	epoch = intern_epoch();
	if (memo && memo->epoch != epoch) {
		memset(memo->slot, 0, sizeof(memo->slot));
		memo->epoch = epoch;
	}
	/* The innermost frames, and when there are more than max the
	 * outermost PY_OUTER after a gap (pyframes.h).  The frames beyond
	 * the inner ones are only noted (frame, code, instruction, owner: one
	 * line of the frame) in a ring, and the last of them checked and read
	 * once the walk has ended: an import's stack is a hundred frames. */
	inner = max > 2 * PY_OUTER ? max - PY_OUTER - 1 : max;
	for (f = top_frame(); f && walked < PY_WALK_MAX; f = load_ptr(f, l->fr_prev), walked++) {
		if (bad_ptr(f))
			break;
		owner = *((const char *)f + l->fr_owner);
		if (owner == l->owner_cstack)
			continue;
		if (n >= inner) {
			if (inner == max)
				break; /* too few frames asked for to split */
			ring[beyond % PY_RING] = (struct raw_note){ load_ptr(f, l->fr_code),
								    (uintptr_t)load_ptr(f, l->fr_instr),
								    owner };
			beyond++;
			continue;
		}
		if (traceable(load_ptr(f, l->fr_code), (uintptr_t)load_ptr(f, l->fr_instr), owner,
			      &r))
			frame(&r, epoch, memo, &out[n++]);
	}
	if (!beyond)
		return n;
	/* Stopped at the bound with frames left: the frames noted last are
	 * not the outermost, and are not passed off as them.  The innermost
	 * ones and the gap alone. */
	if (f && walked >= PY_WALK_MAX) {
		memset(&out[n++], 0, sizeof(out[0]));
		return n;
	}
	/* The traceable ones from the outermost in, up to one more than
	 * fits (keep's end holds the outermost). */
	for (k = 0, nk = 0; k < beyond && k < PY_RING && nk < PY_OUTER + 2; k++) {
		const struct raw_note *x = &ring[(beyond - 1 - k) % PY_RING];

		if (traceable(x->code, x->instr, x->owner, &keep[PY_OUTER + 1 - nk]))
			nk++;
	}
	/* All of them when they fit, else the gap and the last PY_OUTER. */
	if (nk == PY_OUTER + 2 || beyond > PY_RING) {
		memset(&out[n++], 0, sizeof(out[0])); /* the gap: (0, 0, 0) */
		if (nk > PY_OUTER)
			nk = PY_OUTER;
	}
	for (k = PY_OUTER + 2 - nk; k < PY_OUTER + 2; k++)
		frame(&keep[k], epoch, memo, &out[n++]);
	return n;
}

/*
 * Python frames.  States: UNKNOWN (resolve on the next call), ABSENT (no
 * runtime: checked again only after a module report found new objects,
 * py_recheck), PRESENT (all functions resolved).  Resolution may race
 * between threads; each writes the same pointers.
 *
 * Per frame: PyFrame_GetCode and PyFrame_GetBack return new references
 * (released with Py_DecRef), PyEval_GetFrame a borrowed one.  The code
 * cache maps a code object's address to its interned file and function;
 * an address reused by another code object after the first is freed would
 * show the old names (accepted: code objects of running functions live
 * long, and the cost of checking is another attribute lookup).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "intern.h"
#include "pyframes.h"

#define PY_UNKNOWN 0
#define PY_ABSENT 1
#define PY_PRESENT 2
#define CACHE_SLOTS 4096u /* power of two */

struct py_api {
	int (*is_initialized)(void);
	int (*gil_check)(void);
	void *(*get_frame)(void);
	void *(*frame_back)(void *);
	void *(*frame_code)(void *);
	int (*frame_line)(void *);
	void *(*getattr)(void *, const char *);
	const char *(*utf8)(void *);
	void (*decref)(void *);
	void *(*err_occurred)(void);
	void (*err_clear)(void);
};

struct code_names {
	const void *code;
	uint32_t file_id;
	uint32_t func_id;
};

static struct py_api py;
static int state;
static struct code_names cache[CACHE_SLOTS];

#define RESOLVE(field, name)                                                  \
	do {                                                                  \
		*(void **)&py.field = dlsym(RTLD_DEFAULT, name);              \
		if (!py.field)                                                \
			return PY_ABSENT;                                     \
	} while (0)

static int resolve(void)
{
	RESOLVE(is_initialized, "Py_IsInitialized");
	RESOLVE(gil_check, "PyGILState_Check");
	RESOLVE(get_frame, "PyEval_GetFrame");
	RESOLVE(frame_back, "PyFrame_GetBack");
	RESOLVE(frame_code, "PyFrame_GetCode");
	RESOLVE(frame_line, "PyFrame_GetLineNumber");
	RESOLVE(getattr, "PyObject_GetAttrString");
	RESOLVE(utf8, "PyUnicode_AsUTF8");
	RESOLVE(decref, "Py_DecRef");
	RESOLVE(err_occurred, "PyErr_Occurred");
	RESOLVE(err_clear, "PyErr_Clear");
	return PY_PRESENT;
}

void py_recheck(void)
{
	int s = PY_ABSENT;

	__atomic_compare_exchange_n(&state, &s, PY_UNKNOWN, 0, __ATOMIC_RELAXED,
				    __ATOMIC_RELAXED);
}

/* The interned text of code.attr, 0 if unavailable. */
static uint32_t attr_id(void *code, const char *attr)
{
	void *o = py.getattr(code, attr);
	const char *s;
	uint32_t id = 0;

	if (!o) {
		py.err_clear();
		return 0;
	}
	s = py.utf8(o);
	if (s)
		id = intern_str(s);
	else
		py.err_clear();
	py.decref(o);
	return id;
}

static void names(void *code, struct shm_pyframe *f)
{
	struct code_names *c = &cache[((uintptr_t)code >> 4) & (CACHE_SLOTS - 1)];

	if (c->code != code || !c->file_id) {
		c->code = code;
		c->file_id = attr_id(code, "co_filename");
		c->func_id = attr_id(code, "co_name");
	}
	f->file_id = c->file_id;
	f->func_id = c->func_id;
}

uint32_t py_frames(struct shm_pyframe *out, uint32_t max)
{
	int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	void *f, *back, *code;
	uint32_t n = 0;
	int own = 0;

	if (__builtin_expect(s == PY_ABSENT, 1))
		return 0;
	if (s == PY_UNKNOWN) {
		s = resolve();
		__atomic_store_n(&state, s, __ATOMIC_RELEASE);
		if (s != PY_PRESENT)
			return 0;
	}
	if (!py.is_initialized() || !py.gil_check() || py.err_occurred())
		return 0;
	for (f = py.get_frame(); f && n < max; f = back, own = 1) {
		code = py.frame_code(f);
		memset(&out[n], 0, sizeof(out[n]));
		out[n].line = (uint32_t)py.frame_line(f);
		if (code) {
			names(code, &out[n]);
			py.decref(code);
		}
		n++;
		back = py.frame_back(f);
		if (own)
			py.decref(f);
	}
	if (own && f)
		py.decref(f);
	return n;
}

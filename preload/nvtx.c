/*
 * NVTX through its injection interface: nvtx3 (header-only, in the
 * application, PyTorch, ...) dlopens NVTX_INJECTION64_PATH at its first
 * call and hands InitializeInjectionNvtx2 an export table through which we
 * replace the core and core2 functions with ours.  Until then, and in a
 * process without the shim, NVTX calls cost the application nothing.
 *
 * Handles we give out are intern entries (intern.h): a domain is the entry
 * of its name, a registered string the entry of its text.  They stay valid
 * across fork, where a raw id would not be announced in the child.
 *
 * Messages: ASCII, Unicode (wchar_t is UTF-32 here; converted to UTF-8 on
 * the stack) or a registered string.  Push/pop return the nesting level,
 * kept per thread and domain even when nothing is recorded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "api.h"
#include "control.h"
#include "intern.h"
#include "log.h"
#include "modules.h"
#include "nvtx.h"
#include "settings.h"
#include "utf8.h"

#define UTF8_MAX 1024

struct attr {
	uint32_t name_id;
	uint32_t color;
	uint32_t category;
};

static int disabled;

/* UTF-32 to UTF-8 into buf (NUL-terminated, truncated to fit). */
static const char *utf8(const wchar_t *w, char *buf, size_t cap)
{
	size_t n = 0;

	for (; w && *w; w++)
		if (!utf8_put(buf, &n, cap - 1, (uint32_t)*w))
			break;
	buf[n] = '\0';
	return buf;
}

static uint32_t wide_id(const wchar_t *w)
{
	char buf[UTF8_MAX];

	return w ? intern_str(utf8(w, buf, sizeof(buf))) : 0;
}

static void parse(const nvtxEventAttributes_t *a, struct attr *o)
{
	*o = (struct attr){ 0 };
	if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
		return;
	o->category = a->category;
	o->color = a->colorType == NVTX_COLOR_ARGB ? a->color : 0;
	switch (a->messageType) {
	case NVTX_MESSAGE_TYPE_ASCII:
		o->name_id = intern_str(a->message.ascii);
		break;
	case NVTX_MESSAGE_TYPE_UNICODE:
		o->name_id = wide_id(a->message.unicode);
		break;
	case NVTX_MESSAGE_TYPE_REGISTERED:
		o->name_id = intern_id((const struct intern_entry *)a->message.registered);
		break;
	default:
		break;
	}
}

static uint32_t dom_id(nvtxDomainHandle_t d)
{
	return intern_id((const struct intern_entry *)d);
}

/*
 * One body for every event: `t` is the traced thread or NULL, and the
 * message is given as attributes, ASCII or wide text (one of them).
 */
enum ev { EV_MARK, EV_PUSH, EV_START };

static uint64_t event(enum ev what, nvtxDomainHandle_t d, const nvtxEventAttributes_t *a,
		      const char *s, const wchar_t *w)
{
	struct shim_thread *t = api_thread(shim_thread_traced());
	struct attr at = { 0 };
	uint64_t id = what == EV_START ? api_range_id() : 0;
	int saved, b;

	if (!t)
		return id;
	saved = errno;
	/* names make no traced call; a handler's event must not wait for
	 * an entry we hold */
	b = shim_busy(t);
	if (a)
		parse(a, &at);
	else
		at.name_id = s ? intern_str(s) : wide_id(w);
	if (what == EV_MARK)
		api_mark(t, at.name_id, dom_id(d));
	else
		api_range(t, what == EV_PUSH ? SHM_RANGE_PUSH : SHM_RANGE_START, id, at.name_id,
			  dom_id(d), at.color, at.category);
	shim_unbusy(t, b);
	errno = saved;
	return id;
}

/*
 * Whether the message names the range a trigger counts (control.h): asked
 * only while one waits, and answered whether or not recording is on, so
 * the count goes on while paused.
 */
static int watched(const nvtxEventAttributes_t *a, const char *s, const wchar_t *w)
{
	struct shim_thread *t = &shim_tls;
	const struct intern_entry *e = 0;
	char buf[UTF8_MAX];
	int saved, b;

	if (!control_watch())
		return 0;
	if (a && a->size >= offsetof(nvtxEventAttributes_t, message) + sizeof(a->message)) {
		if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
			return control_is_watched((const struct intern_entry *)a->message.registered);
		if (a->messageType == NVTX_MESSAGE_TYPE_ASCII)
			s = a->message.ascii;
		else if (a->messageType == NVTX_MESSAGE_TYPE_UNICODE)
			w = a->message.unicode;
	}
	if (!s && w)
		s = utf8(w, buf, sizeof(buf));
	if (!s || shim_reentered(t))
		return 0;
	saved = errno;
	b = shim_busy(t);
	e = intern_lookup(s, strlen(s));
	shim_unbusy(t, b);
	errno = saved;
	return control_is_watched(e);
}

static int push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a, const char *s,
		const wchar_t *w)
{
	int level = api_push_level((uintptr_t)d, watched(a, s, w));

	event(EV_PUSH, d, a, s, w);
	return level;
}

static int pop(nvtxDomainHandle_t d)
{
	int watch, level = api_pop_level((uintptr_t)d, &watch);
	struct shim_thread *t;
	int saved;

	if (level >= 0 && (t = shim_thread_traced()))
		api_range(t, SHM_RANGE_POP, 0, 0, dom_id(d), 0, 0);
	if (watch) {
		saved = errno;
		control_instance_done();
		errno = saved;
	}
	return level;
}

static nvtxRangeId_t start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a,
			   const char *s, const wchar_t *w)
{
	nvtxRangeId_t id = event(EV_START, d, a, s, w);

	if (watched(a, s, w))
		control_started(id);
	return id;
}

static void end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	struct shim_thread *t = shim_thread_traced();
	int saved;

	if (t && id)
		api_range(t, SHM_RANGE_END, id, 0, dom_id(d), 0, 0);
	if (control_watch()) {
		saved = errno;
		control_end(id);
		errno = saved;
	}
}

/* ---- the core module ---- */

static void NVTX_API mark_ex(const nvtxEventAttributes_t *a) { event(EV_MARK, 0, a, 0, 0); }
static void NVTX_API mark_a(const char *s) { event(EV_MARK, 0, 0, s, 0); }
static void NVTX_API mark_w(const wchar_t *w) { event(EV_MARK, 0, 0, 0, w); }

static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *a)
{
	return start(0, a, 0, 0);
}

static nvtxRangeId_t NVTX_API start_a(const char *s) { return start(0, 0, s, 0); }
static nvtxRangeId_t NVTX_API start_w(const wchar_t *w) { return start(0, 0, 0, w); }
static void NVTX_API end_core(nvtxRangeId_t id) { end(0, id); }
static int NVTX_API push_ex(const nvtxEventAttributes_t *a) { return push(0, a, 0, 0); }
static int NVTX_API push_a(const char *s) { return push(0, 0, s, 0); }
static int NVTX_API push_w(const wchar_t *w) { return push(0, 0, 0, w); }
static int NVTX_API pop_core(void) { return pop(0); }

/* ---- the core2 module (domains) ---- */

static void NVTX_API dmark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	event(EV_MARK, d, a, 0, 0);
}

static nvtxRangeId_t NVTX_API dstart_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return start(d, a, 0, 0);
}

static void NVTX_API dend(nvtxDomainHandle_t d, nvtxRangeId_t id) { end(d, id); }

static int NVTX_API dpush_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return push(d, a, 0, 0);
}

static int NVTX_API dpop(nvtxDomainHandle_t d) { return pop(d); }

/* Looks s up under the re-entry guard: the entry is the handle. */
static const void *entry_of(const char *s)
{
	struct shim_thread *t = &shim_tls;
	const void *e;
	int b;

	if (!s)
		return 0;
	b = shim_busy(t);
	e = intern_lookup(s, strlen(s));
	shim_unbusy(t, b);
	return e;
}

static const void *entry_of_w(const wchar_t *w)
{
	char buf[UTF8_MAX];

	return w ? entry_of(utf8(w, buf, sizeof(buf))) : 0;
}

static nvtxDomainHandle_t NVTX_API dcreate_a(const char *s)
{
	return (nvtxDomainHandle_t)entry_of(s);
}

static nvtxDomainHandle_t NVTX_API dcreate_w(const wchar_t *w)
{
	return (nvtxDomainHandle_t)entry_of_w(w);
}

/* Entries live as long as the process: nothing to release. */
static void NVTX_API ddestroy(nvtxDomainHandle_t d) { (void)d; }

static nvtxStringHandle_t NVTX_API dregister_a(nvtxDomainHandle_t d, const char *s)
{
	(void)d;
	return (nvtxStringHandle_t)entry_of(s);
}

static nvtxStringHandle_t NVTX_API dregister_w(nvtxDomainHandle_t d, const wchar_t *w)
{
	(void)d;
	return (nvtxStringHandle_t)entry_of_w(w);
}

struct hook {
	unsigned int cbid;
	NvtxFunctionPointer fn;
};

#define H(id, f) { id, (NvtxFunctionPointer)(f) }

static const struct hook core[] = {
	H(NVTX_CBID_CORE_MarkEx, mark_ex), H(NVTX_CBID_CORE_MarkA, mark_a),
	H(NVTX_CBID_CORE_MarkW, mark_w), H(NVTX_CBID_CORE_RangeStartEx, start_ex),
	H(NVTX_CBID_CORE_RangeStartA, start_a), H(NVTX_CBID_CORE_RangeStartW, start_w),
	H(NVTX_CBID_CORE_RangeEnd, end_core), H(NVTX_CBID_CORE_RangePushEx, push_ex),
	H(NVTX_CBID_CORE_RangePushA, push_a), H(NVTX_CBID_CORE_RangePushW, push_w),
	H(NVTX_CBID_CORE_RangePop, pop_core),
};

static const struct hook core2[] = {
	H(NVTX_CBID_CORE2_DomainMarkEx, dmark_ex), H(NVTX_CBID_CORE2_DomainRangeStartEx, dstart_ex),
	H(NVTX_CBID_CORE2_DomainRangeEnd, dend), H(NVTX_CBID_CORE2_DomainRangePushEx, dpush_ex),
	H(NVTX_CBID_CORE2_DomainRangePop, dpop),
	H(NVTX_CBID_CORE2_DomainRegisterStringA, dregister_a),
	H(NVTX_CBID_CORE2_DomainRegisterStringW, dregister_w),
	H(NVTX_CBID_CORE2_DomainCreateA, dcreate_a), H(NVTX_CBID_CORE2_DomainCreateW, dcreate_w),
	H(NVTX_CBID_CORE2_DomainDestroy, ddestroy),
};

#undef H

static int install(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module,
		   const struct hook *hooks, size_t n)
{
	NvtxFunctionTable table = 0;
	unsigned int size = 0;
	size_t i;

	if (!cb->GetModuleFunctionTable(module, &table, &size) || !table)
		return -ENOENT;
	for (i = 0; i < n; i++)
		if (hooks[i].cbid < size && table[hooks[i].cbid])
			*table[hooks[i].cbid] = hooks[i].fn;
	return 0;
}

void nvtx_setup(const char *self)
{
	disabled = !settings.nvtx;
	if (!disabled && self && !getenv("NVTX_INJECTION64_PATH") &&
	    setenv("NVTX_INJECTION64_PATH", self, 1) == 0)
		modules_injected(self);
}

SHIM_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb;
	const NvtxExportTableVersionInfo *ver;

	/* 0 makes NVTX turn every call into a no-op for good. */
	if (disabled || !get || !__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE))
		return 0;
	cb = get(NVTX_ETID_CALLBACKS);
	if (!cb || cb->struct_size < sizeof(*cb) || !cb->GetModuleFunctionTable)
		return 0;
	ver = get(NVTX_ETID_VERSIONINFO);
	if (ver && ver->struct_size >= sizeof(*ver) && ver->SetInjectionNvtxVersion)
		ver->SetInjectionNvtxVersion(NVTX_VERSION);
	if (install(cb, NVTX_CB_MODULE_CORE, core, sizeof(core) / sizeof(core[0])) < 0)
		return 0;
	/* Old NVTX without domains: the core still works. */
	install(cb, NVTX_CB_MODULE_CORE2, core2, sizeof(core2) / sizeof(core2[0]));
	log_debug("NVTX injected");
	return 1;
}

/*
 * Parsing the SHIMMER_* environment.  One table: each variable's kind
 * (a switch, a word from a list, a number in a range, a power of two),
 * its default and where the value goes, so every variable is checked the
 * same way and says the same kind of line when its value is unusable.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "settings.h"
#include "wire.h"

#define DEFAULT_SOCKET "/run/shimmer/shimmer.sock"
#define MS 1000000ull

struct settings settings;

enum kind {
	SWITCH, /* 1/0, on/off, yes/no, true/false */
	WORD,   /* one of words[]: the index */
	NUMBER, /* decimal digits in [min, max] */
	POW2,   /* NUMBER, rounded up to a power of two */
};

struct var {
	const char *name;
	enum kind kind;
	size_t off;   /* of the field in struct settings */
	int width;    /* of the field: 4 or 8 bytes */
	uint64_t def; /* the default, in the variable's own unit */
	uint64_t min, max;
	uint64_t scale; /* the field holds value * scale */
	const char *const *words;
	const uint64_t *word_vals;
};

/* The rings' default size in SHIMMER_MALLOC=all, KiB. */
#define ALL_RING_KB 1024

static const char *const malloc_words[] = { "sample", "all", "off", 0 };
static const uint64_t malloc_vals[] = { SHM_MALLOC_SAMPLE, SHM_MALLOC_ALL, SHM_MALLOC_OFF };
static const char *const heap_rows_words[] = { "kept", "all", "both", 0 };
static const uint64_t heap_rows_vals[] = { SHM_HELLO_HEAP_AGG, SHM_HELLO_HEAP_ROWS,
					   SHM_HELLO_HEAP_ROWS | SHM_HELLO_HEAP_AGG };
static const char *const gpu_words[] = { "sample", "all", 0 };
static const uint64_t gpu_vals[] = { 1, 0 };

#define F(field) offsetof(struct settings, field), (int)sizeof(((struct settings *)0)->field)

static const struct var vars[] = {
	{ "SHIMMER_DEBUG", SWITCH, F(debug), 0, 0, 1, 1, 0, 0 },
	{ "SHIMMER_MALLOC", WORD, F(malloc_mode), SHM_MALLOC_SAMPLE, 0, 0, 1, malloc_words,
	  malloc_vals },
	{ "SHIMMER_SAMPLE_BYTES", NUMBER, F(sample_bytes), 524288, 1, 1ull << 40, 1, 0, 0 },
	{ "SHIMMER_LOSSLESS", SWITCH, F(lossless), 0, 0, 1, 1, 0, 0 },
	{ "SHIMMER_OFFCPU", SWITCH, F(offcpu), 0, 0, 1, 1, 0, 0 },
	{ "SHIMMER_HEAP_ROWS", WORD, F(heap_rows), SHM_HELLO_HEAP_AGG, 0, 0, 1, heap_rows_words,
	  heap_rows_vals },
	{ "SHIMMER_RING_KB", POW2, F(ring_bytes), 256, SHM_RING_MIN_BYTES / 1024,
	  SHM_RING_MAX_BYTES / 1024, 1024, 0, 0 },
	{ "SHIMMER_MAX_THREADS", NUMBER, F(nslots), 256, 1, SHM_SLOTS_MAX, 1, 0, 0 },
	{ "SHIMMER_STACKS", SWITCH, F(stacks), 1, 0, 1, 1, 0, 0 },
	{ "SHIMMER_STACK_DEPTH", NUMBER, F(stack_depth), 32, 1, SHM_STACK_MAX, 1, 0, 0 },
	{ "SHIMMER_STACK_CHECK", SWITCH, F(stack_check), 0, 0, 1, 1, 0, 0 },
	{ "SHIMMER_CUPTI", SWITCH, F(cupti), 1, 0, 1, 1, 0, 0 },
	{ "SHIMMER_GPU", WORD, F(gpu_sample), 1, 0, 0, 1, gpu_words, gpu_vals },
	{ "SHIMMER_GPU_WINDOW_MS", NUMBER, F(gpu_window_ns), 20, 1, 86400000, MS, 0, 0 },
	{ "SHIMMER_GPU_PERIOD_MS", NUMBER, F(gpu_period_ns), 2000, 1, 86400000, MS, 0, 0 },
	{ "SHIMMER_GPU_DETACH", SWITCH, F(gpu_detach), 1, 0, 1, 1, 0, 0 },
	{ "SHIMMER_GPU_SYNC", SWITCH, F(gpu_sync), 0, 0, 1, 1, 0, 0 },
	{ "SHIMMER_NVTX", SWITCH, F(nvtx), 1, 0, 1, 1, 0, 0 },
};

/* Lines are said once per process tree: a fork child reads again. */
static int said;

static void store(const struct var *v, uint64_t x)
{
	char *p = (char *)&settings + v->off;

	x *= v->scale;
	if (v->width == 8)
		memcpy(p, &x, 8);
	else
		memcpy(p, &(uint32_t){ (uint32_t)x }, 4);
}

/* The decimal in s (digits only, no sign, no overflow), or -1. */
static int parse_u64(const char *s, uint64_t *x)
{
	*x = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || *x > (UINT64_MAX - 9) / 10)
			return -1;
		*x = *x * 10 + (uint64_t)(*s - '0');
	}
	return 0;
}

static int parse_switch(const char *s)
{
	static const char *const on[] = { "1", "on", "yes", "true" };
	static const char *const off[] = { "0", "off", "no", "false" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(s, on[i]))
			return 1;
		if (!strcasecmp(s, off[i]))
			return 0;
	}
	return -1;
}

/* The default as the variable writes it: its word, or its number. */
static const char *def_text(const struct var *v, char *buf, size_t len)
{
	size_t i;

	if (v->kind == WORD) {
		for (i = 0; v->words[i]; i++)
			if (v->word_vals[i] == v->def)
				return v->words[i];
	}
	snprintf(buf, len, "%llu", (unsigned long long)v->def);
	return buf;
}

/* "a, b or c" */
static const char *word_list(const struct var *v, char *buf, size_t len)
{
	size_t i, n = 0;

	buf[0] = 0;
	for (i = 0; v->words[i] && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i == 0 ? "" :
				      v->words[i + 1] ? ", " : " or ", v->words[i]);
	return buf;
}

static void read_var(const struct var *v)
{
	const char *s = getenv(v->name);
	char dbuf[24], wbuf[64];
	uint64_t x, r;
	size_t i;
	int b;

	store(v, v->def);
	if (!s || !*s)
		return;
	switch (v->kind) {
	case SWITCH:
		b = parse_switch(s);
		if (b >= 0)
			store(v, (uint64_t)b);
		else if (!said)
			log_warn("%s=%s is not 1 or 0 (on or off); using %s", v->name, s,
				 def_text(v, dbuf, sizeof(dbuf)));
		return;
	case WORD:
		for (i = 0; v->words[i]; i++)
			if (!strcmp(s, v->words[i])) {
				store(v, v->word_vals[i]);
				return;
			}
		if (!said)
			log_warn("%s=%s is not %s; using %s", v->name, s,
				 word_list(v, wbuf, sizeof(wbuf)), def_text(v, dbuf, sizeof(dbuf)));
		return;
	case NUMBER:
	case POW2:
		if (parse_u64(s, &x) < 0) {
			if (!said)
				log_warn("%s=%s is not a number; using %s", v->name, s,
					 def_text(v, dbuf, sizeof(dbuf)));
			return;
		}
		if (x < v->min || x > v->max) {
			r = x < v->min ? v->min : v->max;
			if (!said)
				log_warn("%s=%s is outside [%llu, %llu]; using %llu", v->name, s,
					 (unsigned long long)v->min, (unsigned long long)v->max,
					 (unsigned long long)r);
			x = r;
		} else if (v->kind == POW2 && (x & (x - 1))) {
			for (r = v->min; r < x; r <<= 1)
				;
			if (!said)
				log_warn("%s=%s is not a power of two; using %llu", v->name, s,
					 (unsigned long long)r);
			x = r;
		}
		store(v, x);
		return;
	}
}

/* The first of names that holds a number in [0, INT32_MAX], else
 * SHM_NO_RANK.  Launchers' variables: not ours to complain about. */
static int32_t env_rank(const char *const *names)
{
	uint64_t x;

	for (; *names; names++) {
		const char *s = getenv(*names);

		if (s && parse_u64(s, &x) == 0 && x <= INT32_MAX)
			return (int32_t)x;
	}
	return SHM_NO_RANK;
}

void settings_read(void)
{
	static const char *const rank_vars[] = { SHM_RANK_VARS, 0 };
	static const char *const local_vars[] = { SHM_LOCAL_RANK_VARS, 0 };
	const char *s = getenv("SHIMMER_DISABLE");
	int b;

	settings = (struct settings){ 0 };
	if (s && *s) {
		b = parse_switch(s);
		/* Better untraced than traced against the user's wish. */
		if (b < 0 && !said)
			log_warn("SHIMMER_DISABLE=%s is not 1 or 0; using 1", s);
		settings.disable = b != 0;
		if (settings.disable)
			return;
	}
	/* SHIMMER_DEBUG first, so that later lines may be debug lines. */
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		read_var(&vars[i]);
		if (i == 0)
			log_init(settings.debug);
	}
	/* Exact mode is lossless unless told otherwise: producers wait for a
	 * collector that keeps up, and drop (counted) only when it stops. */
	s = getenv("SHIMMER_LOSSLESS");
	if ((!s || !*s) && settings.malloc_mode == SHM_MALLOC_ALL)
		settings.lossless = 1;
	/* ... with rings of ALL_RING_KB: a thread allocating as fast as the
	 * collector stores then rides out the collector's moments off the CPU
	 * instead of waiting for room (on a busy 2-core machine, heap_random's
	 * 10 M events took 1.7-3.0 s with 1 MiB rings against 2.2-3.8 s with
	 * 256 KiB).  Only the pages a thread writes are ever touched. */
	s = getenv("SHIMMER_RING_KB");
	if ((!s || !*s) && settings.malloc_mode == SHM_MALLOC_ALL)
		settings.ring_bytes = ALL_RING_KB * 1024;
	settings.socket = getenv("SHIMMER_SOCKET");
	if (!settings.socket || !*settings.socket)
		settings.socket = DEFAULT_SOCKET;
	if (settings.gpu_sample && settings.gpu_window_ns >= settings.gpu_period_ns) {
		if (!said)
			log_warn("SHIMMER_GPU_WINDOW_MS=%llu is not shorter than SHIMMER_GPU_PERIOD_MS=%llu; "
				 "recording every kernel (SHIMMER_GPU=all)",
				 (unsigned long long)(settings.gpu_window_ns / MS),
				 (unsigned long long)(settings.gpu_period_ns / MS));
		settings.gpu_sample = 0;
	}
	settings.rank = env_rank(rank_vars);
	settings.local_rank = env_rank(local_vars);
	said = 1;
}

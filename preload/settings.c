/*
 * Parsing the SHIMMER_* environment.  One table: each variable's kind
 * (a switch, a word from a list, a number in a range, a power of two),
 * its default and where the value goes, so every variable is checked the
 * same way and says the same kind of line when its value is unusable.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "settings.h"
#include "wire.h"

#define MS 1000000ull
#define CONF_KEYS 64 /* keys of the configuration file kept */

struct settings settings;

enum kind {
	SWITCH, /* 1/0, on/off, yes/no, true/false */
	WORD,   /* one of words[]: the index */
	NUMBER, /* decimal digits in [min, max] */
	POW2,   /* NUMBER, rounded up to a power of two */
	PARSED, /* parse() fills the field; expect says what it takes */
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
	int (*parse)(const char *s, void *field);
	const char *expect;
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

static int parse_duration_var(const char *s, void *field);
static int parse_start(const char *s, void *field);
static int parse_stop(const char *s, void *field);

#define PARSED_VAR(name, field, fn, expect) \
	{ name, PARSED, F(field), 0, 0, 0, 1, 0, 0, fn, expect }

static const struct var vars[] = {
	{ "SHIMMER_DEBUG", SWITCH, F(debug), 0, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_MALLOC", WORD, F(malloc_mode), SHM_MALLOC_SAMPLE, 0, 0, 1, malloc_words,
	  malloc_vals, 0, 0 },
	{ "SHIMMER_SAMPLE_BYTES", NUMBER, F(sample_bytes), 524288, 1, 1ull << 40, 1, 0, 0, 0, 0 },
	{ "SHIMMER_LOSSLESS", SWITCH, F(lossless), 0, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_OFFCPU", SWITCH, F(offcpu), 0, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_HEAP_ROWS", WORD, F(heap_rows), SHM_HELLO_HEAP_AGG, 0, 0, 1, heap_rows_words,
	  heap_rows_vals, 0, 0 },
	{ "SHIMMER_RING_KB", POW2, F(ring_bytes), 256, SHM_RING_MIN_BYTES / 1024,
	  SHM_RING_MAX_BYTES / 1024, 1024, 0, 0, 0, 0 },
	{ "SHIMMER_MAX_THREADS", NUMBER, F(nslots), 256, 1, SHM_SLOTS_MAX, 1, 0, 0, 0, 0 },
	{ "SHIMMER_STACKS", SWITCH, F(stacks), 1, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_STACK_DEPTH", NUMBER, F(stack_depth), 32, 1, SHM_STACK_MAX, 1, 0, 0, 0, 0 },
	{ "SHIMMER_STACK_CHECK", SWITCH, F(stack_check), 0, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_CUPTI", SWITCH, F(cupti), 1, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_GPU", WORD, F(gpu_sample), 1, 0, 0, 1, gpu_words, gpu_vals, 0, 0 },
	{ "SHIMMER_GPU_WINDOW_MS", NUMBER, F(gpu_window_ns), 20, 1, 86400000, MS, 0, 0, 0, 0 },
	{ "SHIMMER_GPU_PERIOD_MS", NUMBER, F(gpu_period_ns), 2000, 1, 86400000, MS, 0, 0, 0, 0 },
	{ "SHIMMER_GPU_DETACH", SWITCH, F(gpu_detach), 1, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_GPU_SYNC", SWITCH, F(gpu_sync), 0, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_NVTX", SWITCH, F(nvtx), 1, 0, 1, 1, 0, 0, 0, 0 },
	{ "SHIMMER_CONTROL", SWITCH, F(control), 1, 0, 1, 1, 0, 0, 0, 0 },
	PARSED_VAR("SHIMMER_START", start, parse_start,
		   "now, paused, after:DURATION or after-range:NAME:N"),
	PARSED_VAR("SHIMMER_STOP", stop, parse_stop,
		   "never, after:DURATION or after-range:NAME:N"),
	PARSED_VAR("SHIMMER_DURATION", duration_ns, parse_duration_var,
		   "a duration such as 60s, 500ms, 10m or 2h"),
};

/* The configuration file (conf.h): its text, NUL-terminated in place, and
 * its SHIMMER_* and socket keys. */
static char conf_text[CONF_MAX_BYTES];
static struct {
	const char *key, *val;
} conf_keys[CONF_KEYS];
static unsigned conf_n;

/* Lines are said once per process tree: a fork child reads again. */
static int said;
/* SHIMMER_SOCKET, kept (settings_read()); a socket's path is at most 107 */
static char socket_buf[256];
/* SHIMMER_TEST_WITHHOLD, kept likewise */
static char withhold_buf[64];

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

static int parse_duration_var(const char *s, void *field)
{
	uint64_t ns;

	if (conf_duration(s, strlen(s), &ns) < 0)
		return -1;
	memcpy(field, &ns, sizeof(ns));
	return 0;
}

/* after:DURATION or after-range:NAME:N (NAME may hold ':'; N >= 1). */
static int parse_trigger(const char *s, struct trigger *t)
{
	const char *colon;
	size_t n;

	*t = (struct trigger){ 0 };
	if (!strncmp(s, "after:", 6)) {
		t->kind = TRIGGER_AFTER;
		return conf_duration(s + 6, strlen(s + 6), &t->ns);
	}
	if (strncmp(s, "after-range:", 12))
		return -1;
	s += 12;
	colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(t->range) ||
	    parse_u64(colon + 1, &t->count) < 0 || t->count == 0)
		return -1;
	n = (size_t)(colon - s);
	memcpy(t->range, s, n);
	t->range[n] = 0;
	t->kind = TRIGGER_RANGE;
	return 0;
}

static int parse_start(const char *s, void *field)
{
	struct trigger t = { 0 };

	if (!strcmp(s, "paused"))
		t.kind = TRIGGER_PAUSED;
	else if (strcmp(s, "now") && parse_trigger(s, &t) < 0)
		return -1;
	memcpy(field, &t, sizeof(t));
	return 0;
}

static int parse_stop(const char *s, void *field)
{
	struct trigger t = { 0 };

	if (strcmp(s, "never") && parse_trigger(s, &t) < 0)
		return -1;
	memcpy(field, &t, sizeof(t));
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

/* The configuration file's value of name, NULL when it gives none. */
static const char *conf_get(const char *name)
{
	for (unsigned i = 0; i < conf_n; i++)
		if (!strcmp(conf_keys[i].key, name))
			return conf_keys[i].val;
	return NULL;
}

/* Whether name is set, in the environment or the configuration file. */
static int var_given(const char *name)
{
	const char *s = getenv(name);

	if (s && *s)
		return 1;
	s = conf_get(name);
	return s && *s;
}

static void read_var(const struct var *v)
{
	const char *s = getenv(v->name), *from = "";
	char dbuf[24], wbuf[64], fbuf[160];
	uint64_t x, r;
	size_t i;
	int b;

	if (v->kind == PARSED)
		memset((char *)&settings + v->off, 0, (size_t)v->width);
	else
		store(v, v->def);
	if ((!s || !*s) && (s = conf_get(v->name)) && *s) {
		snprintf(fbuf, sizeof(fbuf), " (in %s)", settings.conf);
		from = fbuf;
	}
	if (!s || !*s)
		return;
	switch (v->kind) {
	case SWITCH:
		b = parse_switch(s);
		if (b >= 0)
			store(v, (uint64_t)b);
		else if (!said)
			log_warn("%s=%s%s is not 1 or 0 (on or off); using %s", v->name, s, from,
				 def_text(v, dbuf, sizeof(dbuf)));
		return;
	case WORD:
		for (i = 0; v->words[i]; i++)
			if (!strcmp(s, v->words[i])) {
				store(v, v->word_vals[i]);
				return;
			}
		if (!said)
			log_warn("%s=%s%s is not %s; using %s", v->name, s, from,
				 word_list(v, wbuf, sizeof(wbuf)), def_text(v, dbuf, sizeof(dbuf)));
		return;
	case NUMBER:
	case POW2:
		if (parse_u64(s, &x) < 0) {
			if (!said)
				log_warn("%s=%s%s is not a number; using %s", v->name, s, from,
					 def_text(v, dbuf, sizeof(dbuf)));
			return;
		}
		if (x < v->min || x > v->max) {
			r = x < v->min ? v->min : v->max;
			if (!said)
				log_warn("%s=%s%s is outside [%llu, %llu]; using %llu", v->name, s,
					 from, (unsigned long long)v->min,
					 (unsigned long long)v->max, (unsigned long long)r);
			x = r;
		} else if (v->kind == POW2 && (x & (x - 1))) {
			for (r = v->min; r < x; r <<= 1)
				;
			if (!said)
				log_warn("%s=%s%s is not a power of two; using %llu", v->name, s,
					 from, (unsigned long long)r);
			x = r;
		}
		store(v, x);
		return;
	case PARSED:
		/* The field stays zero (the default) when s is unusable. */
		if (v->parse(s, (char *)&settings + v->off) < 0) {
			memset((char *)&settings + v->off, 0, (size_t)v->width);
			if (!said)
				log_warn("%s=%s%s is not %s; using the default", v->name, s, from,
					 v->expect);
		}
		return;
	}
}

/* One line of the configuration file: its SHIMMER_* keys and socket are
 * kept (NUL-terminated in place); other keys are shimmerd's. */
static int conf_line(void *ctx, const struct conf_line *l)
{
	(void)ctx;
	if (!l->key || conf_n == CONF_KEYS ||
	    !((l->key_len > 8 && !memcmp(l->key, "SHIMMER_", 8)) || conf_is(l, "socket")))
		return 0;
	((char *)l->key)[l->key_len] = 0;
	((char *)l->val)[l->val_len] = 0;
	conf_keys[conf_n].key = l->key;
	conf_keys[conf_n].val = l->val;
	conf_n++;
	return 0;
}

/* The service's configuration, for a process that talks to the service.
 * A file that is not there is no configuration; one that cannot be read
 * is said once. */
static void read_conf(void)
{
	const char *path = getenv("SHIMMER_CONFIG");
	ssize_t n;

	conf_n = 0;
	settings.conf = NULL;
	if (!path || !*path)
		path = SHIMMER_CONF_PATH;
	n = conf_read(path, conf_text, sizeof(conf_text));
	if (n < 0) {
		if (n != -ENOENT && !said)
			log_warn("cannot read %s: %s; using the built-in defaults", path,
				 strerrordesc_np((int)-n));
		return;
	}
	settings.conf = path;
	conf_parse(conf_text, (size_t)n, conf_line, NULL);
}

/*
 * The job this process belongs to (wire.h, enum shm_job_kind): SHIMMER_JOB,
 * else the first launcher variable set (most specific first: a torchrun
 * inside a Slurm allocation is its own job), else the process group.
 * torchrun without a rendezvous id says "none": that names no job.
 */
static void read_job(void)
{
	static const struct {
		const char *var, *prefix;
	} launchers[] = {
		{ "TORCHELASTIC_RUN_ID", "torchelastic:" }, { "PMIX_NAMESPACE", "pmix:" },
		{ "OMPI_MCA_ess_base_jobid", "ompi:" },    { "SLURM_JOB_ID", "slurm:" },
		{ "LSB_JOBID", "lsf:" },                   { "PBS_JOBID", "pbs:" },
		{ "FLUX_JOB_ID", "flux:" },
	};
	static char key[SHM_JOB_MAX + 1];
	const char *s = getenv("SHIMMER_JOB");
	int n;

	if (!s || !*s)
		s = conf_get("SHIMMER_JOB");
	if (s && *s) {
		/* a copy: the environment's memory is the program's (below) */
		settings.job_len = (uint32_t)strnlen(s, SHM_JOB_MAX);
		memcpy(key, s, settings.job_len);
		key[settings.job_len] = 0;
		settings.job = key;
		settings.job_kind = SHM_JOB_NAMED;
		return;
	}
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		s = getenv(launchers[i].var);
		if (!s || !*s || (i == 0 && !strcmp(s, "none")))
			continue;
		n = snprintf(key, sizeof(key), "%s%s", launchers[i].prefix, s);
		settings.job = key;
		settings.job_len = (uint32_t)(n < (int)SHM_JOB_MAX ? n : (int)SHM_JOB_MAX);
		settings.job_kind = SHM_JOB_LAUNCHER;
		return;
	}
	n = snprintf(key, sizeof(key), "pgid:%d", (int)getpgrp());
	settings.job = key;
	settings.job_len = (uint32_t)n;
	settings.job_kind = SHM_JOB_PGID;
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
	conf_n = 0;
	if (s && *s) {
		b = parse_switch(s);
		/* Better untraced than traced against the user's wish. */
		if (b < 0 && !said)
			log_warn("SHIMMER_DISABLE=%s is not 1 or 0; using 1", s);
		settings.disable = b != 0;
		if (settings.disable)
			return;
	}
	settings.socket = getenv("SHIMMER_SOCKET");
	if (!settings.socket || !*settings.socket) {
		read_conf();
		settings.socket = conf_get("socket");
		if (!settings.socket || !*settings.socket)
			settings.socket = SHIMMER_SOCKET_PATH;
	} else {
		/* A copy, as of every string kept from the environment: its
		 * memory is the program's, and programs that set their process
		 * title (Chromium's zygote, nginx, PostgreSQL) write over it.
		 * A fork child then connected to what the title left there
		 * ("collector not reached at  (Connection refused)") and went
		 * untraced.  A path too long for a socket stays too long. */
		snprintf(socket_buf, sizeof(socket_buf), "%s", settings.socket);
		settings.socket = socket_buf;
	}
	/* SHIMMER_DEBUG first, so that later lines may be debug lines. */
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		read_var(&vars[i]);
		if (i == 0)
			log_init(settings.debug);
	}
	/* Exact mode is lossless unless told otherwise: producers wait for a
	 * collector that keeps up, and drop (counted) only when it stops;
	 * with rings of ALL_RING_KB, a thread allocating as fast as the
	 * collector stores rides out the collector's moments off the CPU
	 * instead of waiting for room (on a busy 2-core machine, heap_random's
	 * 10 M events took 1.7-3.0 s with 1 MiB rings against 2.2-3.8 s with
	 * 256 KiB).  Only the pages a thread writes are ever touched. */
	if (settings.malloc_mode == SHM_MALLOC_ALL) {
		if (!var_given("SHIMMER_LOSSLESS"))
			settings.lossless = 1;
		if (!var_given("SHIMMER_RING_KB"))
			settings.ring_bytes = ALL_RING_KB * 1024;
	}
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
	read_job();
	/* For tests only: the names that fail to reach the collector (a
	 * full socket, under load) made to order. */
	s = getenv("SHIMMER_TEST_WITHHOLD");
	if (s && *s) {
		snprintf(withhold_buf, sizeof(withhold_buf), "%s", s);
		settings.withhold = withhold_buf;
	}
	said = 1;
}

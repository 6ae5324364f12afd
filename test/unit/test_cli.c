/*
 * tools/cli.c: the rules every command line shares for numbers
 * (docs/usage.md, "Numbers, sizes and durations"): what each kind of
 * option accepts, with the value it reads, and what it refuses, with the
 * one line it says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/cli.h"

static const struct command cmd = { .name = "test", .brief = "", .usage = "" };

/* stderr into a temporary file while fn runs, read back into err. */
struct cap {
	FILE *f;
	int saved;
};

static void cap_begin(struct cap *c)
{
	fflush(stderr);
	c->f = tmpfile();
	assert_non_null(c->f);
	c->saved = dup(2);
	assert_true(c->saved >= 0);
	assert_true(dup2(fileno(c->f), 2) == 2);
}

static void cap_end(struct cap *c, char *err, size_t len)
{
	size_t n;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	rewind(c->f);
	n = fread(err, 1, len - 1, c->f);
	err[n] = 0;
	fclose(c->f);
}

/* Runs the option parser of kind on "NAME VALUE" (and "NAME=VALUE", which
 * must read the same); returns its result, the value in *v. */
enum kind { INT, NUMBER, DURATION };

static int run(enum kind k, const char *name, const char *value, double *v, char *err,
	       size_t len)
{
	char joined[128], *argv[3] = { (char *)name, (char *)value, NULL };
	char *argv_eq[2] = { joined, NULL };
	int64_t iv = 0, iv_eq = 0;
	uint64_t dv = 0, dv_eq = 0;
	double nv = 0, nv_eq = 0;
	struct cli_args a = CLI_ARGS(&cmd, 2, argv, NULL, 0);
	struct cli_args a_eq = CLI_ARGS(&cmd, 1, argv_eq, NULL, 0);
	int r = 0, r_eq = 0;
	struct cap c;

	snprintf(joined, sizeof(joined), "%s=%s", name, value);
	cap_begin(&c);
	switch (k) {
	case INT:
		r = cli_int_opt(&a, name, &iv);
		r_eq = cli_int_opt(&a_eq, name, &iv_eq);
		*v = (double)iv;
		assert_true(iv == iv_eq);
		break;
	case NUMBER:
		r = cli_number_opt(&a, name, &nv);
		r_eq = cli_number_opt(&a_eq, name, &nv_eq);
		*v = nv;
		assert_true(nv == nv_eq);
		break;
	case DURATION:
		r = cli_duration_opt(&a, name, &dv);
		r_eq = cli_duration_opt(&a_eq, name, &dv_eq);
		*v = (double)dv;
		assert_true(dv == dv_eq);
		break;
	}
	cap_end(&c, err, len);
	assert_int_equal(r, r_eq);
	if (r == 1) {
		assert_int_equal(a.i, 1); /* past the separate value */
		assert_int_equal(a_eq.i, 0);
		assert_string_equal(err, "");
	}
	return r;
}

struct row {
	enum kind k;
	const char *name, *value;
	double want;      /* when accepted */
	const char *form; /* refused: what the line says is accepted; NULL: accepted */
};

static const struct row rows[] = {
	/* counts: --pid, --rank, --callers, --warmup-steps */
	{ INT, "--pid", "16", 16, NULL },
	{ INT, "--pid", "0", 0, NULL },
	{ INT, "--pid", "0016", 16, NULL },
	{ INT, "--rank", "9223372036854775807", 9223372036854775807.0, NULL },
	{ INT, "--pid", "0x10", 0, "a whole decimal number >= 0" },
	{ INT, "--pid", "1e3", 0, "a whole decimal number >= 0" },
	{ INT, "--pid", "-1", 0, "a whole decimal number >= 0" },
	{ INT, "--pid", "+1", 0, "a whole decimal number >= 0" },
	{ INT, "--pid", " 1", 0, "a whole decimal number >= 0" },
	{ INT, "--pid", "1.0", 0, "a whole decimal number >= 0" },
	{ INT, "--pid", "", 0, "a whole decimal number >= 0" },
	{ INT, "--rank", "9223372036854775808", 0, "a whole decimal number >= 0" },
	{ INT, "--warmup-steps", "99999999999999999999", 0, "a whole decimal number >= 0" },
	/* numbers: thresholds, --begin, --end, --max-mb */
	{ NUMBER, "--threshold", "10", 10, NULL },
	{ NUMBER, "--threshold", "12.5", 12.5, NULL },
	{ NUMBER, "--begin", ".5", 0.5, NULL },
	{ NUMBER, "--begin", "2.", 2, NULL },
	{ NUMBER, "--max-mb", "0", 0, NULL },
	{ NUMBER, "--max-mb", "1e3", 0, "a decimal number >= 0" },
	{ NUMBER, "--max-mb", "0x10", 0, "a decimal number >= 0" },
	{ NUMBER, "--threshold", "inf", 0, "a decimal number >= 0" },
	{ NUMBER, "--threshold", "nan", 0, "a decimal number >= 0" },
	{ NUMBER, "--threshold", "-1", 0, "a decimal number >= 0" },
	{ NUMBER, "--threshold", "+1", 0, "a decimal number >= 0" },
	{ NUMBER, "--threshold", ".", 0, "a decimal number >= 0" },
	{ NUMBER, "--threshold", "1.2.3", 0, "a decimal number >= 0" },
	{ NUMBER, "--threshold", "", 0, "a decimal number >= 0" },
	/* durations: --for */
	{ DURATION, "--for", "30", 30e9, NULL },
	{ DURATION, "--for", "1d", 86400e9, NULL },
	{ DURATION, "--for", "250us", 250e3, NULL },
	{ DURATION, "--for", "7ns", 7, NULL },
	{ DURATION, "--for", "1.5m", 90e9, NULL },
	{ DURATION, "--for", "1e3", 0, "a duration > 0 (a decimal number and ns, us, ms, s, m, h or d" },
	{ DURATION, "--for", "0x10", 0, "a duration > 0" },
	{ DURATION, "--for", "0", 0, "a duration > 0" },
	{ DURATION, "--for", "0s", 0, "a duration > 0" },
	{ DURATION, "--for", "-1s", 0, "a duration > 0" },
	{ DURATION, "--for", "10 s", 0, "a duration > 0" },
	{ DURATION, "--for", "1w", 0, "a duration > 0" },
	{ DURATION, "--for", "999999999d", 0, "a duration > 0" },
};

static void test_cli_numbers(void **state)
{
	char err[512], want[256];
	double v;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *t = &rows[i];
		int r = run(t->k, t->name, t->value, &v, err, sizeof(err));

		print_message("%s %s\n", t->name, t->value);
		if (!t->form) {
			assert_int_equal(r, 1);
			assert_true(v == t->want);
			continue;
		}
		assert_int_equal(r, -1);
		/* One line per attempt (two: "NAME VALUE" and "NAME=VALUE"),
		 * naming the option, the form and the value refused. */
		snprintf(want, sizeof(want), "shimmer: error: %s wants %s", t->name, t->form);
		assert_non_null(strstr(err, want));
		snprintf(want, sizeof(want), "not '%s' (see 'shimmer test --help')\n", t->value);
		assert_non_null(strstr(err, want));
		{
			size_t n = strlen(err), lines = 0;

			for (size_t k = 0; k < n; k++)
				lines += err[k] == '\n';
			assert_int_equal(lines, 2);
			assert_int_equal(n % 2, 0);
			assert_memory_equal(err, err + n / 2, n / 2);
		}
	}
}

/* This kernel's pid_max, read here on its own. */
static int64_t pid_max(void)
{
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
	long long v = 0;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%lld", &v), 1);
	fclose(f);
	assert_true(v >= 2 && v <= 4194304);
	return v;
}

/* A live process's id: 1 to pid_max - 1 (it took any count to
 * 2147483647, beyond what any kernel hands out). */
static void test_cli_pid_operand(void **state)
{
	const int64_t max = pid_max();
	char top[32], over[32], want[160];
	struct {
		const char *s;
		int64_t want; /* 0: refused */
	} t[] = {
		{ "1", 1 }, { top, max - 1 }, { over, 0 }, { "4194304", 0 }, { "2147483647", 0 },
		{ "0", 0 }, { "2147483648", 0 }, { "0x10", 0 }, { "1e3", 0 }, { "-5", 0 },
		{ "+5", 0 }, { " 5", 0 }, { "5 ", 0 }, { "", 0 }, { "5.0", 0 },
	};
	char err[256];

	(void)state;
	snprintf(top, sizeof(top), "%lld", (long long)max - 1);
	snprintf(over, sizeof(over), "%lld", (long long)max);
	snprintf(want, sizeof(want), "is not a process id (a whole decimal number, 1 to %lld: below"
		 " the kernel's pid_max)", (long long)max - 1);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int64_t pid = 0;
		struct cap c;
		int r;

		print_message("%s\n", t[i].s);
		cap_begin(&c);
		r = cli_pid_arg(&cmd, t[i].s, &pid);
		cap_end(&c, err, sizeof(err));
		if (t[i].want) {
			assert_int_equal(r, 0);
			assert_int_equal(pid, t[i].want);
			assert_string_equal(err, "");
		} else {
			assert_int_equal(r, -1);
			assert_non_null(strstr(err, want));
			assert_true(strchr(err, '\n') == err + strlen(err) - 1);
		}
	}
}

/* A recorded process's id (--pid of the readers): 1 to 4194303, the
 * largest any kernel hands out (it took any count, 0 too). */
static void test_cli_store_pid(void **state)
{
	static const struct {
		const char *arg;
		int64_t want; /* 0: refused */
	} t[] = {
		{ "--pid=1", 1 }, { "--pid=4194303", 4194303 }, { "--pid=4194304", 0 },
		{ "--pid=0", 0 }, { "--pid=4294967295", 0 }, { "--pid=0x10", 0 }, { "--pid=-1", 0 },
		{ "--pid=", 0 },
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *argv[2] = { "test", (char *)t[i].arg };
		struct cli_args a = CLI_ARGS(&cmd, 2, argv, NULL, 0);
		int64_t pid = 0;
		struct cap c;
		int r;

		print_message("%s\n", t[i].arg);
		a.i = 1;
		cap_begin(&c);
		r = cli_store_pid_opt(&a, "--pid", &pid);
		cap_end(&c, err, sizeof(err));
		if (t[i].want) {
			assert_int_equal(r, 1);
			assert_int_equal(pid, t[i].want);
			assert_string_equal(err, "");
		} else {
			assert_int_equal(r, -1);
			assert_non_null(strstr(err, "--pid wants a process id (a whole decimal number,"
						" 1 to 4194303), not '"));
		}
	}
}

/* One command line through cli_next(), as a store reader takes it (one
 * store, --pid and -n options): what each step found, as letters (O an
 * option, P an operand the caller reads, E the end, or the exit code),
 * the store and the stderr line. */
static void walk(char **argv, int argc, const char **stores, size_t n, char *seen, size_t len,
		 char *err, size_t err_len)
{
	struct cli_args a = CLI_ARGS(&cmd, argc, argv, stores, n);
	int64_t pid;
	size_t w = 0;
	struct cap c;
	int k, r;

	cap_begin(&c);
	do {
		k = cli_next(&a);
		if (k == CLI_ARG_OPTION) {
			seen[w++] = 'O';
			r = cli_int_opt(&a, "--pid", &pid);
			if (r == 0 && n)
				r = cli_store_arg(&a) ? -1 : 0;
			if (r < 0) {
				k = CLI_EXIT_USAGE;
				seen[w++] = '2';
			}
		} else if (k == CLI_ARG_OPERAND) {
			seen[w++] = 'P';
		} else {
			seen[w++] = k == CLI_ARG_END ? 'E' : (char)('0' + k);
		}
	} while ((k == CLI_ARG_OPTION || k == CLI_ARG_OPERAND) && w + 1 < len);
	seen[w] = 0;
	fflush(stdout);
	cap_end(&c, err, err_len);
}

static void test_cli_next(void **state)
{
	static const struct {
		const char *args[6];
		size_t nstores; /* 0: the caller reads operands */
		const char *seen, *store, *err;
	} t[] = {
		{ { "a.db" }, 1, "OE", "a.db", "" },
		{ { "--", "a.db" }, 1, "E", "a.db", "" },
		{ { "a.db", "--" }, 1, "OE", "a.db", "" },
		{ { "--", "-x.db" }, 1, "E", "-x.db", "" },
		{ { "-x.db" }, 1, "O2", NULL, "unknown option '-x.db'" },
		{ { "-" }, 1, "OE", "-", "" },
		/* after "--": an operand, even -h, --pid or a second "--" */
		{ { "--", "-h" }, 1, "E", "-h", "" },
		{ { "a.db", "--", "-h" }, 1, "O2", "a.db", "more than one store given" },
		{ { "--", "--", "a.db" }, 1, "2", "--", "more than one store given" },
		{ { "--", "--pid", "5" }, 0, "PPE", NULL, "" },
		{ { "a.db", "b.db" }, 1, "OO2", "a.db", "more than one store given" },
		{ { "a.db", "b.db" }, 2, "OOE", "a.db", "" },
		{ { "a.db", "b.db", "--", "c.db" }, 2, "OO2", "a.db", "more than two stores" },
		/* before it: -h anywhere, options and operands in any order */
		{ { "-h", "a.db" }, 1, "0", NULL, "" },
		{ { "a.db", "--help" }, 1, "O0", "a.db", "" },
		{ { "--pid", "5", "a.db" }, 1, "OOE", "a.db", "" },
		{ { "a.db", "--pid=5" }, 1, "OOE", "a.db", "" },
		/* an option's value is never "--" ending the options (a value
		 * forgotten), nor -h */
		{ { "--pid", "--", "a.db" }, 1, "O2", NULL, "--pid needs a value" },
		{ { "--pid", "-h" }, 1, "O2", NULL, "--pid wants a whole decimal number" },
		{ { "--pid" }, 1, "O2", NULL, "--pid needs a value" },
		/* at the end, every store given */
		{ { 0 }, 1, "2", NULL, "no store given" },
		{ { "--pid", "5", "--" }, 1, "O2", NULL, "no store given" },
		{ { "a.db" }, 2, "O2", "a.db", "two stores are needed" },
		{ { 0 }, 0, "E", NULL, "" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *argv[8] = { "test" }, seen[16], err[256];
		const char *stores[2] = { NULL, NULL };
		int argc = 1;

		for (; t[i].args[argc - 1]; argc++)
			argv[argc] = (char *)t[i].args[argc - 1];
		print_message("case %zu\n", i);
		walk(argv, argc, t[i].nstores ? stores : NULL, t[i].nstores, seen, sizeof(seen), err,
		     sizeof(err));
		assert_string_equal(seen, t[i].seen);
		if (t[i].store)
			assert_string_equal(stores[0], t[i].store);
		else
			assert_null(stores[0]);
		if (*t[i].err)
			assert_non_null(strstr(err, t[i].err));
		else
			assert_string_equal(err, "");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli_numbers),
		cmocka_unit_test(test_cli_pid_operand),
		cmocka_unit_test(test_cli_store_pid),
		cmocka_unit_test(test_cli_next),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The intern table (preload/intern.c) against a collector stand-in: the
 * other end of a SOCK_SEQPACKET socketpair, read by a thread that decodes
 * every STRING message.  Checks one id and exactly one STRING per distinct
 * string, also when threads race for the same strings; the re-announcement
 * after fork (a new epoch); retries after a failed send; truncation.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "preload/intern.h"
#include "wire.h"

#define MAX_IDS 8192
#define THREADS 4
#define STRINGS 1500

/* What the stand-in collector saw: per id, how many STRINGs and the text. */
struct seen {
	int fd;
	unsigned int count[MAX_IDS];
	char *text[MAX_IDS];
	unsigned int total;
	int bad; /* malformed message or out-of-range id */
};

static void *reader(void *arg)
{
	static char buf[SHM_MSG_MAX];
	struct seen *s = arg;
	const struct shm_msg_string *m = (const void *)buf;
	ssize_t n;

	while ((n = recv(s->fd, buf, sizeof(buf), 0)) > 0) {
		if ((size_t)n < sizeof(*m) || m->hdr.magic != SHM_MAGIC ||
		    m->hdr.type != SHM_MSG_STRING || m->hdr.len != (size_t)n ||
		    m->len + sizeof(*m) != (size_t)n || m->id == 0 || m->id >= MAX_IDS) {
			s->bad++;
			continue;
		}
		s->count[m->id]++;
		s->total++;
		free(s->text[m->id]);
		s->text[m->id] = strndup(buf + sizeof(*m), m->len);
	}
	return 0;
}

struct fixture {
	int fd[2];
	pthread_t reader;
	struct seen seen;
};

/* Where intern's STRING messages go: the shim's conn_sendmsg() sends on
 * its socket, the tests on the sending end of a socketpair. */
static int send_fd = -1;

static int send_to(const struct msghdr *mh)
{
	return sendmsg(send_fd, mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* A fresh socketpair; intern sends on fd[0], the reader drains fd[1]. */
static struct fixture *fixture_new(void)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, f->fd), 0);
	f->seen.fd = f->fd[1];
	assert_int_equal(pthread_create(&f->reader, 0, reader, &f->seen), 0);
	send_fd = f->fd[0];
	assert_int_equal(intern_init(send_to), 0);
	return f;
}

/* Closes the sending side, so the reader has seen everything once joined. */
static void fixture_drain(struct fixture *f)
{
	shutdown(f->fd[0], SHUT_WR);
	pthread_join(f->reader, 0);
	close(f->fd[0]);
	close(f->fd[1]);
}

static void fixture_free(struct fixture *f)
{
	unsigned int i;

	for (i = 0; i < MAX_IDS; i++)
		free(f->seen.text[i]);
	free(f);
}

/* Interns until the announcement goes through (a full socket may refuse). */
static uint32_t intern_sure(const char *s)
{
	uint32_t id;
	int tries;

	for (tries = 0; tries < 1000; tries++) {
		id = intern_str(s);
		if (id)
			return id;
		usleep(1000);
	}
	fail_msg("could not intern %s", s);
	return 0;
}

static void test_intern_same_string_same_id(void **state)
{
	struct fixture *f = fixture_new();
	uint32_t a, b, a2, e;
	char buf[8] = "alpha";

	(void)state;
	a = intern_sure("alpha");
	b = intern_sure("beta");
	a2 = intern_sure(buf); /* same text, another pointer */
	e = intern_mem("alphabet", 5);
	fixture_drain(f);
	assert_int_not_equal(a, 0);
	assert_int_not_equal(a, b);
	assert_int_equal(a, a2);
	assert_int_equal(a, e);
	assert_int_equal(f->seen.bad, 0);
	assert_int_equal(f->seen.count[a], 1);
	assert_int_equal(f->seen.count[b], 1);
	assert_string_equal(f->seen.text[a], "alpha");
	assert_string_equal(f->seen.text[b], "beta");
	fixture_free(f);
}

struct worker {
	unsigned int seed;
	uint32_t ids[STRINGS];
};

static void name_of(unsigned int i, char *buf, size_t cap)
{
	snprintf(buf, cap, "race/kernel_%u_%s", i, i % 3 ? "fwd" : "bwd_with_a_longer_name");
}

static void *work(void *arg)
{
	struct worker *w = arg;
	char name[64];
	unsigned int i, k, step;

	/* Every thread walks all strings, from its own start and stride. */
	step = (const unsigned int[]){ 7, 11, 13, 17 }[w->seed % 4]; /* prime to 1500 */
	for (k = 0, i = w->seed * 389 % STRINGS; k < STRINGS; k++, i = (i + step) % STRINGS) {
		name_of(i, name, sizeof(name));
		w->ids[i] = intern_sure(name);
	}
	return 0;
}

static void test_intern_concurrent_one_id_one_message(void **state)
{
	static struct worker w[THREADS];
	struct fixture *f = fixture_new();
	pthread_t tid[THREADS];
	char name[64];
	unsigned int i, j;

	(void)state;
	for (j = 0; j < THREADS; j++) {
		w[j].seed = j;
		assert_int_equal(pthread_create(&tid[j], 0, work, &w[j]), 0);
	}
	for (j = 0; j < THREADS; j++)
		pthread_join(tid[j], 0);
	fixture_drain(f);
	assert_int_equal(f->seen.bad, 0);
	assert_int_equal(f->seen.total, STRINGS);
	for (i = 0; i < STRINGS; i++) {
		name_of(i, name, sizeof(name));
		for (j = 1; j < THREADS; j++)
			assert_int_equal(w[j].ids[i], w[0].ids[i]);
		assert_true(w[0].ids[i] < MAX_IDS);
		assert_int_equal(f->seen.count[w[0].ids[i]], 1);
		assert_string_equal(f->seen.text[w[0].ids[i]], name);
	}
	fixture_free(f);
}

/* After fork the child keeps the ids and announces each again, once, on
 * its own connection, the first time it uses it. */
static void test_intern_fork_child_announces_again(void **state)
{
	struct fixture *f = fixture_new(), *g;
	const struct intern_entry *e;
	uint32_t a, a2, a3;

	(void)state;
	a = intern_sure("parent/string");
	e = intern_lookup("parent/string", strlen("parent/string"));
	fixture_drain(f);
	assert_int_equal(f->seen.count[a], 1);

	g = calloc(1, sizeof(*g));
	assert_non_null(g);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, g->fd), 0);
	g->seen.fd = g->fd[1];
	assert_int_equal(pthread_create(&g->reader, 0, reader, &g->seen), 0);
	send_fd = g->fd[0];
	intern_fork_child(send_to);
	a2 = intern_id(e);
	a3 = intern_sure("parent/string");
	fixture_drain(g);
	assert_int_equal(a2, a);
	assert_int_equal(a3, a);
	assert_int_equal(g->seen.count[a], 1);
	assert_int_equal(g->seen.total, 1);
	assert_string_equal(g->seen.text[a], "parent/string");
	fixture_free(f);
	fixture_free(g);
}

/* A send that fails yields id 0, and the same id is announced later. */
static void test_intern_failed_send_retried(void **state)
{
	struct fixture *f;
	int dead[2];
	uint32_t id, id2;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, dead), 0);
	close(dead[1]);
	send_fd = dead[0];
	assert_int_equal(intern_init(send_to), 0);
	assert_int_equal(intern_str("lost/first"), 0);
	close(dead[0]);

	f = fixture_new();
	id = intern_sure("lost/first");
	id2 = intern_sure("lost/first");
	fixture_drain(f);
	assert_int_equal(id, id2);
	assert_int_equal(f->seen.count[id], 1);
	assert_string_equal(f->seen.text[id], "lost/first");
	fixture_free(f);
}

static void test_intern_long_string_truncated(void **state)
{
	struct fixture *f = fixture_new();
	size_t n = INTERN_MAX_LEN + 100;
	char *s = malloc(n + 1);
	uint32_t id, id2;

	(void)state;
	assert_non_null(s);
	memset(s, 'k', n);
	s[n] = '\0';
	id = intern_sure(s);
	s[INTERN_MAX_LEN + 50] = 'x'; /* past the cut: the same string */
	id2 = intern_sure(s);
	fixture_drain(f);
	assert_int_equal(id, id2);
	assert_int_equal(f->seen.count[id], 1);
	assert_int_equal(strlen(f->seen.text[id]), INTERN_MAX_LEN);
	free(s);
	fixture_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intern_same_string_same_id),
		cmocka_unit_test(test_intern_concurrent_one_id_one_message),
		cmocka_unit_test(test_intern_fork_child_announces_again),
		cmocka_unit_test(test_intern_failed_send_retried),
		cmocka_unit_test(test_intern_long_string_truncated),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}

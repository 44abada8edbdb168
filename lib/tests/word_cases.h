/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The cases of knitk_word_wait() and knitk_word_wake() on one knot, for
 * either backend: lib/tests/word_test.c runs them on the futex backend,
 * selftests/knitk/lib_word_test.c on the module.  Each returns 0, or -1
 * with what went wrong in @why.  No case waits for time: a waker wakes
 * again until a sleeper was there to be woken.
 */
#ifndef KNITK_WORD_CASES_H
#define KNITK_WORD_CASES_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <knitk.h>

#define WORD_WAITERS	17	/* more than the module's 16 queues: two share one */

struct word_knot {
	struct knitk_endpoint *ep;
	char *base;
	struct knitk_layout l;
};

static int word_fail(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -1;
}

#define WORD_EXPECT(cond, ...) do {					\
	if (!(cond))							\
		return word_fail(why, n, __VA_ARGS__);			\
} while (0)

/* A knot of @flags whose data region holds many words. */
static int word_knot_create(struct word_knot *wk, unsigned int flags)
{
	struct knitk_geometry g = {
		.nr_submitters = 1, .nr_workers = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64,
		.arena_bytes = 4096,
	};
	void *base;
	int ret;

	ret = knitk_endpoint_create(&g, flags, &wk->ep);
	if (ret)
		return ret;
	if (knitk_endpoint_layout(wk->ep, &wk->l, NULL) ||
	    knitk_endpoint_base(wk->ep, &base)) {
		knitk_endpoint_destroy(wk->ep);
		return -EPROTO;
	}
	wk->base = base;
	return 0;
}

/*
 * Word @i of the knot's last page, for the tests to wait on: bytes of an
 * arena that no producer here allocates, which neither the library nor
 * the module ever writes (the first page of the data region holds the
 * doorbells).
 */
static _Atomic uint32_t *word_at(const struct word_knot *wk, unsigned int i)
{
	return (_Atomic uint32_t *)(wk->base + wk->l.size - 4096) + i;
}

static uint64_t word_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Every refusal, before anything waits or wakes. */
static int word_case_bad_arguments(struct word_knot *wk, char *why, size_t n)
{
	const uint32_t *w = (const uint32_t *)(wk->base + wk->l.control_size);
	const uint32_t *end = (const uint32_t *)(wk->base + wk->l.size);
	uint32_t local = 0;
	int r;

	WORD_EXPECT((r = knitk_word_wait(NULL, w, 0, 0)) == -EINVAL, "NULL ep: %d", r);
	WORD_EXPECT((r = knitk_word_wait(wk->ep, NULL, 0, 0)) == -EINVAL, "NULL word: %d", r);
	WORD_EXPECT((r = knitk_word_wait(wk->ep, (const uint32_t *)((const char *)w + 1), 0, 0)) == -EINVAL,
		    "misaligned: %d", r);
	WORD_EXPECT((r = knitk_word_wait(wk->ep, (const uint32_t *)wk->base, 0, 0)) == -EINVAL,
		    "control page: %d", r);
	WORD_EXPECT((r = knitk_word_wait(wk->ep, w - 1, 0, 0)) == -EINVAL,
		    "last word of the control page: %d", r);
	WORD_EXPECT((r = knitk_word_wait(wk->ep, end, 0, 0)) == -EINVAL, "past the end: %d", r);
	WORD_EXPECT((r = knitk_word_wait(wk->ep, &local, 0, 0)) == -EINVAL, "not the knot's: %d", r);
	WORD_EXPECT((r = knitk_word_wake(NULL, w, 1)) == -EINVAL, "wake NULL ep: %d", r);
	WORD_EXPECT((r = knitk_word_wake(wk->ep, w, 0)) == -EINVAL, "wake nr 0: %d", r);
	WORD_EXPECT((r = knitk_word_wake(wk->ep, end, 1)) == -EINVAL, "wake past the end: %d", r);
	WORD_EXPECT((r = knitk_word_wake(wk->ep, &local, 1)) == -EINVAL, "wake not the knot's: %d", r);
	/* The first and last data words are the knot's; nobody waits there. */
	WORD_EXPECT((r = knitk_word_wake(wk->ep, w, 1)) == 0, "wake first word: %d", r);
	WORD_EXPECT((r = knitk_word_wake(wk->ep, end - 1, UINT_MAX)) == 0, "wake last word: %d", r);
	return 0;
}

/* A word that changed returns at once; a deadline ends the wait. */
static int word_case_mismatch_and_deadline(struct word_knot *wk, char *why, size_t n)
{
	const uint32_t *w = (const uint32_t *)word_at(wk, 1);
	uint64_t t0;
	int r;

	atomic_store(word_at(wk, 1), 7);
	WORD_EXPECT((r = knitk_word_wait(wk->ep, w, 6, KNITK_WAIT_FOREVER)) == -EAGAIN,
		    "changed word: %d", r);
	WORD_EXPECT((r = knitk_word_wait(wk->ep, w, 7, 0)) == -ETIMEDOUT, "past deadline: %d", r);
	t0 = word_now_ns();
	WORD_EXPECT((r = knitk_word_wait(wk->ep, w, 7, t0 + 2000000)) == -ETIMEDOUT,
		    "deadline: %d", r);
	WORD_EXPECT(word_now_ns() >= t0 + 2000000, "returned before its deadline");
	WORD_EXPECT(atomic_load(word_at(wk, 1)) == 7, "the word changed");
	return 0;
}

struct word_sleeper {
	struct word_knot *wk;
	unsigned int word;
	uint32_t expected;
	_Atomic int ret;
	_Atomic int done;
	pthread_t t;
};

static void *word_sleeper_main(void *arg)
{
	struct word_sleeper *s = arg;

	atomic_store(&s->ret, knitk_word_wait(s->wk->ep,
					      (const uint32_t *)word_at(s->wk, s->word),
					      s->expected, KNITK_WAIT_FOREVER));
	atomic_store(&s->done, 1);
	return NULL;
}

/*
 * Wake @word until @want sleepers were woken in all, at most @nr a time;
 * -1 when a wake reported more than @nr or failed.
 */
static int word_wake_until(struct word_knot *wk, unsigned int word,
			   unsigned int nr, unsigned int want)
{
	unsigned int total = 0;
	int r;

	while (total < want) {
		r = knitk_word_wake(wk->ep, (const uint32_t *)word_at(wk, word), nr);
		if (r < 0 || (unsigned int)r > nr || total + (unsigned int)r > want)
			return -1;
		total += (unsigned int)r;
		if (!r)
			sched_yield();
	}
	return 0;
}

/*
 * Sleepers on WORD_WAITERS different words (two of them share a queue of
 * the module's): each wake of one word wakes its own sleeper and no
 * other, and counts it once.
 */
static int word_case_wakes_only_its_word(struct word_knot *wk, char *why, size_t n)
{
	struct word_sleeper s[WORD_WAITERS];
	unsigned int i, j;
	int failed = 0;

	for (i = 0; i < WORD_WAITERS; i++) {
		s[i] = (struct word_sleeper){ .wk = wk, .word = 8 + i };
		atomic_store(word_at(wk, 8 + i), 0);
		if (pthread_create(&s[i].t, NULL, word_sleeper_main, &s[i]))
			return word_fail(why, n, "pthread_create");
	}
	for (i = 0; i < WORD_WAITERS && !failed; i++) {
		if (word_wake_until(wk, 8 + i, 1, 1)) {
			failed = word_fail(why, n, "wake of word %u", i);
			break;
		}
		pthread_join(s[i].t, NULL);
		s[i].t = 0;
		if (atomic_load(&s[i].ret) != 0)
			failed = word_fail(why, n, "sleeper %u returned %d", i,
					   atomic_load(&s[i].ret));
		for (j = i + 1; j < WORD_WAITERS && !failed; j++)
			if (atomic_load(&s[j].done))
				failed = word_fail(why, n, "the wake of word %u ended "
						   "sleeper %u too", i, j);
	}
	/* On a failure, let the others go. */
	for (i = 0; i < WORD_WAITERS; i++) {
		if (!s[i].t)
			continue;
		atomic_store(word_at(wk, 8 + i), 1);
		knitk_word_wake(wk->ep, (const uint32_t *)word_at(wk, 8 + i), UINT_MAX);
		pthread_join(s[i].t, NULL);
	}
	return failed;
}

/* Three sleepers on one word: a wake of 2 wakes at most 2, all 3 in the end. */
static int word_case_wake_counts(struct word_knot *wk, char *why, size_t n)
{
	struct word_sleeper s[3];
	unsigned int i;
	int failed = 0;

	atomic_store(word_at(wk, 2), 0);
	for (i = 0; i < 3; i++) {
		s[i] = (struct word_sleeper){ .wk = wk, .word = 2 };
		if (pthread_create(&s[i].t, NULL, word_sleeper_main, &s[i]))
			return word_fail(why, n, "pthread_create");
	}
	if (word_wake_until(wk, 2, 2, 3))
		failed = word_fail(why, n, "a wake of 2 woke more, or too many in all");
	if (failed) {
		atomic_store(word_at(wk, 2), 1);
		knitk_word_wake(wk->ep, (const uint32_t *)word_at(wk, 2), UINT_MAX);
	}
	for (i = 0; i < 3; i++) {
		pthread_join(s[i].t, NULL);
		if (!failed && atomic_load(&s[i].ret) != 0)
			failed = word_fail(why, n, "sleeper %u returned %d", i,
					   atomic_load(&s[i].ret));
	}
	return failed;
}

#define WORD_ROUNDS	4000

struct word_pong {
	struct word_knot *wk;
	unsigned int parity;
	int err;
};

/*
 * One of two threads that hand a count back and forth through word 5: it
 * moves the count on when it is of its parity, else sleeps until it is.
 * A lost wake leaves both asleep.
 */
static void *word_pong_main(void *arg)
{
	struct word_pong *p = arg;
	_Atomic uint32_t *w = word_at(p->wk, 5);
	uint32_t c;
	int r;

	while ((c = atomic_load(w)) < WORD_ROUNDS) {
		if (c % 2 != p->parity) {
			r = knitk_word_wait(p->wk->ep, (const uint32_t *)w, c,
					    KNITK_WAIT_FOREVER);
			if (r && r != -EAGAIN) {
				p->err = r;
				break;
			}
			continue;
		}
		atomic_store(w, c + 1);
		r = knitk_word_wake(p->wk->ep, (const uint32_t *)w, 1);
		if (r < 0 || r > 1) {
			p->err = r < 0 ? r : -EPROTO;
			break;
		}
	}
	/* Let the other one out, whatever happened. */
	atomic_store(w, WORD_ROUNDS + 1);
	knitk_word_wake(p->wk->ep, (const uint32_t *)w, UINT_MAX);
	return NULL;
}

/* Many hand-offs through one word: every wake lands, none is lost. */
static int word_case_ping_pong(struct word_knot *wk, char *why, size_t n)
{
	struct word_pong p[2] = { { wk, 0, 0 }, { wk, 1, 0 } };
	pthread_t t[2];
	unsigned int i;

	atomic_store(word_at(wk, 5), 0);
	for (i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, word_pong_main, &p[i]))
			return word_fail(why, n, "pthread_create");
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	WORD_EXPECT(!p[0].err && !p[1].err, "errors %d %d", p[0].err, p[1].err);
	WORD_EXPECT(atomic_load(word_at(wk, 5)) == WORD_ROUNDS + 1, "count %u",
		    (unsigned int)atomic_load(word_at(wk, 5)));
	return 0;
}

/*
 * Another process attached with the inherited fd sleeps on a word and is
 * woken through this endpoint; then it stores a word and wakes us.
 */
static int word_case_across_processes(struct word_knot *wk, char *why, size_t n)
{
	int fd = knitk_endpoint_fd(wk->ep), st = 0, r;
	pid_t pid;

	atomic_store(word_at(wk, 3), 0);
	atomic_store(word_at(wk, 4), 0);
	pid = fork();
	if (pid < 0)
		return word_fail(why, n, "fork");
	if (!pid) {
		struct knitk_endpoint *ep;
		struct word_knot c;
		void *base;

		if (knitk_endpoint_attach(fd, 0, &ep))
			_exit(10);
		c = *wk;
		c.ep = ep;
		if (knitk_endpoint_base(ep, &base))
			_exit(11);
		c.base = base;
		r = knitk_word_wait(ep, (const uint32_t *)word_at(&c, 3), 0,
				    KNITK_WAIT_FOREVER);
		if (r)
			_exit(12);
		/* Store, then wake: we are woken, or we see the store. */
		atomic_store(word_at(&c, 4), 1);
		_exit(knitk_word_wake(ep, (const uint32_t *)word_at(&c, 4), 1) < 0 ? 13 : 0);
	}
	/* Wake word 3 until the child slept there. */
	if (word_wake_until(wk, 3, 1, 1))
		return word_fail(why, n, "wake of the child");
	r = knitk_word_wait(wk->ep, (const uint32_t *)word_at(wk, 4), 0, KNITK_WAIT_FOREVER);
	if (waitpid(pid, &st, 0) != pid)
		return word_fail(why, n, "waitpid");
	WORD_EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	/* Woken, or the child's store came first. */
	WORD_EXPECT(r == 0 || r == -EAGAIN, "our wait: %d", r);
	WORD_EXPECT(atomic_load(word_at(wk, 4)) == 1, "the child's store");
	return 0;
}

#endif /* KNITK_WORD_CASES_H */

// SPDX-License-Identifier: GPL-2.0
/*
 * Huge pages on the futex backend: a knot of KNITK_HUGE_MIN_BYTES or more
 * asks for them and falls back to 4 KiB pages without an error when the
 * system has none (knitk_endpoint_pages says which); KNITK_KNOT_NO_HUGE
 * opts out; a forked process attaches with the inherited fd whatever
 * backs the knot.  As root, a hugetlbfs knot end to end with huge pages
 * reserved for the test in /proc/sys/vm/nr_hugepages (restored after);
 * skipped, and said so, where they cannot be reserved.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>
#include <knitk.h>

#include "knot_bytes.h"
#include "tap.h"

#define MIB		(1ULL << 20)
#define NR_HUGEPAGES	"/proc/sys/vm/nr_hugepages"

/* 2 workers, 1 submitter: 4 mailboxes of 2 MiB of arena, about 8 MiB. */
static const struct knitk_geometry big = {
	.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
	.inline_bytes = 64, .arena_bytes = 2 * MIB,
};

/* 2 mailboxes of 64 KiB of arena: below KNITK_HUGE_MIN_BYTES. */
static const struct knitk_geometry small = {
	.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
	.inline_bytes = 64, .arena_bytes = 64 << 10,
};

/* The value of "@key: N" in /proc/meminfo, or -1. */
static long meminfo(const char *key)
{
	char line[128];
	size_t n = strlen(key);
	long v = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static struct knitk_pages pages_of(struct knitk_endpoint *k)
{
	struct knitk_pages p = { .size = sizeof(p) };

	CHECK_EQ(knitk_endpoint_pages(k, &p), 0);
	return p;
}

/*
 * Every byte written through @a reads back through @b, and the other way:
 * the two endpoints map the same memory.
 */
static void same_bytes(struct knitk_endpoint *a, struct knitk_endpoint *b)
{
	size_t la = 0, lb = 0;
	unsigned char *pa = knot_bytes_of(a, &la), *pb = knot_bytes_of(b, &lb);

	REQUIRE(pa && pb && la == lb && pa != pb);
	knot_bytes_fill(pa, la, 1);
	CHECK_EQ(knot_bytes_wrong(pb, lb, 1), 0);
	knot_bytes_fill(pb, lb, 2);
	CHECK_EQ(knot_bytes_wrong(pa, la, 2), 0);
}

/*
 * A forked child attaches with the inherited fd, checks what the parent
 * wrote, reports its pages' flags and page size in its exit status (0:
 * as @want) and writes its own pattern back.
 */
static void forked_attach(struct knitk_endpoint *k, const struct knitk_pages *want)
{
	size_t len = 0;
	unsigned char *d = knot_bytes_of(k, &len);
	int fd = knitk_endpoint_fd(k), status;
	pid_t pid;

	REQUIRE(d && fd >= 0);
	knot_bytes_fill(d, len, 3);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct knitk_endpoint *c;
		struct knitk_pages p = { .size = sizeof(p) };
		unsigned char *cd;
		size_t clen = 0;

		if (knitk_endpoint_attach(fd, 0, &c))
			_exit(10);
		if (knitk_endpoint_pages(c, &p))
			_exit(11);
		if ((p.flags & KNITK_PAGES_HUGETLB) != (want->flags & KNITK_PAGES_HUGETLB) ||
		    p.page_bytes != want->page_bytes || p.map_bytes != want->map_bytes)
			_exit(12);
		cd = knot_bytes_of(c, &clen);
		if (!cd || clen != len)
			_exit(13);
		if (knot_bytes_wrong(cd, clen, 3))
			_exit(14);
		knot_bytes_fill(cd, clen, 4);
		knitk_endpoint_destroy(c);
		_exit(0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	CHECK_EQ(knot_bytes_wrong(d, len, 4), 0);
}

/* Create a futex knot, attach a second endpoint, check both and a fork. */
static void end_to_end(const struct knitk_geometry *g, unsigned int flags,
		       struct knitk_pages *out)
{
	struct knitk_endpoint *k, *a;
	struct knitk_pages p, pa;

	REQUIRE(knitk_endpoint_create(g, KNITK_KNOT_FUTEX | flags, &k) == 0);
	p = pages_of(k);
	*out = p;
	if (knitk_endpoint_attach(knitk_endpoint_fd(k), 0, &a)) {
		CHECK(0);
		knitk_endpoint_destroy(k);
		return;
	}
	pa = pages_of(a);
	CHECK_EQ(pa.flags & KNITK_PAGES_HUGETLB, p.flags & KNITK_PAGES_HUGETLB);
	CHECK_EQ(pa.page_bytes, p.page_bytes);
	CHECK_EQ(pa.map_bytes, p.map_bytes);
	same_bytes(k, a);
	forked_attach(k, &p);
	/* Every byte touched: as many huge pages as it will have. */
	*out = pages_of(k);
	knitk_endpoint_destroy(a);
	knitk_endpoint_destroy(k);
}

static void small_knot_base_pages(void)
{
	struct knitk_layout l;
	struct knitk_pages p;

	REQUIRE(knitk_layout_compute(&small, &l) == 0);
	REQUIRE(l.size < KNITK_HUGE_MIN_BYTES);
	end_to_end(&small, 0, &p);
	CHECK_EQ(p.flags, 0);
	CHECK_EQ(p.page_bytes, 4096);
	CHECK_EQ(p.map_bytes, l.size);
	CHECK_EQ(p.huge_bytes, 0);
}

static void no_hugetlb_falls_back(void)
{
	struct knitk_layout l;
	struct knitk_pages p;

	if (meminfo("HugePages_Free") > 0)
		SKIP("hugetlb pages are free here: no fallback to see");
	REQUIRE(knitk_layout_compute(&big, &l) == 0);
	REQUIRE(l.size >= KNITK_HUGE_MIN_BYTES);
	end_to_end(&big, 0, &p);
	CHECK(!(p.flags & KNITK_PAGES_HUGETLB));
	CHECK_EQ(p.page_bytes, 4096);
	CHECK_EQ(p.map_bytes, l.size);
	/* Transparent ones only, as many as shmem_enabled gave. */
	CHECK(p.huge_bytes <= p.map_bytes);
	CHECK_EQ(p.huge_bytes % KNITK_HUGE_MIN_BYTES, 0);
	printf("# fallback: flags %#x, %llu of %llu bytes in transparent huge pages\n",
	       p.flags, (unsigned long long)p.huge_bytes,
	       (unsigned long long)p.map_bytes);
}

static void no_huge_flag(void)
{
	struct knitk_geometry g = big, rec;
	struct knitk_endpoint *k;
	struct knitk_pages p;

	end_to_end(&big, KNITK_KNOT_NO_HUGE, &p);
	CHECK_EQ(p.flags, 0);
	CHECK_EQ(p.page_bytes, 4096);
	CHECK_EQ(p.huge_bytes, 0);
	/* The knot records the opt-out, so every endpoint follows it. */
	REQUIRE(knitk_endpoint_create(&big, KNITK_KNOT_FUTEX | KNITK_KNOT_NO_HUGE,
				      &k) == 0);
	CHECK_EQ(knitk_endpoint_layout(k, NULL, &rec), 0);
	CHECK(rec.flags & KNITK_GEOM_NO_HUGE);
	knitk_endpoint_destroy(k);
	/* The same through the geometry's own flag. */
	g.flags = KNITK_GEOM_NO_HUGE;
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	p = pages_of(k);
	CHECK_EQ(p.flags, 0);
	knitk_endpoint_destroy(k);
	/* Unknown flags are still refused, in both places. */
	CHECK_EQ(knitk_endpoint_create(&big, KNITK_KNOT_FUTEX | (1U << 4), &k), -EINVAL);
	g.flags = 1U << 2;
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k), -EINVAL);
	CHECK_EQ(knitk_endpoint_pages(NULL, &p), -EINVAL);
}

static long saved_nr = -1;

static int write_nr_hugepages(long nr)
{
	FILE *f = fopen(NR_HUGEPAGES, "we");
	int ok;

	if (!f)
		return -1;
	ok = fprintf(f, "%ld\n", nr) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static void restore_nr_hugepages(void)
{
	if (saved_nr >= 0)
		write_nr_hugepages(saved_nr);
	saved_nr = -1;
}

static void on_signal(int sig)
{
	restore_nr_hugepages();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void hugetlb_end_to_end(void)
{
	long huge_kb = meminfo("Hugepagesize"), total = meminfo("HugePages_Total");
	long need, free_before;
	struct knitk_layout l;
	struct knitk_pages p;
	uint64_t hp;

	if (huge_kb <= 0 || total < 0)
		SKIP("no hugetlb in this kernel");
	if (geteuid())
		SKIP("not root: cannot reserve hugetlb pages");
	REQUIRE(knitk_layout_compute(&big, &l) == 0);
	hp = (uint64_t)huge_kb << 10;
	need = (long)((l.size + hp - 1) / hp);
	free_before = meminfo("HugePages_Free");
	saved_nr = total;
	atexit(restore_nr_hugepages);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (write_nr_hugepages(total + need) ||
	    meminfo("HugePages_Free") < free_before + need) {
		restore_nr_hugepages();
		SKIP("could not reserve hugetlb pages (nr_hugepages)");
	}
	end_to_end(&big, 0, &p);
	CHECK(p.flags & KNITK_PAGES_HUGETLB);
	CHECK_EQ(p.page_bytes, hp);
	CHECK_EQ(p.map_bytes, (l.size + hp - 1) / hp * hp);
	CHECK_EQ(p.huge_bytes, p.map_bytes);
	/* The opt-out holds with huge pages to be had. */
	end_to_end(&big, KNITK_KNOT_NO_HUGE, &p);
	CHECK_EQ(p.flags, 0);
	CHECK_EQ(p.page_bytes, 4096);
	restore_nr_hugepages();
	CHECK_EQ(meminfo("HugePages_Total"), total);
}

int main(void)
{
	TEST(small_knot_base_pages);
	TEST(no_hugetlb_falls_back);
	TEST(no_huge_flag);
	TEST(hugetlb_end_to_end);
	return tap_exit();
}

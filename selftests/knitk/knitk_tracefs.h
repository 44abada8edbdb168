/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The module's tracepoints read back through tracefs: a trace instance of
 * the test's own (a buffer nobody else writes to or clears), its knitk
 * events enabled, and its "trace" file parsed into events whose fields are
 * matched as "key=value" tokens.
 *
 * tracefs is looked for at /sys/kernel/tracing (mounted there if it is
 * not), then under debugfs; a kernel without it makes the test skip.
 */
#ifndef KNITK_TRACEFS_H
#define KNITK_TRACEFS_H

#include <stdarg.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "knitk_harness.h"
#include "knitk_test.h"

#define TRACEFS		"/sys/kernel/tracing"
#define TRACEFS_DEBUG	"/sys/kernel/debug/tracing"

static inline bool tracefs_at(const char *dir)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/instances", dir);
	return access(path, F_OK) == 0;
}

/* Where tracefs is, mounting it if need be; NULL when the kernel has none. */
static inline const char *tracefs_find(void)
{
	if (tracefs_at(TRACEFS))
		return TRACEFS;
	/* The directory exists only in a kernel with tracefs. */
	if (access(TRACEFS, F_OK) == 0 &&
	    mount("nodev", TRACEFS, "tracefs", 0, NULL) == 0 &&
	    tracefs_at(TRACEFS))
		return TRACEFS;
	if (tracefs_at(TRACEFS_DEBUG))
		return TRACEFS_DEBUG;
	return NULL;
}

static inline int tracefs_write(const char *dir, const char *file,
				const char *val)
{
	char path[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : (n < 0 ? -errno : -EIO);
}

/* One event of the trace file. */
struct tev {
	char name[40];		/* "knitk_notify" */
	pid_t pid;		/* the task it was recorded in */
	char args[320];		/* "knot=1 doorbell=0 result=woken ..." */
};

struct trace {
	struct tev *ev;
	size_t n;
};

/*
 * "<comm>-<pid> [<cpu>] <flags> <ts>: <name>: <args>"; false for any
 * other line (the header's comments).
 */
static inline bool tev_parse(const char *line, struct tev *e)
{
	const char *cpu = strstr(line, " [");
	const char *name = strstr(line, ": knitk_");
	const char *dash, *args;
	size_t len;

	if (!cpu || !name || line[0] == '#')
		return false;
	for (dash = cpu; dash > line && *dash != '-'; dash--)
		;
	e->pid = atoi(dash + 1);
	name += 2;
	args = strstr(name, ": ");
	if (!args)
		return false;
	len = (size_t)(args - name);
	if (len >= sizeof(e->name))
		return false;
	memcpy(e->name, name, len);
	e->name[len] = '\0';
	snprintf(e->args, sizeof(e->args), "%s", args + 2);
	return true;
}

/* The knitk events of instance @inst, oldest first; 0 or a negative errno. */
static inline int trace_read(const char *inst, struct trace *t)
{
	char path[512], *buf = NULL, *line, *save;
	size_t len = 0, cap = 0;
	ssize_t r;
	int fd;

	t->ev = NULL;
	t->n = 0;
	snprintf(path, sizeof(path), "%s/trace", inst);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
			if (!buf) {
				close(fd);
				return -ENOMEM;
			}
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (r < 0) {
		free(buf);
		return -EIO;
	}
	buf[len] = '\0';
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct tev e, *grown;

		if (!tev_parse(line, &e))
			continue;
		grown = realloc(t->ev, (t->n + 1) * sizeof(*t->ev));
		if (!grown) {
			free(buf);
			return -ENOMEM;
		}
		t->ev = grown;
		t->ev[t->n++] = e;
	}
	free(buf);
	return 0;
}

static inline void trace_free(struct trace *t)
{
	free(t->ev);
	t->ev = NULL;
	t->n = 0;
}

/* Is "key=value" one of the space-separated tokens of @args? */
static inline bool tev_has(const char *args, const char *tok, size_t len)
{
	const char *p = args;

	while (*p) {
		const char *end = strchr(p, ' ');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n == len && !strncmp(p, tok, len))
			return true;
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

/* Does @e have name @name and every "key=value" token of @want? */
static inline bool tev_match(const struct tev *e, const char *name,
			     const char *want)
{
	const char *p = want;

	if (strcmp(e->name, name))
		return false;
	while (*p) {
		const char *end = strchr(p, ' ');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n && !tev_has(e->args, p, n))
			return false;
		if (!end)
			break;
		p = end + 1;
	}
	return true;
}

/* The value of field @key of @e, or @dflt. */
static inline long long tev_num(const struct tev *e, const char *key,
				long long dflt)
{
	char pat[48];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(e->args, pat);
	if (p)
		return strtoll(p + strlen(pat), NULL, 0);
	snprintf(pat, sizeof(pat), "%s=", key);
	return strncmp(e->args, pat, strlen(pat)) ? dflt :
	       strtoll(e->args + strlen(pat), NULL, 0);
}

/* The events named @name that carry every token of printf(@fmt, ...). */
static inline size_t __attribute__((format(printf, 3, 4)))
trace_count(const struct trace *t, const char *name, const char *fmt, ...)
{
	char want[256];
	size_t i, n = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	for (i = 0; i < t->n; i++)
		n += tev_match(&t->ev[i], name, want);
	return n;
}

/* The first such event, or NULL. */
static inline const struct tev * __attribute__((format(printf, 3, 4)))
trace_find(const struct trace *t, const char *name, const char *fmt, ...)
{
	char want[256];
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	for (i = 0; i < t->n; i++)
		if (tev_match(&t->ev[i], name, want))
			return &t->ev[i];
	return NULL;
}

/* Every knitk event, as comments: a failed test shows what it saw. */
static inline void trace_dump(const struct trace *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		fprintf(stderr, "#   %d %s: %s\n", t->ev[i].pid,
			t->ev[i].name, t->ev[i].args);
}

/*
 * The test's own trace instance, "<tag>_<pid>" under tracefs, written to
 * @inst (@size bytes), with a @buffer_kb buffer (NULL: the default) and
 * the knitk events on.  Skips without tracefs; fails when the module has
 * no tracepoints.
 */
static inline void trace_instance_open(struct __test_metadata *_metadata,
				       char *inst, size_t size,
				       const char *tag, const char *buffer_kb)
{
	char path[512];
	const char *fs = tracefs_find();

	if (!fs)
		SKIP(_exit(255), "%s: no tracefs (a kernel without CONFIG_TRACING)",
		     _metadata->name);
	snprintf(inst, size, "%s/instances/%s_%d", fs, tag, getpid());
	ASSERT_EQ(0, mkdir(inst, 0700)) TH_LOG("mkdir %s: %s", inst,
					       strerror(errno));
	snprintf(path, sizeof(path), "%s/events/knitk", inst);
	ASSERT_EQ(0, access(path, F_OK))
		TH_LOG("tracefs has no knitk events: the module lacks its tracepoints");
	if (buffer_kb)
		ASSERT_EQ(0, tracefs_write(inst, "buffer_size_kb", buffer_kb));
	ASSERT_EQ(0, tracefs_write(inst, "events/knitk/enable", "1"));
}

/* The instance of trace_instance_open() gone (@inst empty: none). */
static inline void trace_instance_close(const char *inst)
{
	if (inst[0]) {
		tracefs_write(inst, "events/knitk/enable", "0");
		rmdir(inst);
	}
}

/* Read the instance's events into @t, anew. */
static inline void trace_collect(struct __test_metadata *_metadata,
				 const char *inst, struct trace *t)
{
	trace_free(t);
	ASSERT_EQ(0, trace_read(inst, t));
}

/* A failed test prints the events it saw. */
static inline void trace_dump_if_failed(struct __test_metadata *_metadata,
					const struct trace *t)
{
	if (!_metadata->passed) {
		fprintf(stderr, "# knitk events of %s:\n", _metadata->name);
		trace_dump(t);
	}
}

#endif /* KNITK_TRACEFS_H */

// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/knitk used from a container, as one is deployed.  A "container" here
 * is a process that became another user (a subuid of a rootless runtime)
 * and unshared user, mount and pid namespaces; the server, root like
 * newuidmap(1), writes its uid_map and gid_map; the container's pid 1 runs
 * the client:
 *  - fd_passed_client_works: the client, /dev covered by an empty tmpfs,
 *    gets an attached endpoint over a unix socket (SCM_RIGHTS), joins
 *    worker 0 of the server's knot and serves lane round trips, each side
 *    woken by the other's doorbell at least once;
 *  - bind_mounted_node_own_knot: the node bind-mounted into the
 *    container's /dev, the client creates its own knot and runs the same
 *    exchange with its child; the container's root is no CAP_IPC_LOCK of
 *    the host (RLIMIT_MEMLOCK applies);
 *  - no_fd_no_permission_reaches_nothing: a node 0600 root, the client
 *    an unprivileged uid: EACCES on open (bind-mounted or not), EPERM on
 *    mknod and chmod, EACCES on the server's /proc/<pid>/fd, ESRCH and
 *    ENOENT from its own pid namespace;
 *  - bare_endpoint_attaches_nothing: handed an unattached endpoint only,
 *    the client's ATTACH gives exactly -EBADF (no fd), -EINVAL (not a
 *    knitk fd) or -ENOTCONN (not attached), as the uapi says;
 *  - memcg_*: a knot's pages are charged to its creator's memory cgroup
 *    (memory.current grows by the knot's size and drops after the close),
 *    and memory.max below the knot's size fails CREATE with -ENOMEM,
 *    without OOM, leaving nothing charged or live.  Without the memory
 *    controller (CONFIG_MEMCG) these skip.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_live.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open	434
#endif

#define CTR_UID		100000	/* a rootless runtime's subuid range */
#define CTR_RANGE	65536
#define NOBODY		65534
#define ROUNDS		64
#define HOST		KNITK_DOORBELL_HOST
#define CTR_DIR		"/tmp/knitk-ctr"
#define NODE_0600	"/tmp/knitk-0600"
#define CG_DIR		"/tmp/knitk-cg"
#define USERNS_SYSCTL	"/proc/sys/kernel/unprivileged_userns_clone"

/* Exit codes of the container's set-up, apart from a body's own. */
enum {
	CTR_ESETID = 100, CTR_EUNSHARE, CTR_ESYNC, CTR_EFORK, CTR_EWAIT,
	CTR_EPID1, CTR_EUID, CTR_EPRIVATE,
};

/* The runtime's maps: root of the container is @uid..@uid+@n-1 outside. */
static int write_maps(pid_t pid, uid_t uid, unsigned int n)
{
	char path[64], map[64];
	int ret;

	snprintf(map, sizeof(map), "0 %u %u\n", uid, n);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	ret = knitk_write_file(path, map);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	return knitk_write_file(path, map);
}

/* Another user may create a user namespace (Debian's sysctl): 0 or -errno. */
static int allow_userns(char *saved)
{
	char buf[8];

	*saved = 0;
	if (knitk_read_file(USERNS_SYSCTL, buf, sizeof(buf)) == -ENOENT)
		return 0;
	*saved = buf[0];
	if (*saved == '1')
		return 0;
	return knitk_write_file(USERNS_SYSCTL, "1");
}

static void restore_userns(char saved)
{
	if (saved == '0')
		knitk_write_file(USERNS_SYSCTL, "0");
}

/*
 * Runs body(arg) as pid 1 of a container of outer uid/gid @uid (@n ids
 * mapped from 0), keeping only fd @keep (or none, -1) of ours; returns
 * its exit status (a set-up failure is one of CTR_E*), or -1.
 */
static int in_container(uid_t uid, unsigned int n, int keep,
			int (*body)(void *), void *arg)
{
	int go[2], ready[2], st, fd;
	char userns;
	pid_t pid;

	if (allow_userns(&userns) || pipe(go) || pipe(ready))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		char c;
		pid_t init;

		close(go[1]);
		close(ready[0]);
		for (fd = 3; fd < 1024; fd++)
			if (fd != keep && fd != go[0] && fd != ready[1])
				close(fd);
		/* An unprivileged user, as a rootless runtime runs. */
		if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
		    setresuid(uid, uid, uid))
			_exit(CTR_ESETID);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID))
			_exit(CTR_EUNSHARE);
		/* The server writes the maps (newuidmap's part). */
		if (write(ready[1], "u", 1) != 1 || read(go[0], &c, 1) != 1 ||
		    c != 'g')
			_exit(CTR_ESYNC);
		close(go[0]);
		close(ready[1]);
		init = fork();
		if (init < 0)
			_exit(CTR_EFORK);
		if (!init) {
			if (getpid() != 1)
				_exit(CTR_EPID1);
			if (getuid() != 0 || getgid() != 0)
				_exit(CTR_EUID);
			/* Nothing the container mounts reaches the host. */
			if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
				_exit(CTR_EPRIVATE);
			_exit(body(arg));
		}
		if (waitpid(init, &st, 0) != init)
			_exit(CTR_EWAIT);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	close(go[0]);
	close(ready[1]);
	st = -1;
	{
		char c;

		if (read(ready[0], &c, 1) == 1 && !write_maps(pid, uid, n) &&
		    write(go[1], "g", 1) == 1)
			st = 0;
	}
	close(go[1]);
	close(ready[0]);
	if (st) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		restore_userns(userns);
		return -1;
	}
	if (waitpid(pid, &st, 0) != pid)
		st = -1;
	else
		st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	restore_userns(userns);
	return st;
}

/* Lane L's inline payload in mailbox @s of @k. */
static __u64 *lane_word(const struct knot *k, struct knitk_sector *s,
			unsigned int L)
{
	return (__u64 *)((char *)s + k->layout.lane_off +
			 (__u64)L * k->layout.lane_stride +
			 KNITK_LANE_HEADER_BYTES);
}

static bool lane_pending(struct knitk_sector *s, unsigned int L)
{
	return ((knitk_load64(&s->pub) ^ knitk_load64(&s->ack)) >> L) & 1;
}

/*
 * Until lane L of @s is pending, sleeping on doorbell @d of endpoint @fd;
 * *@woken counts the waits a ring ended.  0 or a negative errno.
 */
static int wait_lane(const struct knot *k, int fd, unsigned int d,
		     struct knitk_sector *s, unsigned int L, int *woken)
{
	struct knitk_doorbell *db = knot_doorbell(k, d);
	__u64 deadline = knitk_now_ns() + KNITK_LONG_NS;
	int ret;

	for (;;) {
		__u32 seq = knitk_doorbell_seq(db);

		knitk_doorbell_sleeping(db, 1);
		if (lane_pending(s, L)) {
			knitk_doorbell_sleeping(db, 0);
			return 0;
		}
		ret = knitk_wait(fd, seq, deadline);
		if (!ret)
			(*woken)++;
		else if (ret != -EAGAIN)
			return ret;
	}
}

static __u64 request_value(unsigned int i)
{
	return 0x6b6e69740000ULL + i;
}

static __u64 reply_value(__u64 req)
{
	return req * 3 + 1;
}

/*
 * The host's side on @k (its fd joined as the host): ROUNDS requests to
 * worker 0, each answer checked.  Round 0 waits for the worker to be
 * asleep before its ring and asserts the wake was delivered.  0 or a
 * positive code.
 */
static int host_rounds(const struct knot *k, int *woken)
{
	struct knitk_sector *req = knot_mailbox(k, 0);
	struct knitk_sector *ret_mb = knot_mailbox(k, k->layout.nr_request);
	unsigned int i;
	__u64 rung;

	*woken = 0;
	for (i = 0; i < ROUNDS; i++) {
		unsigned int L = i % KNITK_LANES;

		if (!i && knitk_wait_asleep(k->fd, 0, 1))
			return 1;
		*lane_word(k, req, L) = request_value(i);
		knot_lane_publish(req, L);
		if (knitk_notify(k->fd, 1ULL << 0, &rung))
			return 2;
		if (!i && rung != 1ULL << 0)
			return 3;
		if (wait_lane(k, k->fd, HOST, ret_mb, L, woken))
			return 4;
		if (*lane_word(k, ret_mb, L) != reply_value(request_value(i)))
			return 5;
		knot_lane_ack(&ret_mb->ack, L);
	}
	return *woken ? 0 : 6;
}

/*
 * Worker 0's side: @ep, attached and not joined, joins and maps, serves
 * ROUNDS requests.  Round 0 rings the host only once it is asleep, and the
 * ring must be delivered.  0 or a positive code (from 10).
 */
static int worker_rounds(int ep)
{
	struct knitk_sector *req, *ret_mb;
	struct knot k = { .fd = ep };
	unsigned int i;
	int woken = 0;
	__u64 rung;

	/* Attached already: a second ATTACH is refused. */
	if (knitk_attach(ep, ep, NULL) != -EBUSY)
		return 10;
	if (knitk_join(ep, KNITK_ROLE_WORKER, 0, NULL))
		return 11;
	/* The layout from the control page, as an attacher reads it. */
	{
		const struct knitk_control *c;

		c = mmap(NULL, KNITK_PAGE_BYTES, PROT_READ, MAP_SHARED, ep, 0);
		if (c == MAP_FAILED || c->magic != KNITK_MAGIC)
			return 12;
		k.layout = c->layout;
		munmap((void *)c, KNITK_PAGE_BYTES);
	}
	if (knot_map(&k))
		return 13;
	if (!(knitk_load64(&k.ctl->live) & 1))
		return 14;
	req = knot_mailbox(&k, 0);
	ret_mb = knot_mailbox(&k, k.layout.nr_request);
	for (i = 0; i < ROUNDS; i++) {
		unsigned int L = i % KNITK_LANES;
		__u64 v;

		if (wait_lane(&k, ep, 0, req, L, &woken))
			return 15;
		v = *lane_word(&k, req, L);
		if (v != request_value(i))
			return 16;
		knot_lane_ack(&req->ack, L);
		if (!i && knitk_wait_asleep(ep, HOST, 1))
			return 17;
		*lane_word(&k, ret_mb, L) = reply_value(v);
		knot_lane_publish(ret_mb, L);
		if (knitk_notify(ep, 1ULL << HOST, &rung))
			return 18;
		if (!i && rung != 1ULL << HOST)
			return 19;
	}
	knot_unmap(&k);
	return woken ? 0 : 20;
}

FIXTURE(ctr) {
	struct knot k;		/* the server's knot, joined as the host */
	int sv[2];		/* server's end, container's end */
};

FIXTURE_SETUP(ctr)
{
	struct knitk_geometry g;

	self->k.fd = -1;
	self->sv[0] = -1;
	self->sv[1] = -1;
	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, getuid());
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				self->sv));
	mkdir(CTR_DIR, 0755);
}

FIXTURE_TEARDOWN(ctr)
{
	if (self->sv[0] >= 0)
		close(self->sv[0]);
	if (self->sv[1] >= 0)
		close(self->sv[1]);
	knot_close(&self->k);
	unlink(NODE_0600);
}

/*
 * /dev of the container: an empty tmpfs, with the host's node bind-mounted
 * on /dev/knitk when @node is set (as a runtime's --device does).
 */
static int container_dev(const char *node)
{
	int fd;

	if (node) {
		/* Keep the node reachable before /dev is covered. */
		if (mount("tmpfs", CTR_DIR, "tmpfs", 0, "mode=0755"))
			return 30;
		fd = open(CTR_DIR "/knitk", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0)
			return 31;
		close(fd);
		if (mount(node, CTR_DIR "/knitk", NULL, MS_BIND, NULL))
			return 32;
	}
	if (mount("tmpfs", "/dev", "tmpfs", 0, "mode=0755"))
		return 33;
	if (!node)
		return access(KNITK_DEV, F_OK) && errno == ENOENT ? 0 : 34;
	fd = open(KNITK_DEV, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return 35;
	close(fd);
	if (mount(CTR_DIR "/knitk", KNITK_DEV, NULL, MS_BIND, NULL))
		return 36;
	return 0;
}

/* The client of fd_passed_client_works, pid 1 of its container. */
static int fd_client(void *arg)
{
	int sock = *(int *)arg, ep, ret;

	ret = container_dev(NULL);
	if (ret)
		return ret;
	ep = knitk_recv_fd(sock);
	if (ep < 0)
		return 40;
	ret = worker_rounds(ep);
	close(ep);
	return ret;
}

TEST_F(ctr, fd_passed_client_works)
{
	int ep, woken, st;
	pid_t pid;

	/* An endpoint attached to the knot, not joined: the client joins. */
	ep = knitk_open();
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, knitk_attach(ep, self->k.fd, NULL));
	ASSERT_EQ(0, knitk_send_fd(self->sv[0], ep));
	close(ep);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(self->sv[0]);
		_exit(in_container(CTR_UID, CTR_RANGE, self->sv[1], fd_client,
				   &self->sv[1]) & 0xff);
	}
	EXPECT_EQ(0, host_rounds(&self->k, &woken));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	TH_LOG("host woken %d times in %d rounds", woken, ROUNDS);
	/* The client's exit ended worker 0's role. */
	while (knitk_load64(&self->k.ctl->live) & 1)
		usleep(1000);
	EXPECT_EQ(1, knitk_load64(&self->k.ctl->dead) & 1);
}

struct own_arg {
	dev_t rdev;
};

/* The client of bind_mounted_node_own_knot: its own knot, its own worker. */
static int own_client(void *arg)
{
	struct own_arg *a = arg;
	struct rlimit none = { 0, 0 };
	struct knitk_geometry g;
	struct stat st;
	int ret, woken, status;
	struct knot k;
	pid_t pid;

	ret = container_dev("/dev/knitk");
	if (ret)
		return ret;
	if (stat(KNITK_DEV, &st) || !S_ISCHR(st.st_mode) || st.st_rdev != a->rdev)
		return 41;
	knitk_geom_small(&g);
	if (knot_make(&k, &g))
		return 42;
	if (knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL))
		return 43;
	pid = fork();
	if (pid < 0)
		return 44;
	if (!pid) {
		int ep = knitk_open();

		if (ep < 0 || knitk_attach(ep, k.fd, NULL))
			_exit(45);
		_exit(worker_rounds(ep));
	}
	ret = host_rounds(&k, &woken);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 46;
	if (ret)
		return 50 + ret;
	if (WEXITSTATUS(status))
		return WEXITSTATUS(status);
	knot_close(&k);
	/* Root of the container has no CAP_IPC_LOCK of the host. */
	if (setrlimit(RLIMIT_MEMLOCK, &none))
		return 47;
	k.fd = knitk_open();
	if (k.fd < 0)
		return 48;
	ret = knitk_create(k.fd, &g, NULL);
	close(k.fd);
	return ret == -ENOMEM ? 0 : 49;
}

TEST_F(ctr, bind_mounted_node_own_knot)
{
	struct own_arg a;
	struct stat st;

	ASSERT_EQ(0, stat(KNITK_DEV, &st));
	/* A node others may open (the module's default mode, 0666). */
	ASSERT_EQ(0666, st.st_mode & 0777);
	a.rdev = st.st_rdev;
	EXPECT_EQ(0, in_container(CTR_UID, CTR_RANGE, -1, own_client, &a));
}

struct deny_arg {
	pid_t server;
	int server_fd;
	dev_t rdev;
};

/* The client of no_fd_no_permission_reaches_nothing. */
static int deny_client(void *arg)
{
	struct deny_arg *a = arg;
	char path[64];
	int fd, ret;

	/* The node as it is, 0600 root's. */
	fd = open(NODE_0600, O_RDWR | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return 60;
	/* Bind-mounted into the container: the same inode, the same answer. */
	ret = container_dev(NODE_0600);
	if (ret)
		return ret;
	fd = open(KNITK_DEV, O_RDWR | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return 61;
	/* The container's root owns neither the node nor the host's devices. */
	if (!chmod(KNITK_DEV, 0666) || errno != EPERM)
		return 62;
	if (!mknod("/dev/knitk-own", S_IFCHR | 0666, a->rdev) || errno != EPERM)
		return 63;
	/* The server's fds, through the host's /proc: another user's. */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", a->server, a->server_fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0 || errno != EACCES)
		return 64;
	/* Its own /proc and pid numbers: the server is not there at all. */
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL))
		return 65;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return 66;
	if (syscall(SYS_pidfd_open, a->server, 0) >= 0 || errno != ESRCH)
		return 67;
	return 0;
}

TEST_F(ctr, no_fd_no_permission_reaches_nothing)
{
	struct deny_arg a = { .server = getpid(), .server_fd = self->k.fd };
	struct stat st;

	ASSERT_EQ(0, stat(KNITK_DEV, &st));
	a.rdev = st.st_rdev;
	unlink(NODE_0600);
	ASSERT_EQ(0, mknod(NODE_0600, S_IFCHR | 0600, st.st_rdev));
	ASSERT_EQ(0, chmod(NODE_0600, 0600));
	ASSERT_EQ(0, stat(NODE_0600, &st));
	ASSERT_EQ(0u, st.st_uid);
	ASSERT_EQ(0600, st.st_mode & 07777);
	EXPECT_EQ(0, in_container(NOBODY, 1, -1, deny_client, &a));
	/* The knot is the server's still, and whole. */
	EXPECT_EQ(1ULL << HOST, knitk_load64(&self->k.ctl->live));
	EXPECT_EQ(0, knitk_load64(&self->k.ctl->dead));
}

/* The client of bare_endpoint_attaches_nothing. */
static int bare_client(void *arg)
{
	int sock = *(int *)arg, ep, n, ret;
	void *p;

	ep = knitk_recv_fd(sock);
	if (ep < 0)
		return 70;
	for (n = 0; n < 1024; n++) {
		int want;

		if (n == ep)
			want = -ENOTCONN;	/* knitk's, attached to nothing */
		else if (n == sock || n <= 2)
			want = fcntl(n, F_GETFD) < 0 ? -EBADF : -EINVAL;
		else
			want = -EBADF;		/* nothing open there */
		ret = knitk_attach(ep, n, NULL);
		if (ret != want) {
			printf("# attach of fd %d: %d, want %d\n", n, ret, want);
			return 71;
		}
	}
	if (knitk_join(ep, KNITK_ROLE_WORKER, 0, NULL) != -ENOTCONN ||
	    knitk_join(ep, KNITK_ROLE_HOST, 0, NULL) != -ENOTCONN ||
	    knitk_notify(ep, 1ULL << HOST, NULL) != -ENOTCONN ||
	    knitk_wait(ep, 0, 0) != -ENOTCONN)
		return 72;
	p = mmap(NULL, KNITK_PAGE_BYTES, PROT_READ, MAP_SHARED, ep, 0);
	if (p != MAP_FAILED || errno != ENOTCONN)
		return 73;
	return 0;
}

TEST_F(ctr, bare_endpoint_attaches_nothing)
{
	int ep = knitk_open();

	ASSERT_LE(0, ep);
	ASSERT_EQ(0, knitk_send_fd(self->sv[0], ep));
	close(ep);
	EXPECT_EQ(0, in_container(NOBODY, 1, self->sv[1], bare_client,
				  &self->sv[1]));
	EXPECT_EQ(1ULL << HOST, knitk_load64(&self->k.ctl->live));
	EXPECT_EQ(0, knitk_load64(&self->k.ctl->dead));
}

/* Memory cgroups: cgroup2 mounted on CG_DIR, a child group per test. */

FIXTURE(memcg) {
	char cg[128];
	bool mounted;
	struct knitk_geometry g;	/* the big knot */
	__u64 size;
};

/* "memory" among the controllers of cgroup2's root, enabled for children. */
static int memcg_up(bool *mounted)
{
	char buf[512], *tok, *save;

	*mounted = false;
	if (mkdir(CG_DIR, 0755) && errno != EEXIST)
		return -errno;
	if (access(CG_DIR "/cgroup.controllers", F_OK)) {
		if (mount("cgroup2", CG_DIR, "cgroup2", 0, NULL))
			return -errno;
		*mounted = true;
	}
	if (knitk_read_file(CG_DIR "/cgroup.controllers", buf, sizeof(buf)))
		return -EIO;
	for (tok = strtok_r(buf, "\n ", &save); tok;
	     tok = strtok_r(NULL, "\n ", &save))
		if (!strcmp(tok, "memory"))
			return knitk_write_file(CG_DIR "/cgroup.subtree_control",
						"+memory");
	return -EOPNOTSUPP;
}

static int cg_read(const char *cg, const char *file, unsigned long long *v)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	return knitk_sysfs_read(path, v);
}

/* The value of key @key in a flat keyed file such as memory.events. */
static int cg_key(const char *cg, const char *file, const char *key,
		  unsigned long long *v)
{
	char path[256], buf[1024], *p;
	size_t n = strlen(key);

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	if (knitk_read_file(path, buf, sizeof(buf)))
		return -EIO;
	for (p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == ' ') {
			*v = strtoull(p + n + 1, NULL, 10);
			return 0;
		}
	return -ENOENT;
}

static int cg_write(const char *cg, const char *file, const char *s)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	return knitk_write_file(path, s);
}

FIXTURE_SETUP(memcg)
{
	struct knitk_layout l;
	int ret, fd;

	self->cg[0] = '\0';
	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, getuid());
	ret = memcg_up(&self->mounted);
	/* No cgroup2 (ENODEV), or no memory controller in it. */
	if (ret == -ENODEV || ret == -EOPNOTSUPP)
		SKIP(_exit(255), "%s: no memory cgroup (CONFIG_MEMCG?): %s",
		     _metadata->name, strerror(-ret));
	ASSERT_EQ(0, ret);
	snprintf(self->cg, sizeof(self->cg), CG_DIR "/knitk-%d", getpid());
	ASSERT_EQ(0, mkdir(self->cg, 0755));
	/* One worker, one submitter, 16 MiB arenas: a 32 MiB knot. */
	knitk_geom(&self->g, 0, 1, 1, 64, 64, 16ULL << 20);
	fd = knitk_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_create(fd, &self->g, &l));
	close(fd);
	self->size = l.size;
	ASSERT_LE(32ULL << 20, self->size);
	ASSERT_EQ(0, knitk_live_wait_zero());
}

FIXTURE_TEARDOWN(memcg)
{
	if (self->cg[0])
		rmdir(self->cg);
	if (self->mounted)
		umount2(CG_DIR, MNT_DETACH);
}

/* Charges a cgroup's per-CPU stock may hold past the last free. */
static unsigned long long stock_slack(void)
{
	return 2ULL * 64 * KNITK_PAGE_BYTES * sysconf(_SC_NPROCESSORS_CONF);
}

/* A child in @cg doing what the parent says, one byte a step. */
struct stepper {
	pid_t pid;
	int cmd, res;
};

static int stepper_start(struct stepper *s, const char *cg,
			 int (*step)(char cmd, void *), void *arg)
{
	int cmd[2], res[2];
	char pid[32];

	if (pipe(cmd) || pipe(res))
		return -1;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (!s->pid) {
		char c;

		close(cmd[1]);
		close(res[0]);
		snprintf(pid, sizeof(pid), "%d\n", getpid());
		c = cg_write(cg, "cgroup.procs", pid) ? 1 : 0;
		if (write(res[1], &c, 1) != 1)
			_exit(1);
		while (read(cmd[0], &c, 1) == 1) {
			c = (char)step(c, arg);
			if (write(res[1], &c, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	close(cmd[0]);
	close(res[1]);
	s->cmd = cmd[1];
	s->res = res[0];
	return 0;
}

/* The step's result (0 for success), or -1 when the child is gone. */
static int stepper_do(struct stepper *s, char cmd)
{
	char c;

	if ((cmd && write(s->cmd, &cmd, 1) != 1) || read(s->res, &c, 1) != 1)
		return -1;
	return c;
}

static int stepper_end(struct stepper *s)
{
	int st;

	close(s->cmd);
	close(s->res);
	if (waitpid(s->pid, &st, 0) != s->pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

struct big {
	struct knitk_geometry g;
	struct knot k;
};

/* 'c' creates and maps the big knot, 'x' closes it, 'e' expects -ENOMEM. */
static int big_step(char cmd, void *arg)
{
	struct big *b = arg;
	struct knitk_geometry small;
	struct knot k;
	int ret;

	switch (cmd) {
	case 'c':
		return knot_make(&b->k, &b->g) ? 1 : 0;
	case 'x':
		knot_close(&b->k);
		return 0;
	case 'e':
		b->k.fd = knitk_open();
		if (b->k.fd < 0)
			return 2;
		ret = knitk_create(b->k.fd, &b->g, NULL);
		close(b->k.fd);
		if (ret != -ENOMEM)
			return 3;
		/* Nothing left charged: a small knot still fits, and works. */
		knitk_geom_small(&small);
		if (knot_make(&k, &small) ||
		    knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL) ||
		    !(knitk_load64(&k.ctl->live) & (1ULL << HOST)))
			return 4;
		knot_close(&k);
		return 0;
	}
	return 5;
}

TEST_F(memcg, knot_charged_to_creator_cgroup)
{
	unsigned long long empty, before, after, closed;
	struct big b = { .g = self->g };
	struct stepper s;

	/* No process has been in it: nothing is charged, no stock. */
	ASSERT_EQ(0, cg_read(self->cg, "memory.current", &empty));
	ASSERT_EQ(0, stepper_start(&s, self->cg, big_step, &b));
	ASSERT_EQ(0, stepper_do(&s, 0));
	ASSERT_EQ(0, cg_read(self->cg, "memory.current", &before));
	ASSERT_EQ(0, stepper_do(&s, 'c'));
	ASSERT_EQ(0, cg_read(self->cg, "memory.current", &after));
	TH_LOG("memory.current %llu empty, %llu before, %llu with the knot of %llu",
	       empty, before, after, (unsigned long long)self->size);
	EXPECT_LE(empty + self->size, after);
	EXPECT_LE(before + self->size, after + stock_slack());
	ASSERT_EQ(0, stepper_do(&s, 'x'));
	ASSERT_EQ(0, knitk_live_wait_zero());
	ASSERT_EQ(0, cg_read(self->cg, "memory.current", &closed));
	TH_LOG("memory.current %llu after the close", closed);
	EXPECT_GE(before + stock_slack(), closed);
	EXPECT_EQ(0, stepper_end(&s));
}

TEST_F(memcg, max_below_knot_fails_enomem)
{
	unsigned long long oom, oom_kill, max, cur;
	struct big b = { .g = self->g };
	struct stepper s;
	char limit[32];

	snprintf(limit, sizeof(limit), "%llu\n",
		 (unsigned long long)self->size / 2);
	ASSERT_EQ(0, cg_write(self->cg, "memory.max", limit));
	ASSERT_EQ(0, stepper_start(&s, self->cg, big_step, &b));
	ASSERT_EQ(0, stepper_do(&s, 0));
	EXPECT_EQ(0, stepper_do(&s, 'e'));
	EXPECT_EQ(0, stepper_end(&s));
	ASSERT_EQ(0, knitk_live_wait_zero());
	/* Refused at the limit, without the OOM killer. */
	ASSERT_EQ(0, cg_key(self->cg, "memory.events", "max", &max));
	ASSERT_EQ(0, cg_key(self->cg, "memory.events", "oom", &oom));
	ASSERT_EQ(0, cg_key(self->cg, "memory.events", "oom_kill", &oom_kill));
	EXPECT_LE(1, max);
	EXPECT_EQ(0, oom);
	EXPECT_EQ(0, oom_kill);
	ASSERT_EQ(0, cg_read(self->cg, "memory.current", &cur));
	TH_LOG("memory.current %llu once the child is gone", cur);
	EXPECT_GE(stock_slack(), cur);
}

TEST_HARNESS_MAIN

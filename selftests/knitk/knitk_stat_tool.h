/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Running knitk-stat (tools/knitk-stat.c), which the Makefile builds next
 * to the test programs that use it.
 */
#ifndef KNITK_STAT_TOOL_H
#define KNITK_STAT_TOOL_H

#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Runs knitk-stat with the arguments @argv (NULL-terminated, at most 7) as
 * uid @uid; its stdout+stderr in @out.
 */
static inline int run_statv(const char *const *argv, uid_t uid, char *out, size_t cap)
{
	char *args[9] = { "knitk-stat" };
	char path[4096], *slash;
	ssize_t n, got = 0;
	int p[2], status;
	pid_t pid;

	n = readlink("/proc/self/exe", path, sizeof(path) - 16);
	if (n < 0 || pipe(p))
		return -1;
	path[n] = '\0';
	slash = strrchr(path, '/');
	strcpy(slash ? slash + 1 : path, "knitk-stat");
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		if (uid && setuid(uid))
			_exit(126);
		for (n = 0; n < 7 && argv[n]; n++)
			args[n + 1] = (char *)argv[n];
		execv(path, args);
		_exit(127);
	}
	close(p[1]);
	while (got + 1 < (ssize_t)cap && (n = read(p[0], out + got, cap - 1 - got)) > 0)
		got += n;
	out[got] = '\0';
	close(p[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Runs knitk-stat with @arg (or none) as uid @uid. */
static inline int run_stat(const char *arg, uid_t uid, char *out, size_t cap)
{
	const char *argv[2] = { arg, NULL };

	return run_statv(argv, uid, out, cap);
}

#endif /* KNITK_STAT_TOOL_H */

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/runas.h"

/* The child's exit status when it could not become the user. */
#define RUNAS_NOT_USER 255

static int become(uid_t uid, gid_t gid)
{
	/* Without root the groups stay as they are; the ids must still match. */
	if (setgroups(0, NULL) < 0 && (getuid() == 0 || geteuid() == 0))
		return -1;
	if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return -1;
	return 0;
}

static void read_reply(int fd, char *out, size_t outlen)
{
	size_t used = 0;
	char sink[512];

	for (;;) {
		char *to = used + 1 < outlen ? out + used : sink;
		size_t room = used + 1 < outlen ? outlen - 1 - used : sizeof(sink);
		ssize_t n = read(fd, to, room);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (to != sink)
			used += (size_t)n;
	}
	out[used] = '\0';
}

int phx_run_as(uid_t uid, gid_t gid, unsigned timeout_s, phx_runas_fn fn, void *arg, char *out,
	       size_t outlen)
{
	int pipefd[2] = { -1, -1 }, st;
	pid_t pid;

	if (out && (!outlen || pipe2(pipefd, O_CLOEXEC) < 0))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		if (out) {
			close(pipefd[0]);
			close(pipefd[1]);
		}
		return -1;
	}
	if (pid == 0) {
		if (out)
			close(pipefd[0]);
		if (become(uid, gid) < 0)
			_exit(RUNAS_NOT_USER);
		if (timeout_s)
			alarm(timeout_s);
		st = fn(arg, pipefd[1]);
		fflush(NULL);
		_exit(st & 0xff);
	}
	if (out) {
		close(pipefd[1]);
		read_reply(pipefd[0], out, outlen);
		close(pipefd[0]);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) == RUNAS_NOT_USER)
		return -1;
	return WEXITSTATUS(st);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Evidence of a hung worker, taken before it is killed, because after the
 * kill it is gone: its state and wait channel, its kernel stack (root
 * only), and the user-space stacks from gdb and py-spy when they are
 * installed. Each tool runs under a deadline; a tool that hangs too is
 * killed and the others still run.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "launcher/options.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_workers.h"

static void print_lines(unsigned long rank, const char *what, char *text)
{
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		phx_info("rank %lu hang evidence: %s: %s", rank, what, line);
}

static void proc_file(unsigned long rank, pid_t pid, const char *name)
{
	char path[64], buf[8192];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		phx_info("rank %lu hang evidence: %s: not readable (%s)", rank, path,
			 strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0) {
		phx_info("rank %lu hang evidence: %s: empty", rank, path);
		return;
	}
	buf[n] = '\0';
	print_lines(rank, name, buf);
}

static void proc_state(unsigned long rank, pid_t pid)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "State:", 6) || !strncmp(line, "Threads:", 8))
			print_lines(rank, "status", line);
	}
	fclose(f);
}

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t len = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, prog);
		if (access(buf, X_OK) == 0)
			return true;
		path += len;
		if (*path == ':')
			path++;
	}
	return false;
}

/* Runs argv with its output collected, killed after timeout_s. */
static void run_tool(unsigned long rank, const char *what, char *const argv[], int timeout_s)
{
	size_t cap = 1 << 20, len = 0;
	char *out = malloc(cap);
	int fds[2];
	pid_t pid;
	int status;

	if (!out || pipe2(fds, O_CLOEXEC) < 0) {
		free(out);
		return;
	}
	pid = fork();
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setpgid(0, 0);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	if (pid > 0) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		int left_ms = timeout_s * 1000;

		while (left_ms > 0 && poll(&p, 1, 100) >= 0) {
			ssize_t n;

			left_ms -= 100;
			if (!p.revents)
				continue;
			n = read(fds[0], out + len, cap - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
			if (len == cap - 1)
				break;
		}
		if (left_ms <= 0)
			phx_info("rank %lu hang evidence: %s did not finish in %d s; killed", rank,
				 what, timeout_s);
		kill(-pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	close(fds[0]);
	out[len] = '\0';
	print_lines(rank, what, out);
	free(out);
}

void phx_agent_evidence(struct phx_agent *a, const struct phx_worker *w)
{
	char pid[32];

	snprintf(pid, sizeof(pid), "%d", (int)w->pid);
	proc_state(w->rank, w->pid);
	proc_file(w->rank, w->pid, "wchan");
	proc_file(w->rank, w->pid, "stack");
	if (in_path("py-spy")) {
		char *const argv[] = { "py-spy", "dump", "--pid", pid, NULL };

		run_tool(w->rank, "py-spy", argv, a->o->evidence_timeout_s);
	}
	if (in_path("gdb")) {
		/* Batch mode, no init files: the threads' stacks, then detach. */
		char *const argv[] = {
			"gdb", "-nx", "-batch", "-p", pid, "-ex", "thread apply all bt 20", NULL
		};

		run_tool(w->rank, "gdb", argv, a->o->evidence_timeout_s);
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running the node side of the preflight check as one Slurm step:
 *
 *	srun --mpi=pmix --nodes=N --ntasks=N --ntasks-per-node=1
 *	     --nodelist=HOSTS phalanx-check [--config FILE]
 *
 * The node side exchanges its results over PMIx and its first rank prints
 * the whole results document on stdout, which is read here. A node the
 * document lacks gets an error saying so; a step that printed nothing at
 * all is an error of the run, never a verdict on the nodes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/hostlist.h"
#include "common/log.h"
#include "health/preflight.h"

#define MAX_OUTPUT (64u << 20)

static int program_path(const struct phx_check_run_opts *opts, char *buf, size_t len, char *err,
			size_t errlen)
{
	char self[PATH_MAX];
	ssize_t n;
	char *slash;

	if (opts && opts->program) {
		snprintf(buf, len, "%s", opts->program);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return phx_errf(err, errlen, "cannot find this program (/proc/self/exe): %s",
				strerror(errno));
	self[n] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	if ((size_t)snprintf(buf, len, "%s/phalanx-check", self) >= len)
		return phx_errf(err, errlen, "path of phalanx-check too long");
	if (access(buf, X_OK) < 0)
		return phx_errf(err, errlen,
				"%s: %s; phalanx-check is built only when configure finds CUDA and "
				"NCCL (see phalanx-check(8))",
				buf, strerror(errno));
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads fd to EOF into *out until deadline; -1 on timeout or error. */
static int read_all(int fd, double deadline, char **out, size_t *len, char *err, size_t errlen)
{
	size_t cap = 65536;
	char *buf = malloc(cap);

	*len = 0;
	if (!buf)
		return phx_errf(err, errlen, "out of memory");
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double left = deadline - now();
		ssize_t n;

		if (left <= 0)
			goto timeout;
		if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			goto fail;
		if (!p.revents)
			continue;
		if (*len + 4096 > cap) {
			char *more = cap * 2 > MAX_OUTPUT ? NULL : realloc(buf, cap * 2);

			if (!more)
				goto fail;
			buf = more;
			cap *= 2;
		}
		n = read(fd, buf + *len, cap - *len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	buf[*len] = '\0';
	*out = buf;
	return 0;
timeout:
	free(buf);
	return phx_errf(err, errlen, "the check step ran past its timeout");
fail:
	free(buf);
	return phx_errf(err, errlen, "reading the check step's output failed: %s",
			errno ? strerror(errno) : "more than 64 MiB");
}

static pid_t start_step(char **argv, int *out_fd, char *err, size_t errlen)
{
	int pfd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return phx_errf(err, errlen, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return phx_errf(err, errlen, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		/* Its own process group, so a timeout ends srun and nothing else. */
		setpgid(0, 0);
		if (dup2(pfd[1], STDOUT_FILENO) < 0)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr,
			"phalanx: check: cannot run %s: %s; run it in a Slurm allocation "
			"where srun is on PATH\n",
			argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	*out_fd = pfd[0];
	return pid;
}

static int wait_step(pid_t pid, bool kill_it)
{
	int status = 0;

	if (kill_it) {
		kill(-pid, SIGTERM);
		for (int i = 0; i < 50 && waitpid(pid, &status, WNOHANG) == 0; i++)
			usleep(100000);
		kill(-pid, SIGKILL);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The results in host order; a host without results gets an error. */
static int order(char *const *hosts, size_t n, struct phx_check_results *got, int rc,
		 struct phx_check_results *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	for (size_t h = 0; h < n; h++) {
		struct phx_check_node node;
		size_t i;

		for (i = 0; i < got->n && strcmp(got->nodes[i].name, hosts[h]); i++)
			;
		if (i < got->n) {
			node = got->nodes[i];
			memset(&got->nodes[i], 0, sizeof(got->nodes[i]));
		} else {
			memset(&node, 0, sizeof(node));
			snprintf(node.name, sizeof(node.name), "%s", hosts[h]);
			snprintf(node.error, sizeof(node.error),
				 "no result: the check step (exit status %d) returned none for "
				 "this node; see its output",
				 rc);
		}
		if (phx_check_results_add(out, &node) < 0) {
			phx_check_node_free(&node);
			phx_check_results_free(out);
			return phx_errf(err, errlen, "out of memory");
		}
	}
	return 0;
}

int phx_check_run(char *const *hosts, size_t n, const struct phx_conf *conf,
		  const struct phx_check_run_opts *opts, struct phx_check_results *out, char *err,
		  size_t errlen)
{
	char prog[PATH_MAX], nodes_arg[64], tasks_arg[64], why[PHX_CHECK_TEXT], *list, *text = NULL;
	char *argv[16];
	struct phx_check_results got = { 0 };
	int fd = -1, argc = 0, rc, status,
	    timeout = opts && opts->timeout_s ? opts->timeout_s : conf->check.timeout_s;
	size_t len = 0;
	pid_t pid;

	memset(out, 0, sizeof(*out));
	if (!n)
		return phx_errf(err, errlen, "no nodes to check");
	if (program_path(opts, prog, sizeof(prog), err, errlen) < 0)
		return -1;
	list = phx_hostlist_compress(hosts, n, why, sizeof(why));
	if (!list)
		return phx_errf(err, errlen, "%s", why);
	snprintf(nodes_arg, sizeof(nodes_arg), "--nodes=%zu", n);
	snprintf(tasks_arg, sizeof(tasks_arg), "--ntasks=%zu", n);
	argv[argc++] = "srun";
	argv[argc++] = "--mpi=pmix";
	argv[argc++] = nodes_arg;
	argv[argc++] = tasks_arg;
	argv[argc++] = "--ntasks-per-node=1";
	argv[argc++] = "--kill-on-bad-exit=0";
	argv[argc++] = "--job-name=phalanx-check";
	argv[argc++] = "--nodelist";
	argv[argc++] = list;
	argv[argc++] = prog;
	if (opts && opts->config) {
		argv[argc++] = "--config";
		argv[argc++] = (char *)opts->config;
	}
	argv[argc] = NULL;
	pid = start_step(argv, &fd, err, errlen);
	free(list);
	if (pid < 0)
		return -1;
	rc = read_all(fd, now() + timeout, &text, &len, err, errlen);
	close(fd);
	status = wait_step(pid, rc < 0);
	if (rc < 0)
		return -1;
	if (!len) {
		free(text);
		return phx_errf(err, errlen,
				"the check step (exit status %d) printed no results; see its "
				"messages above",
				status);
	}
	if (phx_check_results_parse(text, len, &got, why, sizeof(why)) < 0) {
		free(text);
		return phx_errf(err, errlen, "the check step's output: %s", why);
	}
	free(text);
	rc = order(hosts, n, &got, status, out, err, errlen);
	phx_check_results_free(&got);
	return rc;
}

int phx_check_verdicts(char *const *hosts, size_t n, const struct phx_conf *conf,
		       const struct phx_check_run_opts *opts, struct phx_check_verdict **verdicts,
		       char *err, size_t errlen)
{
	struct phx_check_results res;
	struct phx_check_limits lim;

	*verdicts = NULL;
	if (phx_check_run(hosts, n, conf, opts, &res, err, errlen) < 0)
		return -1;
	*verdicts = calloc(res.n + 1, sizeof(**verdicts));
	if (!*verdicts) {
		phx_check_results_free(&res);
		return phx_errf(err, errlen, "out of memory");
	}
	phx_check_limits_from_conf(conf, &lim);
	phx_check_judge(&res, &lim, *verdicts);
	phx_check_results_free(&res);
	return 0;
}

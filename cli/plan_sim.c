/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runs phalanx-plan-sim (PHX_PLAN_SIM overrides where it is) on the plan
 * written as a case to a private temporary file, and reads back one line
 * per map: NAME<tab>simulated seconds<tab>link-model seconds.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "placement/plan_case.h"
#include "cli/plan_sim.h"

#define SIM_NO_SIMGRID 3 /* phalanx-plan-sim's exit status without SimGrid */

static const char *simulator(void)
{
	const char *env = getenv("PHX_PLAN_SIM");

	return env && *env ? env : PHX_PKGLIBEXECDIR "/phalanx-plan-sim";
}

static int write_case(const struct phx_plan *plan, const uint32_t *host_map, char *path, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	FILE *f;
	int fd;

	snprintf(path, len, "%s/phalanx-plan.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(path);
		return -1;
	}
	phx_plan_case_write(f, "phalanx plan", plan);
	phx_plan_case_map(f, "phalanx", plan->rank_node, plan->world, NULL);
	phx_plan_case_map(f, "host-name order", host_map, plan->world, NULL);
	if (fclose(f)) {
		unlink(path);
		return -1;
	}
	return 0;
}

static pid_t start(const char *exe, const char *path, int *out)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl(exe, exe, path, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -1;
	}
	*out = fds[0];
	return pid;
}

/* Both maps' lines; 0 when both were read. */
static int read_times(int fd, struct plan_sim_times *t)
{
	FILE *f = fdopen(fd, "r");
	char line[512];
	unsigned seen = 0;

	if (!f) {
		close(fd);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t');

		if (!tab)
			continue;
		*tab = '\0';
		if (!strcmp(line, "phalanx") && sscanf(tab + 1, "%lf", &t->plan_s) == 1)
			seen |= 1;
		else if (!strcmp(line, "host-name order") &&
			 sscanf(tab + 1, "%lf", &t->hostname_s) == 1)
			seen |= 2;
	}
	fclose(f);
	return seen == 3 ? 0 : -1;
}

static int finish(pid_t pid, const char *exe, int got, char *why, size_t whylen)
{
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			snprintf(why, whylen, "waiting for %s failed: %s", exe, strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == SIM_NO_SIMGRID) {
		snprintf(why, whylen, "SimGrid is not installed; install python3-simgrid");
		return -1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		snprintf(why, whylen, "%s cannot run; reinstall phalanx or set PHX_PLAN_SIM", exe);
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) || got < 0) {
		snprintf(why, whylen, "%s failed (its message is above)", exe);
		return -1;
	}
	return 0;
}

int phx_plan_sim_run(const struct phx_plan *plan, const uint32_t *host_map,
		     struct plan_sim_times *t, char *why, size_t whylen)
{
	const char *exe = simulator();
	char path[4096];
	int out, rc;
	pid_t pid;

	if ((unsigned long)plan->n_nodes * plan->gpus_per_node > PHX_PLAN_SIM_MAX_GPUS) {
		snprintf(why, whylen, "%zu nodes of %u GPUs, over the %lu GPUs it simulates",
			 plan->n_nodes, plan->gpus_per_node, PHX_PLAN_SIM_MAX_GPUS);
		return -1;
	}
	if (access(exe, X_OK) < 0) {
		snprintf(why, whylen,
			 "%s is not installed; 'make install' puts it there, or set PHX_PLAN_SIM "
			 "to it",
			 exe);
		return -1;
	}
	if (write_case(plan, host_map, path, sizeof(path)) < 0) {
		snprintf(why, whylen, "cannot write a temporary file: %s; check TMPDIR",
			 strerror(errno));
		return -1;
	}
	fflush(stdout);
	pid = start(exe, path, &out);
	if (pid < 0) {
		snprintf(why, whylen, "cannot start %s: %s", exe, strerror(errno));
		unlink(path);
		return -1;
	}
	rc = finish(pid, exe, read_times(out, t), why, whylen);
	unlink(path);
	return rc;
}

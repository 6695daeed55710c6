/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "common/log.h"
#include "common/rundir.h"
#include "common/runas.h"
#include "spank/rundirs.h"

/* A sweep reads directories only; a stuck file system must not hold slurmstepd. */
#define SWEEP_TIMEOUT_S 30

static bool agent_step(spank_t sp)
{
	char **argv = NULL;
	const char *base;
	int argc = 0;

	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv ||
	    !argv[0])
		return false;
	base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, "phalanx-launch"))
		return false;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--agent"))
			return true;
	return false;
}

/* Where the agents make them: TMPDIR, and /tmp for the socket's short path. */
static int sweep(void *tmpdir_arg, int out_fd)
{
	const char *tmpdir = tmpdir_arg;

	(void)out_fd;
	if (*tmpdir && strcmp(tmpdir, "/tmp")) {
		phx_rundir_sweep(tmpdir, "phalanx-launch");
		phx_rundir_sweep(tmpdir, "phalanx-ckpt");
	}
	phx_rundir_sweep("/tmp", "phalanx-launch");
	phx_rundir_sweep("/tmp", "phalanx-ckpt");
	return 0;
}

void phx_spank_sweep_rundirs(spank_t sp)
{
	char tmpdir[PATH_MAX] = "";
	uid_t uid;
	gid_t gid;

	if (!spank_remote(sp) || !agent_step(sp) ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
		return;
	if (spank_getenv(sp, "TMPDIR", tmpdir, sizeof(tmpdir)) != ESPANK_SUCCESS)
		tmpdir[0] = '\0';
	/* As the job's user, never as root: the directories are the user's to name. */
	phx_run_as(uid, gid, SWEEP_TIMEOUT_S, sweep, tmpdir, NULL, 0);
}

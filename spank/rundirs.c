/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/rundir.h"
#include "spank/rundirs.h"

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

/* As the job's user, never as root: the directories are the user's to name. */
static void sweep_as(uid_t uid, gid_t gid, const char *tmpdir)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return;
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 && getuid() == 0)
			_exit(1);
		if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
			_exit(1);
		/* Where the agents make them: TMPDIR, and /tmp for the socket's short path. */
		if (*tmpdir && strcmp(tmpdir, "/tmp")) {
			phx_rundir_sweep(tmpdir, "phalanx-launch");
			phx_rundir_sweep(tmpdir, "phalanx-ckpt");
		}
		phx_rundir_sweep("/tmp", "phalanx-launch");
		phx_rundir_sweep("/tmp", "phalanx-ckpt");
		_exit(0);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
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
	sweep_as(uid, gid, tmpdir);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/errfile.h"
#include "common/file.h"
#include "common/log.h"
#include "common/rundir.h"
#include "common/runas.h"
#include "spank/rootcause.h"

#define ROOTCAUSE_PREFIX "phalanx-step"
/* Reading one error file: a hung file system must not hold slurmstepd. */
#define ROOTCAUSE_READ_TIMEOUT_S 10
#define ROOTCAUSE_REMOVE_TIMEOUT_S 30
/* What a child tells the parent: a kind letter, then the message. */
#define REPLY_ROOT 'R'
#define REPLY_PEER 'P'

static void base_dir(spank_t sp, char *buf, size_t len)
{
	struct stat st;

	/* The job's TMPDIR, where the tasks will look too; /tmp without one. */
	if (spank_getenv(sp, "TMPDIR", buf, (int)len) == ESPANK_SUCCESS && buf[0] == '/' &&
	    stat(buf, &st) == 0 && S_ISDIR(st.st_mode))
		return;
	snprintf(buf, len, "/tmp");
}

void phx_rootcause_prepare(spank_t sp, struct phx_rootcause *rc)
{
	char base[PATH_MAX];
	struct stat st;
	int err;

	memset(rc, 0, sizeof(*rc));
	rc->lock_fd = -1;
	base_dir(sp, base, sizeof(base));
	err = phx_rundir_make(base, ROOTCAUSE_PREFIX, rc->dir, sizeof(rc->dir), &rc->lock_fd);
	if (err < 0 || fstat(rc->lock_fd, &st) < 0) {
		phx_warn("cannot make a directory for the tasks' error files in %s: %s; a failing "
			 "task's @record root cause is not reported (check that the job's TMPDIR "
			 "is writable)",
			 base, strerror(err < 0 ? -err : errno));
		phx_rundir_remove(err < 0 ? "" : rc->dir, rc->lock_fd);
		memset(rc, 0, sizeof(*rc));
		rc->lock_fd = -1;
		return;
	}
	rc->lock_dev = st.st_dev;
	rc->lock_ino = st.st_ino;
}

void phx_rootcause_file(const struct phx_rootcause *rc, unsigned long rank, char *buf, size_t len)
{
	if (!rc->dir[0])
		buf[0] = '\0';
	else
		snprintf(buf, len, "%s/error-rank%lu.json", rc->dir, rank);
}

struct read_job {
	char path[PATH_MAX];
};

/* As the user: the file is theirs, and so is anything it links to. */
static int read_child(void *arg, int out_fd)
{
	const struct read_job *job = arg;
	char msg[1024], trace[8192], reply[1100];
	int n;

	if (phx_errfile_read(job->path, msg, sizeof(msg), trace, sizeof(trace)) < 0)
		return 1;
	n = snprintf(reply, sizeof(reply), "%c%s",
		     phx_errfile_peer_lost(msg) ? REPLY_PEER : REPLY_ROOT, msg);
	return phx_write_all(out_fd, reply, (size_t)n) < 0;
}

/* The user's text goes into srun's output and slurmd's log: one line, printable. */
static void one_line(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
}

static void describe_exit(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "exited with code %d", WEXITSTATUS(status));
}

void phx_rootcause_task_exit(spank_t sp, const struct phx_rootcause *rc,
			     const struct phx_step *step)
{
	struct read_job job;
	char reply[1100], how[64];
	int slot, status;
	uid_t uid;
	gid_t gid;

	if (!rc->dir[0] || !step->active || step->error[0] ||
	    spank_get_item(sp, S_TASK_ID, &slot) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS || status == 0 ||
	    slot < 0 || (unsigned)slot >= step->map.tasks_per_node ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
		return;
	phx_rootcause_file(rc, step->map.slot_rank[slot], job.path, sizeof(job.path));
	if (phx_run_as(uid, gid, ROOTCAUSE_READ_TIMEOUT_S, read_child, &job, reply,
		       sizeof(reply)) != 0 ||
	    !reply[0])
		return;
	one_line(reply);
	describe_exit(status, how, sizeof(how));
	if (reply[0] == REPLY_PEER) {
		/* Secondary: it failed because another rank did; that one's line says why. */
		phx_info("rank %lu (local rank %d on %s) %s after a peer was lost: %s",
			 step->map.slot_rank[slot], slot, step->node, how, reply + 1);
		return;
	}
	phx_error("rank %lu (local rank %d on %s) %s; root cause (torch @record): %s; the "
		  "traceback is in the task's standard error",
		  step->map.slot_rank[slot], slot, step->node, how, reply + 1);
}

static int remove_child(void *arg, int out_fd)
{
	const char *dir = arg;
	char base[PATH_MAX], *slash;

	(void)out_fd;
	phx_rundir_remove(dir, -1);
	/* Those of steps whose slurmstepd was killed: nobody else removes them. */
	snprintf(base, sizeof(base), "%s", dir);
	slash = strrchr(base, '/');
	if (slash && slash != base) {
		*slash = '\0';
		phx_rundir_sweep(base, ROOTCAUSE_PREFIX);
	}
	return 0;
}

void phx_rootcause_remove(spank_t sp, struct phx_rootcause *rc)
{
	struct stat st;
	uid_t uid;
	gid_t gid;

	if (!rc->dir[0])
		return;
	/*
	 * Where Slurm ran user_init in a child of its own (contain_spank), the
	 * lock went with that child and the number may name another file now.
	 */
	if (rc->lock_fd >= 0 && fstat(rc->lock_fd, &st) == 0 && st.st_dev == rc->lock_dev &&
	    st.st_ino == rc->lock_ino)
		close(rc->lock_fd);
	if (spank_get_item(sp, S_JOB_UID, &uid) == ESPANK_SUCCESS &&
	    spank_get_item(sp, S_JOB_GID, &gid) == ESPANK_SUCCESS)
		phx_run_as(uid, gid, ROOTCAUSE_REMOVE_TIMEOUT_S, remove_child, rc->dir, NULL, 0);
	memset(rc, 0, sizeof(*rc));
	rc->lock_fd = -1;
}

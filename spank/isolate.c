/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU isolation, run as root in each forked task before Slurm drops to the
 * user. The task gets a private mount namespace; in it every GPU device
 * file it may not use is masked, and so is the driver's
 * /proc/driver/nvidia/gpus/BUS directory of that GPU. The host's mounts
 * are never changed: / is made a slave first, so nothing propagates back.
 *
 * Everything here runs as root on paths named by phalanx.yaml. No symlink
 * is ever followed, every directory on the way must belong to root and be
 * writable by nobody else, and mounts go through /proc/self/fd of the
 * checked file, so what was checked is what gets mounted over.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "common/gpulist.h"
#include "common/log.h"
#include "spank/devfilter.h"
#include "spank/isolate.h"
#include "spank/step.h"

/* 256 GPUs of three digits and their commas, with room to spare. */
#define ENV_LEN 2048
#define WHY_LEN 256
#define FD_PATH_LEN 32

/*
 * What task_init_privileged decided, for task_init: both run in the same
 * forked task, so a static carries it over.
 */
static struct {
	bool active; /* GPUs were masked and CUDA_VISIBLE_DEVICES renumbered */
	int task; /* local task id */
	struct phx_gpus alloc; /* Slurm's GPUs for the step on this node */
	struct phx_gpus visible; /* the ones the task keeps */
	char slurm_cvd[ENV_LEN]; /* Slurm's CUDA_VISIBLE_DEVICES, "" when unset */
	char cvd[ENV_LEN]; /* what isolation set it to */
} iso;

/* Device numbers of the node's GPU files, by GPU index: what the device filter denies. */
static dev_t gpu_rdev[PHX_GPU_MAX];

/* The cgroups slurmstepd made for its tasks' device filters, by local task id. */
static struct {
	unsigned n;
	struct phx_devfilter *cg;
} filters;

/* The driver directories (PCI bus ids) of hidden GPUs. */
struct bus_dirs {
	unsigned n;
	char name[PHX_GPU_MAX][NAME_MAX + 1];
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* slurmstepd goes over a task's decision again: the task itself reports what fails. */
static bool quiet;

/*
 * Logs "phalanx: isolation: ...". In the task, slurmstepd's errors also
 * reach the task's stderr, so srun shows the user the reason.
 */
static int fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (quiet)
		phx_debug("isolation: %s", msg);
	else
		phx_error("isolation: %s", msg);
	return -1;
}

/* ------------------------------------------------------------ safe paths */

static bool trusted_dir(const struct stat *st)
{
	if (!S_ISDIR(st->st_mode) || st->st_uid != 0)
		return false;
	/* In a sticky directory (/tmp) others cannot rename what root owns. */
	return !(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX);
}

static void describe(int dirfd, const char *name, int err, char *why, size_t len)
{
	struct stat st;

	if (!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode))
		snprintf(why, len, "'%s' is a symlink, which is never followed", name);
	else
		snprintf(why, len, "'%s': %s", name, strerror(err));
}

/* Opens one component below dirfd, never through a symlink. */
static int open_step(int dirfd, const char *name, bool last, int last_flags, char *why, size_t len)
{
	int flags = O_NOFOLLOW | O_CLOEXEC | (last ? last_flags : O_PATH | O_DIRECTORY);
	int fd, err;

	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		snprintf(why, len, "'%s' in the path is not allowed", name);
		errno = EINVAL;
		return -1;
	}
	fd = openat(dirfd, name, flags);
	if (fd < 0) {
		err = errno;
		describe(dirfd, name, err, why, len);
		errno = err;
	}
	return fd;
}

/*
 * Opens an absolute path for root, component by component, following no
 * symlink; every directory on the way must be trusted (trusted_dir), so no
 * user can swap a component between this check and the mount. last_flags
 * opens the final component (O_PATH, or O_RDONLY | O_DIRECTORY to list
 * it); its owner and type are the caller's to check in *st. -1 with errno
 * (ENOENT when something does not exist) and the reason in why.
 */
static int open_trusted(const char *path, int last_flags, struct stat *st, char *why, size_t len)
{
	char buf[PATH_MAX], *name, *next, *save = NULL;
	const char *dir = "/";
	int dirfd, fd, err;

	if (path[0] != '/' || strlen(path) >= sizeof(buf)) {
		snprintf(why, len, "not an absolute path of at most %d bytes", PATH_MAX - 1);
		errno = EINVAL;
		return -1;
	}
	strcpy(buf, path);
	dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		snprintf(why, len, "'/': %s", strerror(errno));
		return -1;
	}
	for (name = strtok_r(buf, "/", &save); name; name = next) {
		next = strtok_r(NULL, "/", &save);
		if (fstat(dirfd, st) < 0 || !trusted_dir(st)) {
			snprintf(why, len,
				 "directory '%s' on the way is not owned by root, or "
				 "others may write to it",
				 dir);
			errno = EPERM;
			goto fail;
		}
		fd = open_step(dirfd, name, !next, last_flags, why, len);
		if (fd < 0)
			goto fail;
		close(dirfd);
		dirfd = fd;
		dir = name;
	}
	if (fstat(dirfd, st) < 0) {
		snprintf(why, len, "%s", strerror(errno));
		goto fail;
	}
	return dirfd;
fail:
	err = errno;
	close(dirfd);
	errno = err;
	return -1;
}

static const char *fd_path(int fd, char *buf)
{
	snprintf(buf, FD_PATH_LEN, "/proc/self/fd/%d", fd);
	return buf;
}

static bool is_dev_null(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(1, 3) && st->st_uid == 0;
}

/* ------------------------------------------------------------ what Slurm gave */

struct task_info {
	uint32_t job_id, step_id, ntasks;
	int task;
	char node[256];
};

static bool plain_name(const char *s)
{
	return s[0] && strcmp(s, ".") && strcmp(s, "..") &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
		       strlen(s);
}

static int read_task(spank_t sp, struct task_info *t)
{
	if (spank_get_item(sp, S_JOB_ID, &t->job_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &t->step_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &t->ntasks) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_ID, &t->task) != ESPANK_SUCCESS || t->task < 0 ||
	    (uint32_t)t->task >= t->ntasks)
		return fail("Slurm did not tell the task's id; this plugin needs Slurm 22.05 or "
			    "later");
	/* Only for a %n in health.dev_root, which tests use. */
	if (phx_step_node_name(sp, t->node, sizeof(t->node)) < 0)
		t->node[0] = '\0';
	t->node[sizeof(t->node) - 1] = '\0';
	if (!plain_name(t->node))
		t->node[0] = '\0';
	return 0;
}

/* Slurm's CUDA_VISIBLE_DEVICES for the whole step: a per-task one comes later. */
static int read_step_cvd(spank_t sp)
{
	spank_err_t rc;

	rc = spank_getenv(sp, "CUDA_VISIBLE_DEVICES", iso.slurm_cvd, sizeof(iso.slurm_cvd));
	if (rc == ESPANK_ENV_NOEXIST)
		iso.slurm_cvd[0] = '\0';
	else if (rc != ESPANK_SUCCESS)
		return fail("cannot read CUDA_VISIBLE_DEVICES: %s", spank_strerror(rc));
	return 0;
}

/*
 * The GPUs Slurm gave the step on this node. Only the variable Slurm sets,
 * or removes, for this kind of step is believed: SLURM_JOB_GPUS for the
 * batch step, SLURM_STEP_GPUS for all others. The other one passes from
 * the submitter's environment into the task untouched (seen on 22.05), so
 * it says whatever the user wrote.
 */
static int read_alloc(spank_t sp, const struct task_info *t)
{
	const char *name = t->step_id == SLURM_BATCH_SCRIPT ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
	char val[ENV_LEN], err[256];
	spank_err_t rc;

	rc = spank_getenv(sp, name, val, sizeof(val));
	if (rc == ESPANK_ENV_NOEXIST)
		val[0] = '\0'; /* no GPUs: every GPU of the node is hidden */
	else if (rc != ESPANK_SUCCESS)
		return fail("cannot read %s: %s", name, spank_strerror(rc));
	if (!strcmp(val, "NoDevFiles"))
		return fail("Slurm knows no device file of the job's GPUs (%s=NoDevFiles); give "
			    "the gpu lines of gres.conf a File=, or set isolation.mode: off",
			    name);
	if (phx_gpus_parse(val, &iso.alloc, err, sizeof(err)) < 0)
		return fail("%s: %s", name, err);
	return read_step_cvd(sp);
}

/* ------------------------------------------------------------ what the node has */

/* GPUs 0..PHX_GPU_MAX-1 whose device file exists as a root-owned char device. */
static int scan_devices(const struct phx_conf *conf, const char *node, struct phx_gpus *present)
{
	char path[PATH_MAX], why[WHY_LEN];
	struct stat st;
	int fd;

	present->n = 0;
	if (!conf->health.gpu_device[0])
		return fail("health.gpu_device is \"\", so GPU device files cannot be found; set "
			    "it (default /dev/nvidia%%u) or set isolation.mode: off");
	for (unsigned i = 0; i < PHX_GPU_MAX; i++) {
		if (phx_gpu_path(conf->health.dev_root, conf->health.gpu_device, node, i, path,
				 sizeof(path)) < 0)
			return fail("cannot make GPU %u's device path from health.dev_root '%s' "
				    "and health.gpu_device '%s'",
				    i, conf->health.dev_root, conf->health.gpu_device);
		fd = open_trusted(path, O_PATH, &st, why, sizeof(why));
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0)
			return fail("%s: %s; GPUs cannot be masked safely there. Fix the path or "
				    "health.gpu_device",
				    path, why);
		close(fd);
		if (!S_ISCHR(st.st_mode) || st.st_uid != 0) {
			phx_warn("isolation: %s is not a character device owned by root; it is "
				 "left alone",
				 path);
			continue;
		}
		gpu_rdev[i] = st.st_rdev;
		present->id[present->n++] = i;
	}
	return 0;
}

/* 0 and the minor; -1 when there is none to read; 1 when bus is not a root-owned directory. */
static int read_minor(int dirfd, const char *bus, unsigned *minor)
{
	char text[4096];
	struct stat st;
	int sub, fd = -1, rc = -1;
	ssize_t n;

	if (fstatat(dirfd, bus, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != 0)
		return 1;
	sub = openat(dirfd, bus, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return -1;
	fd = openat(sub, "information", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0)
		goto out;
	n = read(fd, text, sizeof(text) - 1);
	if (n < 0)
		goto out;
	text[n] = '\0';
	rc = phx_gpu_info_minor(text, minor);
out:
	if (fd >= 0)
		close(fd);
	close(sub);
	return rc;
}

/* PROC_ROOT/driver/nvidia/gpus, where the driver lists each GPU. */
static int proc_dir(const struct phx_conf *conf, char *buf, size_t len)
{
	size_t n = strlen(conf->isolation.proc_root);

	while (n > 1 && conf->isolation.proc_root[n - 1] == '/')
		n--;
	if (n == 1)
		n = 0;
	if ((size_t)snprintf(buf, len, "%.*s/driver/nvidia/gpus", (int)n,
			     conf->isolation.proc_root) >= len)
		return fail("isolation.proc_root '%s' is too long", conf->isolation.proc_root);
	return 0;
}

/* Driver directories of the GPUs that are not visible; a GPU whose minor is unreadable too. */
static int scan_proc(const char *dir, struct bus_dirs *hide)
{
	char why[WHY_LEN];
	struct dirent *de;
	struct stat st;
	unsigned minor;
	DIR *d;
	int fd;

	hide->n = 0;
	fd = open_trusted(dir, O_RDONLY | O_DIRECTORY, &st, why, sizeof(why));
	if (fd < 0 && errno == ENOENT)
		return 0; /* no NVIDIA driver, or an older one */
	if (fd < 0)
		return fail("%s: %s; fix isolation.proc_root", dir, why);
	if (!trusted_dir(&st)) {
		close(fd);
		return fail("%s is not owned by root or is writable by others", dir);
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return fail("cannot list %s: %s", dir, strerror(errno));
	}
	while ((de = readdir(d))) {
		int rc;

		if (de->d_name[0] == '.')
			continue;
		rc = read_minor(fd, de->d_name, &minor);
		if (rc > 0) {
			phx_warn("isolation: %s/%s is not a directory owned by root; it is left "
				 "alone",
				 dir, de->d_name);
			continue;
		}
		if (rc == 0 && phx_gpus_has(&iso.visible, minor))
			continue;
		if (rc < 0)
			phx_warn("isolation: no 'Device Minor' in %s/%s/information; hiding that "
				 "GPU",
				 dir, de->d_name);
		if (hide->n == PHX_GPU_MAX) {
			closedir(d);
			return fail("more than %d GPUs in %s", PHX_GPU_MAX, dir);
		}
		snprintf(hide->name[hide->n++], sizeof(hide->name[0]), "%s", de->d_name);
	}
	closedir(d);
	return 0;
}

/* ------------------------------------------------------------ masks */

/*
 * A namespace of the task's own whose mounts never reach the host: / and
 * everything below become slaves, so host mounts (a new NFS mount) still
 * show up in the task but nothing the task mounts goes back.
 */
static int private_mounts(void)
{
	if (unshare(CLONE_NEWNS) < 0)
		return fail("cannot make a mount namespace for the task: %s; slurmstepd must "
			    "run as root",
			    strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return fail("cannot make the task's mounts private: %s", strerror(errno));
	return 0;
}

/*
 * The mask over a hidden GPU's device file is /dev/null, bound read-only
 * and nodev:
 *  - open() of it fails with EACCES for every user, root included (nodev),
 *    which is what the CUDA driver meets under Slurm's ConstrainDevices
 *    (EPERM from the devices cgroup); it then leaves that GPU out, and
 *    CUDA numbers the GPUs that are left from 0;
 *  - stat() shows 1:3 instead of 195:N, so NVML, tools and tests see it
 *    is no GPU; the driver's attempt to "repair" the node by unlinking and
 *    re-creating it fails (EBUSY on a mount point);
 *  - read-only: nobody can chmod the host's /dev/null through it.
 * A mode-000 file would still open for root, and an empty file would need
 * a place to live; /dev/null is on every node and owned by root.
 */
static int mask_device(const char *path, int null_fd)
{
	char why[WHY_LEN], src[FD_PATH_LEN], dst[FD_PATH_LEN];
	struct stat st;
	int fd, rc = -1;

	fd = open_trusted(path, O_PATH, &st, why, sizeof(why));
	if (fd < 0)
		return fail("%s: %s", path, why);
	if (!S_ISCHR(st.st_mode) || st.st_uid != 0) {
		fail("%s changed while the task started", path);
		goto out;
	}
	if (mount(fd_path(null_fd, src), fd_path(fd, dst), NULL, MS_BIND, NULL) < 0) {
		fail("cannot mask %s: %s", path, strerror(errno));
		goto out;
	}
	close(fd);
	fd = open_trusted(path, O_PATH, &st, why, sizeof(why));
	if (fd < 0 || !is_dev_null(&st)) {
		fail("the mask over %s did not take", path);
		goto out;
	}
	if (mount(NULL, fd_path(fd, dst), NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NODEV | MS_NOSUID | MS_NOEXEC, NULL) < 0) {
		fail("cannot make the mask over %s read-only: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* An empty read-only tmpfs over the driver's directory of a hidden GPU. */
static int mask_bus_dir(const char *dir, const char *bus)
{
	char path[PATH_MAX], why[WHY_LEN], dst[FD_PATH_LEN];
	struct stat st;
	int fd, rc = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, bus) >= sizeof(path))
		return fail("%s/%s: path too long", dir, bus);
	fd = open_trusted(path, O_PATH | O_DIRECTORY, &st, why, sizeof(why));
	if (fd < 0)
		return fail("%s: %s", path, why);
	if (st.st_uid != 0)
		rc = fail("%s is not owned by root", path);
	else if (mount("tmpfs", fd_path(fd, dst), "tmpfs",
		       MS_RDONLY | MS_NODEV | MS_NOSUID | MS_NOEXEC, "mode=0555,size=4k") < 0)
		rc = fail("cannot mask %s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

static int open_null(void)
{
	struct stat st;
	int fd = open("/dev/null", O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0 || !is_dev_null(&st)) {
		if (fd >= 0)
			close(fd);
		return fail("/dev/null is not the null device (1:3, owned by root)");
	}
	return fd;
}

static int apply_masks(const struct phx_conf *conf, const struct task_info *t,
		       const struct phx_gpus *hidden, const char *dir, const struct bus_dirs *buses)
{
	char path[PATH_MAX];
	int null_fd, rc = 0;

	if (private_mounts() < 0)
		return -1;
	null_fd = open_null();
	if (null_fd < 0)
		return -1;
	for (unsigned i = 0; i < hidden->n && !rc; i++) {
		/* Worked in scan_devices already. */
		phx_gpu_path(conf->health.dev_root, conf->health.gpu_device, t->node, hidden->id[i],
			     path, sizeof(path));
		rc = mask_device(path, null_fd);
	}
	for (unsigned i = 0; i < buses->n && !rc; i++)
		rc = mask_bus_dir(dir, buses->name[i]);
	close(null_fd);
	return rc;
}

/* ------------------------------------------------------------ CUDA numbering */

/*
 * With GPUs hidden, the CUDA driver numbers only the ones it can open,
 * from 0, in device order (the driver hands out minors in PCI bus order,
 * the order Slurm assumes too): Slurm's CUDA_VISIBLE_DEVICES (device
 * numbers, unless ConstrainDevices made them 0..) must be renumbered.
 */
static int set_cuda_env(spank_t sp)
{
	spank_err_t rc;

	if (!iso.slurm_cvd[0])
		return 0;
	if (phx_gpus_cuda(iso.slurm_cvd, iso.slurm_cvd, &iso.alloc, &iso.visible, iso.cvd,
			  sizeof(iso.cvd)) < 0)
		return fail("cannot renumber CUDA_VISIBLE_DEVICES=%.64s for the GPUs left "
			    "visible; it must list one number per GPU of the step",
			    iso.slurm_cvd);
	rc = spank_setenv(sp, "CUDA_VISIBLE_DEVICES", iso.cvd, 1);
	if (rc != ESPANK_SUCCESS)
		return fail("cannot set CUDA_VISIBLE_DEVICES: %s", spank_strerror(rc));
	return 0;
}

static void log_result(const struct task_info *t, const struct phx_gpus *hidden,
		       enum phx_isolate_mode mode)
{
	char shown[ENV_LEN], masked[ENV_LEN];

	phx_gpus_format(&iso.visible, shown, sizeof(shown));
	phx_gpus_format(hidden, masked, sizeof(masked));
	phx_debug("isolation (%s): job %u step %u task %d on %s: GPUs [%s] visible, [%s] "
		  "masked, CUDA_VISIBLE_DEVICES=%s",
		  phx_isolate_mode_name(mode), t->job_id, t->step_id, t->task,
		  t->node[0] ? t->node : "?", shown, masked, iso.cvd[0] ? iso.cvd : "(unchanged)");
}

/* --phx-isolate=off (or PHX_ISOLATE=off) only where the site allows it. */
static int check_off(const struct phx_conf *conf, const struct phx_job_opts *opts)
{
	if (!opts->isolate_set || conf->isolation.mode == PHX_ISOLATE_OFF ||
	    conf->isolation.allow_off)
		return 0;
	return fail("--phx-isolate=off is not allowed on this cluster (isolation.allow_off is "
		    "false); drop it, or use --phx-isolate=task or job");
}

/* Which GPUs of the node task t keeps (iso.visible) and which it must not reach. */
static int decide(spank_t sp, const struct phx_conf *conf, const struct phx_job_opts *opts,
		  struct task_info *t, struct phx_gpus *hidden, char *proc, size_t proc_len,
		  struct bus_dirs *buses)
{
	struct phx_gpus present;

	if (read_task(sp, t) < 0 || read_alloc(sp, t) < 0)
		return -1;
	iso.task = t->task;
	if (phx_gpus_select(opts->isolate, &iso.alloc, (unsigned)t->task, t->ntasks, &iso.visible) <
	    0)
		return fail("task %d is not below the %u tasks of the node", t->task, t->ntasks);
	if (scan_devices(conf, t->node, &present) < 0 || proc_dir(conf, proc, proc_len) < 0 ||
	    scan_proc(proc, buses) < 0)
		return -1;
	phx_gpus_hidden(&present, &iso.visible, hidden);
	return 0;
}

int phx_isolate_task(spank_t sp, const struct phx_conf *conf, const struct phx_job_opts *opts)
{
	static struct bus_dirs buses;
	struct phx_gpus hidden;
	struct task_info t;
	char dir[PATH_MAX];

	memset(&iso, 0, sizeof(iso));
	if (opts->isolate == PHX_ISOLATE_OFF)
		return check_off(conf, opts) < 0 ? -1 : read_step_cvd(sp);
	if (decide(sp, conf, opts, &t, &hidden, dir, sizeof(dir), &buses) < 0)
		return -1;
	if (!hidden.n && !buses.n) {
		/* Nothing to hide: no GPU on the node, or the task may use all. */
		log_result(&t, &hidden, opts->isolate);
		return 0;
	}
	if (apply_masks(conf, &t, &hidden, dir, &buses) < 0)
		return -1;
	if (hidden.n) {
		if (set_cuda_env(sp) < 0)
			return -1;
		iso.active = iso.cvd[0] != '\0';
	}
	log_result(&t, &hidden, opts->isolate);
	return 0;
}

/* ------------------------------------------------------------ device filter */

static struct phx_devfilter *filter_slot(const struct task_info *t)
{
	if (!filters.cg) {
		filters.cg = calloc(t->ntasks, sizeof(*filters.cg));
		if (!filters.cg)
			return NULL;
		filters.n = t->ntasks;
		for (unsigned i = 0; i < filters.n; i++)
			filters.cg[i].chain_fd = -1;
	}
	return (unsigned)t->task < filters.n ? &filters.cg[t->task] : NULL;
}

/*
 * The masks stop the paths a task knows; another task of the same user
 * still reaches a masked GPU through /proc/PID/root of a task that sees
 * it. The kernel's device check stops every path, so the hidden GPUs are
 * also denied to the task's cgroup. What cannot be filtered is said in
 * slurmd's log; the masks still hold.
 */
int phx_isolate_task_post_fork(spank_t sp, const struct phx_conf *conf,
			       const struct phx_job_opts *opts)
{
	static struct bus_dirs buses;
	struct phx_devfilter *slot;
	struct phx_gpus hidden;
	struct task_info t;
	char dir[PATH_MAX], name[96], why[512];
	dev_t deny[PHX_GPU_MAX];
	uint32_t global;
	pid_t pid;
	int rc;

	if (opts->isolate == PHX_ISOLATE_OFF)
		return 0;
	quiet = true;
	rc = decide(sp, conf, opts, &t, &hidden, dir, sizeof(dir), &buses);
	quiet = false;
	/* A task whose decision failed is refused in task_init_privileged already. */
	if (rc < 0 || !hidden.n)
		return 0;
	if (spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_GLOBAL_ID, &global) != ESPANK_SUCCESS)
		return fail("Slurm did not tell task %d's process id", t.task);
	slot = filter_slot(&t);
	if (!slot)
		return fail("no memory for task %d's device filter", t.task);
	for (unsigned i = 0; i < hidden.n; i++)
		deny[i] = gpu_rdev[hidden.id[i]];
	snprintf(name, sizeof(name), "phalanx-%u.%u.%u", t.job_id, t.step_id, global);
	if (phx_devfilter_apply(pid, deny, hidden.n, name, slot, why, sizeof(why)) < 0)
		phx_warn("isolation: job %u task %u: GPUs are masked but not filtered: %s; a task "
			 "can still open another task's GPU through /proc/PID/root. Run slurmd "
			 "where it may load BPF programs into a cgroup-v2 hierarchy",
			 t.job_id, global, why);
	return 0;
}

static void release_filter(struct phx_devfilter *f)
{
	if (phx_devfilter_release(f) < 0)
		phx_debug("isolation: cgroup %s stays until its last process ends: %s", f->cgroup,
			  strerror(errno));
}

void phx_isolate_task_exit(spank_t sp)
{
	int task;

	/* The chain stays: a process the task left behind still needs the site's rules. */
	if (filters.cg && spank_get_item(sp, S_TASK_ID, &task) == ESPANK_SUCCESS && task >= 0 &&
	    (unsigned)task < filters.n && filters.cg[task].cgroup[0] &&
	    !rmdir(filters.cg[task].cgroup))
		filters.cg[task].cgroup[0] = '\0';
}

void phx_isolate_step_end(void)
{
	for (unsigned i = 0; i < filters.n; i++)
		release_filter(&filters.cg[i]);
	free(filters.cg);
	memset(&filters, 0, sizeof(filters));
}

int phx_isolate_task_env(spank_t sp)
{
	char cur[ENV_LEN], out[ENV_LEN];
	spank_err_t rc;
	int n;

	if (!iso.active)
		return 0;
	rc = spank_getenv(sp, "CUDA_VISIBLE_DEVICES", cur, sizeof(cur));
	if (rc != ESPANK_SUCCESS || !strcmp(cur, iso.cvd))
		return 0; /* Slurm did not bind the task to some of the GPUs */
	n = phx_gpus_cuda(cur, iso.slurm_cvd, &iso.alloc, &iso.visible, out, sizeof(out));
	if (n < 0)
		return fail("cannot renumber the task's CUDA_VISIBLE_DEVICES=%.64s (the step's "
			    "was %.64s)",
			    cur, iso.slurm_cvd);
	if (!n) {
		/* --phx-isolate=task chose other GPUs than Slurm's --gpu-bind did. */
		phx_warn("isolation: Slurm bound task %d to CUDA_VISIBLE_DEVICES=%s, which "
			 "--phx-isolate=task hides from it; it keeps its own GPUs",
			 iso.task, cur);
		snprintf(out, sizeof(out), "%s", iso.cvd);
	}
	rc = spank_setenv(sp, "CUDA_VISIBLE_DEVICES", out, 1);
	if (rc != ESPANK_SUCCESS)
		return fail("cannot set CUDA_VISIBLE_DEVICES: %s", spank_strerror(rc));
	return 0;
}

const char *phx_isolate_node_cvd(void)
{
	return iso.active ? iso.cvd : iso.slurm_cvd;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node health checks; see health.h for what they promise. One function per
 * check, each filling one struct phx_health_result. The checks share a
 * deadline (health.timeout); the NVML and free-space checks run in a child
 * process that is killed at the deadline.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/gpulist.h"
#include "health/health.h"
#include "common/file.h"

#define NVML_DEFAULT_LIB "libnvidia-ml.so.1"
#define GIB (1024.0 * 1024 * 1024)
/* Symlinks followed in one path, as the kernel's own limit. */
#define MAX_LINKS 40
#define MAX_ARGS 32
#define NODE_NAME_MAX 64

struct run {
	const struct phx_conf *conf;
	const struct phx_health_ctx *ctx;
	struct timespec deadline; /* CLOCK_MONOTONIC */
};

/* Collects the problems one check finds: the first is the reason. */
struct problems {
	char first[PHX_HEALTH_TEXT];
	const char *hint;
	unsigned n;
};

static void set_result(struct phx_health_result *r, enum phx_health_status status, const char *hint,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void set_result(struct phx_health_result *r, enum phx_health_status status, const char *hint,
		       const char *fmt, ...)
{
	va_list ap;

	r->status = status;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	snprintf(r->hint, sizeof(r->hint), "%s", status == PHX_HEALTH_FAIL && hint ? hint : "");
}

static void add_problem(struct problems *p, const char *hint, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void add_problem(struct problems *p, const char *hint, const char *fmt, ...)
{
	va_list ap;

	if (p->n++)
		return;
	va_start(ap, fmt);
	vsnprintf(p->first, sizeof(p->first), fmt, ap);
	va_end(ap);
	p->hint = hint;
}

/* Fails r with the first problem, "(and N more)" when there are others. */
static void fail_with(struct phx_health_result *r, const struct problems *p)
{
	if (p->n > 1)
		set_result(r, PHX_HEALTH_FAIL, p->hint, "%s (and %u more)", p->first, p->n - 1);
	else
		set_result(r, PHX_HEALTH_FAIL, p->hint, "%s", p->first);
}

/* snprintf for paths: -1 when the result does not fit. */
static int pathf(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int pathf(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static long ms_left(const struct run *run)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (run->deadline.tv_sec - now.tv_sec) * 1000L +
	       (run->deadline.tv_nsec - now.tv_nsec) / 1000000L;
}

const char *phx_health_status_name(enum phx_health_status status)
{
	switch (status) {
	case PHX_HEALTH_PASS:
		return "pass";
	case PHX_HEALTH_FAIL:
		return "fail";
	case PHX_HEALTH_SKIP:
		return "skip";
	}
	return "unknown";
}

const struct phx_health_result *phx_health_find(const struct phx_health_report *rep,
						const char *name)
{
	for (size_t i = 0; i < rep->n; i++) {
		if (!strcmp(rep->results[i].name, name))
			return &rep->results[i];
	}
	return NULL;
}

/* ------------------------------------------------------------ patterns */

/* A node name goes into paths: plain host name characters only. */
static bool node_name_ok(const char *s)
{
	size_t len = s ? strlen(s) : 0;

	if (!len || len > NODE_NAME_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789.-_") == len;
}

/* %u, %j and %n from the values given; NULL means "not known here". */
static int expand(const char *pattern, const char *u, const char *j, const char *n, char *out,
		  size_t len)
{
	size_t used = 0;

	for (const char *p = pattern; *p; p++) {
		const char *add = NULL;
		char c[2] = { *p, '\0' };
		size_t alen;

		if (*p != '%') {
			add = c;
		} else {
			switch (*++p) {
			case '%':
				add = "%";
				break;
			case 'u':
				add = u;
				break;
			case 'j':
				add = j;
				break;
			case 'n':
				if (n && !node_name_ok(n))
					return -EINVAL;
				add = n;
				break;
			default:
				return -EINVAL;
			}
			if (!add)
				return -ENOENT;
		}
		alen = strlen(add);
		if (used + alen >= len)
			return -ENAMETOOLONG;
		memcpy(out + used, add, alen);
		used += alen;
	}
	if (!len)
		return -ENAMETOOLONG;
	out[used] = '\0';
	return 0;
}

int phx_health_expand(const char *pattern, const struct phx_health_ctx *ctx, char *out, size_t len)
{
	char uid[16], job[16];

	snprintf(uid, sizeof(uid), "%u", (unsigned)ctx->uid);
	snprintf(job, sizeof(job), "%u", (unsigned)ctx->job_id);
	return expand(pattern, ctx->have_uid ? uid : NULL, ctx->job_id ? job : NULL, ctx->node, out,
		      len);
}

/* root (which may hold %n) + path; a root of "/" leaves path as it is. */
static int rooted(const struct run *run, const char *root, const char *path, char *out, size_t len)
{
	char r[PATH_MAX];
	size_t rlen;
	int rc = expand(root, NULL, NULL, run->ctx->node, r, sizeof(r));

	if (rc < 0)
		return rc;
	rlen = strlen(r);
	while (rlen && r[rlen - 1] == '/')
		r[--rlen] = '\0';
	if ((size_t)snprintf(out, len, "%s%s", r, path) >= len)
		return -ENAMETOOLONG;
	return 0;
}

static const char *root_problem(int rc)
{
	return rc == -ENOENT   ? "it uses %n but the node name is not known (pass --node)"
	       : rc == -EINVAL ? "the node name is not a plain host name"
			       : "the path is too long";
}

/*
 * The GPUs to check: the job's and, with health.gpu_count, 0..count-1.
 * Returns how many are set in want, or -1 when SLURM_JOB_GPUS is garbage.
 */
static int wanted_gpus(const struct run *run, bool want[PHX_HEALTH_MAX_GPUS])
{
	const char *list = run->ctx->job_gpus;
	struct phx_gpus gpus = { 0 };
	int count = 0;

	memset(want, 0, PHX_HEALTH_MAX_GPUS * sizeof(want[0]));
	if (list && *list && phx_gpus_parse(list, &gpus, NULL, 0) < 0)
		return -1;
	for (unsigned i = 0; i < gpus.n; i++)
		want[gpus.id[i]] = true;
	for (int i = 0; i < run->conf->health.gpu_count; i++)
		want[i] = true;
	for (int i = 0; i < PHX_HEALTH_MAX_GPUS; i++)
		count += want[i];
	return count;
}

/* slurmd's SLURM_JOB_GPUS is not a list: not the node's fault. */
static void skip_bad_gpus(const struct run *run, struct phx_health_result *r)
{
	set_result(r, PHX_HEALTH_SKIP, NULL, "SLURM_JOB_GPUS='%.64s' is not a GPU index list",
		   run->ctx->job_gpus);
}

/* ------------------------------------------------------------ gpu */

static const char *file_kind(mode_t mode)
{
	return S_ISREG(mode)	? "a regular file"
	       : S_ISDIR(mode)	? "a directory"
	       : S_ISBLK(mode)	? "a block device"
	       : S_ISFIFO(mode) ? "a FIFO"
	       : S_ISSOCK(mode) ? "a socket"
				: "not a device";
}

static void gpu_file(const struct run *run, unsigned i, struct problems *p, const char *hint)
{
	char num[16], rel[PATH_MAX], path[PATH_MAX];
	struct stat st;
	int rc;

	snprintf(num, sizeof(num), "%u", i);
	rc = expand(run->conf->health.gpu_device, num, NULL, NULL, rel, sizeof(rel));
	if (rc == 0)
		rc = rooted(run, run->conf->health.dev_root, rel, path, sizeof(path));
	if (rc < 0) {
		add_problem(p, "fix health.gpu_device and health.dev_root in phalanx.yaml",
			    "GPU %u: no device path: %s", i, root_problem(rc));
		return;
	}
	/* /dev belongs to root and udev: following a symlink there is fine. */
	if (stat(path, &st) < 0)
		add_problem(p, hint, "GPU %u: %s: %s", i, path,
			    errno == ENOENT ? "missing" : strerror(errno));
	else if (!S_ISCHR(st.st_mode))
		add_problem(p, hint, "GPU %u: %s is %s, not a character device", i, path,
			    file_kind(st.st_mode));
}

static void check_gpu(const struct run *run, struct phx_health_result *r)
{
	static const char hint[] = "the GPU is gone or its driver is not loaded: run nvidia-smi "
				   "and look for Xid errors in dmesg; check gres.conf File=";
	bool want[PHX_HEALTH_MAX_GPUS];
	struct problems p = { .n = 0 };
	int n;

	if (!run->conf->health.gpu_device[0]) {
		set_result(r, PHX_HEALTH_SKIP, NULL, "health.gpu_device is \"\"");
		return;
	}
	n = wanted_gpus(run, want);
	if (n < 0) {
		skip_bad_gpus(run, r);
		return;
	}
	if (n == 0) {
		set_result(r, PHX_HEALTH_SKIP, NULL,
			   "no GPUs to check (the job has none and "
			   "health.gpu_count is 0)");
		return;
	}
	for (unsigned i = 0; i < PHX_HEALTH_MAX_GPUS; i++) {
		if (want[i])
			gpu_file(run, i, &p, hint);
	}
	if (p.n)
		fail_with(r, &p);
	else
		set_result(r, PHX_HEALTH_PASS, NULL, "%d GPU device file%s present", n,
			   n == 1 ? "" : "s");
}

/* ------------------------------------------------------------ child runs */

/* Reads up to len bytes until EOF or the deadline; returns bytes read. */
static size_t read_until(const struct run *run, int fd, void *buf, size_t len, bool *late)
{
	char *p = buf;
	size_t got = 0;

	*late = false;
	while (got < len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long left = ms_left(run);
		ssize_t n;
		int rc;

		if (left <= 0) {
			*late = true;
			break;
		}
		rc = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0) {
			*late = rc == 0;
			break;
		}
		n = read(fd, p + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* How long a killed child may take to go; one stuck in the kernel (a hard
 * NFS mount) is left behind rather than hanging the prolog with it. */
#define REAP_GRACE_MS 2000

static bool reap(pid_t pid, int *status)
{
	for (int waited = 0; waited <= REAP_GRACE_MS; waited += 10) {
		pid_t rc = waitpid(pid, status, WNOHANG);

		if (rc == pid || (rc < 0 && errno != EINTR))
			return rc == pid;
		poll(NULL, 0, 10);
	}
	return false;
}

static void describe_status(int status, char *out, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status))
		snprintf(out, len, "exit status %d", WEXITSTATUS(status));
	else
		snprintf(out, len, "wait status 0x%x", status);
}

typedef void (*check_fn)(const struct run *run, struct phx_health_result *r);

/*
 * Runs fn in a child and takes its result through a pipe. A child that is
 * still busy at the deadline is killed; one that dies without a result
 * (a crashing library) fails the check instead of its caller.
 */
static void run_in_child(const struct run *run, struct phx_health_result *r, check_fn fn)
{
	struct phx_health_result got;
	int pfd[2], status = 0;
	bool late = false;
	size_t n;
	pid_t pid;

	if (ms_left(run) <= 0) {
		set_result(r, PHX_HEALTH_FAIL, "raise health.timeout, or find what is slow",
			   "not run: the checks before it used up health.timeout (%d s)",
			   run->conf->health.timeout_s);
		return;
	}
	if (pipe2(pfd, O_CLOEXEC) < 0)
		goto no_child;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(pfd[0]);
		close(pfd[1]);
		errno = e;
		goto no_child;
	}
	if (pid == 0) {
		close(pfd[0]);
		fn(run, r);
		_exit(phx_write_all(pfd[1], r, sizeof(*r)) ? 1 : 0);
	}
	close(pfd[1]);
	n = read_until(run, pfd[0], &got, sizeof(got), &late);
	close(pfd[0]);
	if (n != sizeof(got))
		kill(pid, SIGKILL);
	if (!reap(pid, &status))
		status = W_EXITCODE(0, SIGKILL);
	if (n == sizeof(got)) {
		got.reason[sizeof(got.reason) - 1] = '\0';
		got.hint[sizeof(got.hint) - 1] = '\0';
		r->status = got.status <= PHX_HEALTH_SKIP ? got.status : PHX_HEALTH_FAIL;
		memcpy(r->reason, got.reason, sizeof(r->reason));
		memcpy(r->hint, got.hint, sizeof(r->hint));
	} else if (late) {
		set_result(r, PHX_HEALTH_FAIL,
			   "something on the node hangs (a file system, the "
			   "GPU driver); raise health.timeout if it is only slow",
			   "did not finish within health.timeout (%d s); killed",
			   run->conf->health.timeout_s);
	} else {
		char how[96];

		describe_status(status, how, sizeof(how));
		set_result(r, PHX_HEALTH_FAIL,
			   "the driver library or the kernel is in trouble; "
			   "look at dmesg",
			   "the check process ended without a result (%s)", how);
	}
	return;
no_child:
	set_result(r, PHX_HEALTH_FAIL, "the node is short of processes or memory",
		   "cannot start the check: %s", strerror(errno));
}

/* ------------------------------------------------------------ nvml */

/* The few NVML calls used, from nvml.h; the library is only dlopen()ed. */
enum {
	NVML_SUCCESS = 0,
	NVML_FEATURE_ENABLED = 1,
	NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
	NVML_VOLATILE_ECC = 0,
	NVML_NVLINK_MAX_LINKS = 18,
};

typedef struct nvml_device *nvml_device_t;

struct nvml {
	void *lib;
	int (*init)(void);
	int (*shutdown)(void);
	const char *(*error_string)(int);
	int (*count)(unsigned *);
	int (*handle)(unsigned, nvml_device_t *);
	int (*minor)(nvml_device_t, unsigned *);
	int (*ecc)(nvml_device_t, int, int, unsigned long long *);
	int (*pages_pending)(nvml_device_t, int *);
	int (*remapped)(nvml_device_t, unsigned *, unsigned *, unsigned *, unsigned *);
	int (*nvlink)(nvml_device_t, unsigned, int *);
};

static const char *nvml_err(const struct nvml *nv, int rc)
{
	const char *s = nv->error_string ? nv->error_string(rc) : NULL;

	return s ? s : "unknown NVML error";
}

static int nvml_open(const char *path, struct nvml *nv, char *why, size_t whylen)
{
	memset(nv, 0, sizeof(*nv));
	nv->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!nv->lib) {
		snprintf(why, whylen, "%s", dlerror());
		return -1;
	}
	*(void **)&nv->init = dlsym(nv->lib, "nvmlInit_v2");
	*(void **)&nv->shutdown = dlsym(nv->lib, "nvmlShutdown");
	*(void **)&nv->error_string = dlsym(nv->lib, "nvmlErrorString");
	*(void **)&nv->count = dlsym(nv->lib, "nvmlDeviceGetCount_v2");
	*(void **)&nv->handle = dlsym(nv->lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&nv->minor = dlsym(nv->lib, "nvmlDeviceGetMinorNumber");
	*(void **)&nv->ecc = dlsym(nv->lib, "nvmlDeviceGetTotalEccErrors");
	*(void **)&nv->pages_pending = dlsym(nv->lib, "nvmlDeviceGetRetiredPagesPendingStatus");
	*(void **)&nv->remapped = dlsym(nv->lib, "nvmlDeviceGetRemappedRows");
	*(void **)&nv->nvlink = dlsym(nv->lib, "nvmlDeviceGetNvLinkState");
	if (!nv->init || !nv->shutdown || !nv->count || !nv->handle) {
		snprintf(why, whylen,
			 "%s lacks nvmlInit_v2 or nvmlDeviceGetCount_v2 (driver "
			 "too old)",
			 path);
		return -1;
	}
	return 0;
}

/* Counts a GPU's NVLinks: *up active, *down present but inactive. */
static void nvlink_count(const struct nvml *nv, nvml_device_t dev, unsigned *up, unsigned *down)
{
	*up = *down = 0;
	for (unsigned l = 0; nv->nvlink && l < NVML_NVLINK_MAX_LINKS; l++) {
		int active = 0;

		/* Links a GPU does not have answer with an error: not counted. */
		if (nv->nvlink(dev, l, &active) != NVML_SUCCESS)
			continue;
		if (active == NVML_FEATURE_ENABLED)
			(*up)++;
		else
			(*down)++;
	}
}

static const char nvml_hint[] = "see nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER and "
				"nvidia-smi nvlink -s; pending retirements need a GPU reset, "
				"Xid errors are in dmesg";

/* ECC, retired pages and row remapping of one GPU. */
static void nvml_memory(const struct nvml *nv, nvml_device_t dev, unsigned id, struct problems *p)
{
	unsigned long long ecc = 0;
	unsigned corr = 0, unc = 0, pending = 0, failed = 0;
	int pages = 0;

	/* NOT_SUPPORTED (no ECC, older GPUs) is fine: only SUCCESS counts. */
	if (nv->ecc &&
	    nv->ecc(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) ==
		    NVML_SUCCESS &&
	    ecc)
		add_problem(p, nvml_hint,
			    "GPU %u: %llu uncorrectable ECC error%s since the "
			    "driver loaded",
			    id, ecc, ecc == 1 ? "" : "s");
	if (nv->pages_pending && nv->pages_pending(dev, &pages) == NVML_SUCCESS &&
	    pages == NVML_FEATURE_ENABLED)
		add_problem(p, nvml_hint, "GPU %u: retired memory pages are pending", id);
	if (nv->remapped && nv->remapped(dev, &corr, &unc, &pending, &failed) == NVML_SUCCESS) {
		if (failed)
			add_problem(p, nvml_hint, "GPU %u: memory row remapping failed", id);
		else if (pending)
			add_problem(p, nvml_hint, "GPU %u: memory row remapping is pending", id);
	}
}

struct nvml_gpu {
	nvml_device_t dev;
	unsigned id; /* minor number: the N of /dev/nvidiaN */
	unsigned up, down;
};

/*
 * NVLink: a link that is present but down, on a GPU that has others up,
 * or a GPU with fewer links up than its peers, is a broken link.
 */
static void nvml_links(const struct nvml_gpu *g, size_t n, struct problems *p)
{
	unsigned most = 0;

	for (size_t i = 0; i < n; i++)
		most = g[i].up > most ? g[i].up : most;
	for (size_t i = 0; i < n; i++) {
		if ((g[i].down && g[i].up) || g[i].up < most)
			add_problem(p, nvml_hint,
				    "GPU %u: %u NVLinks up and %u down, its peers "
				    "have %u up",
				    g[i].id, g[i].up, g[i].down, most);
	}
}

/*
 * Opens the GPUs to check: the wanted ones, by minor number (the N of
 * /dev/nvidiaN, as Slurm lists them), or all of them. A wanted GPU that
 * NVML does not see is a problem too.
 */
static size_t nvml_gpus(const struct run *run, const struct nvml *nv, unsigned count,
			const bool *want, struct nvml_gpu *g, struct problems *p)
{
	bool check_all = run->ctx->all_gpus || run->conf->health.gpu_count > 0;
	bool seen[PHX_HEALTH_MAX_GPUS] = { false };
	size_t n = 0;

	for (unsigned i = 0; i < count && n < PHX_HEALTH_MAX_GPUS; i++) {
		nvml_device_t dev;
		unsigned minor = i;
		int rc = nv->handle(i, &dev);

		if (rc != NVML_SUCCESS) {
			add_problem(p, nvml_hint, "GPU at NVML index %u: %s", i, nvml_err(nv, rc));
			continue;
		}
		if (nv->minor && nv->minor(dev, &minor) != NVML_SUCCESS)
			minor = i;
		if (minor < PHX_HEALTH_MAX_GPUS)
			seen[minor] = true;
		if (!check_all && (minor >= PHX_HEALTH_MAX_GPUS || !want[minor]))
			continue;
		g[n].dev = dev;
		g[n].id = minor;
		nvlink_count(nv, dev, &g[n].up, &g[n].down);
		n++;
	}
	for (unsigned i = 0; i < PHX_HEALTH_MAX_GPUS; i++) {
		if (want[i] && !seen[i])
			add_problem(p,
				    "the GPU fell off the bus or the driver lost it: see "
				    "nvidia-smi and dmesg",
				    "GPU %u is not among the %u GPUs NVML "
				    "sees",
				    i, count);
	}
	return n;
}

static void nvml_devices(const struct run *run, const struct nvml *nv, unsigned count,
			 struct phx_health_result *r)
{
	static struct nvml_gpu g[PHX_HEALTH_MAX_GPUS];
	bool want[PHX_HEALTH_MAX_GPUS];
	int gpu_count = run->conf->health.gpu_count;
	struct problems p = { .n = 0 };
	size_t n;

	wanted_gpus(run, want);
	if (gpu_count && count != (unsigned)gpu_count)
		add_problem(&p,
			    "a GPU fell off the bus or the driver lost it: see nvidia-smi "
			    "and dmesg",
			    "NVML sees %u GPUs, health.gpu_count is %d", count, gpu_count);
	n = nvml_gpus(run, nv, count, want, g, &p);
	for (size_t i = 0; i < n; i++)
		nvml_memory(nv, g[i].dev, g[i].id, &p);
	nvml_links(g, n, &p);
	if (p.n)
		fail_with(r, &p);
	else
		set_result(r, PHX_HEALTH_PASS, NULL,
			   "%zu GPU%s healthy (ECC, retired pages, "
			   "row remapping, NVLink)",
			   n, n == 1 ? "" : "s");
}

/* In the child: a crash or a hang in the driver library stays here. */
static void nvml_child(const struct run *run, struct phx_health_result *r)
{
	const char *lib = run->ctx->nvml_lib ? run->ctx->nvml_lib : NVML_DEFAULT_LIB;
	struct nvml nv;
	char why[PHX_HEALTH_TEXT];
	unsigned count = 0;
	int rc;

	if (nvml_open(lib, &nv, why, sizeof(why)) < 0) {
		/* No driver library: a node without NVIDIA GPUs, not a fault. */
		set_result(r, PHX_HEALTH_SKIP, NULL, "NVML not available: %s", why);
		if (nv.lib)
			dlclose(nv.lib);
		return;
	}
	rc = nv.init();
	if (rc != NVML_SUCCESS) {
		set_result(r, PHX_HEALTH_FAIL,
			   "the library is there but the driver does not "
			   "answer: check nvidia-smi, the kernel module and dmesg",
			   "nvmlInit: %s", nvml_err(&nv, rc));
		return;
	}
	rc = nv.count(&count);
	if (rc != NVML_SUCCESS)
		set_result(r, PHX_HEALTH_FAIL, nvml_hint, "nvmlDeviceGetCount: %s",
			   nvml_err(&nv, rc));
	else
		nvml_devices(run, &nv, count, r);
	nv.shutdown();
}

static void check_nvml(const struct run *run, struct phx_health_result *r)
{
	bool want[PHX_HEALTH_MAX_GPUS];
	int n = wanted_gpus(run, want);

	if (n == 0 && !run->ctx->all_gpus) {
		set_result(r, PHX_HEALTH_SKIP, NULL,
			   "no GPUs to check (the job has none and "
			   "health.gpu_count is 0)");
		return;
	}
	if (n < 0) {
		skip_bad_gpus(run, r);
		return;
	}
	run_in_child(run, r, nvml_child);
}

/* ------------------------------------------------------------ ib */

/* Reads a small sysfs attribute, without its trailing newline. */
static int read_attr(const char *path, char *buf, size_t len)
{
	/* O_NONBLOCK: a FIFO planted in a fake tree must not hang the check. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	/* It ends up in logs and in the node's drain reason. */
	for (char *c = buf; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	}
	return 0;
}

static int no_dots(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

struct ib_scan {
	const struct phx_conf *conf;
	struct problems p;
	unsigned ports;
	double lowest;
};

static void ib_port(struct ib_scan *s, const char *dir, const char *dev, const char *port)
{
	static const char cable[] = "check the cable and the switch port (ibstat; "
				    "ibportstate), then resume the node";
	char path[PATH_MAX], state[64], rate[64];
	int min = s->conf->health.ib_min_rate_gbps;
	double gbps;
	int rc;

	s->ports++;
	rc = pathf(path, sizeof(path), "%s/%s/ports/%s/state", dir, dev, port)
		     ? -ENAMETOOLONG
		     : read_attr(path, state, sizeof(state));
	if (rc < 0) {
		add_problem(&s->p, cable, "%s port %s: cannot read its state: %s", dev, port,
			    strerror(-rc));
		return;
	}
	if (strcmp(state, "4: ACTIVE")) {
		add_problem(&s->p, cable, "%s port %s is '%s', not '4: ACTIVE'", dev, port, state);
		return;
	}
	if (pathf(path, sizeof(path), "%s/%s/ports/%s/rate", dir, dev, port) ||
	    read_attr(path, rate, sizeof(rate)) < 0 || sscanf(rate, "%lf", &gbps) != 1) {
		if (min)
			add_problem(&s->p, cable, "%s port %s: cannot read its rate", dev, port);
		return;
	}
	if (s->lowest < 0 || gbps < s->lowest)
		s->lowest = gbps;
	if (min && !(gbps >= min)) /* a NaN is no rate either */
		add_problem(&s->p,
			    "the link trained below its speed: reseat or replace the cable "
			    "(ibstat shows the rate)",
			    "%s port %s runs at %g Gb/s, below "
			    "health.ib_min_rate_gbps %d",
			    dev, port, gbps, min);
}

static void ib_device(struct ib_scan *s, const char *dir, const char *dev)
{
	struct dirent **ports;
	char path[PATH_MAX];
	int n;

	n = pathf(path, sizeof(path), "%s/%s/ports", dir, dev)
		    ? -1
		    : scandir(path, &ports, no_dots, alphasort);
	if (n <= 0) {
		add_problem(&s->p, "the HCA driver is in trouble: look at dmesg",
			    "%s has no ports under %s", dev, path);
		if (n == 0)
			free(ports);
		return;
	}
	for (int i = 0; i < n; i++) {
		ib_port(s, dir, dev, ports[i]->d_name);
		free(ports[i]);
	}
	free(ports);
}

static void check_ib(const struct run *run, struct phx_health_result *r)
{
	struct ib_scan s = { .conf = run->conf, .lowest = -1 };
	enum phx_tristate mode = run->conf->health.ib;
	struct dirent **devs = NULL;
	char dir[PATH_MAX];
	int rc, n;

	if (mode == PHX_TRI_FALSE) {
		set_result(r, PHX_HEALTH_SKIP, NULL, "health.ib is false");
		return;
	}
	rc = rooted(run, run->conf->health.sysfs_root, "/class/infiniband", dir, sizeof(dir));
	if (rc < 0) {
		set_result(r, PHX_HEALTH_FAIL, "fix health.sysfs_root in phalanx.yaml",
			   "health.sysfs_root: %s", root_problem(rc));
		return;
	}
	n = scandir(dir, &devs, no_dots, alphasort);
	if (n <= 0) {
		if (n == 0)
			free(devs);
		if (mode == PHX_TRI_AUTO)
			set_result(r, PHX_HEALTH_SKIP, NULL, "no InfiniBand devices under %s", dir);
		else
			set_result(r, PHX_HEALTH_FAIL,
				   "load the HCA driver (modprobe mlx5_ib), or "
				   "set health.ib: auto for nodes without InfiniBand",
				   "no InfiniBand device under %s (health.ib is true)", dir);
		return;
	}
	for (int i = 0; i < n; i++) {
		ib_device(&s, dir, devs[i]->d_name);
		free(devs[i]);
	}
	free(devs);
	if (s.p.n)
		fail_with(r, &s.p);
	else if (s.lowest >= 0)
		set_result(r, PHX_HEALTH_PASS, NULL, "%u port%s ACTIVE, lowest rate %g Gb/s",
			   s.ports, s.ports == 1 ? "" : "s", s.lowest);
	else
		set_result(r, PHX_HEALTH_PASS, NULL, "%u port%s ACTIVE", s.ports,
			   s.ports == 1 ? "" : "s");
}

/* ------------------------------------------------------------ disk */

/* Makes target + rest the path still to walk; rest starts with '/' or is "". */
static int splice_link(char *walk, size_t len, const char *target, const char *rest)
{
	char tmp[PATH_MAX * 2];

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s%s", target, rest) >= len)
		return -ENAMETOOLONG;
	strcpy(walk, tmp);
	return 0;
}

/*
 * Opens an absolute path as an O_PATH directory, one component at a time
 * with O_NOFOLLOW. A symlink is followed only when root owns it: no user
 * can make one, so a symlink a user planted stops the walk with -EPERM and
 * why names it. With allow_missing, a missing component ends the walk at
 * the deepest existing directory (*partial): a directory made there later
 * lands on that file system. Nothing is ever created.
 */
static int open_dir_nofollow(const char *path, bool allow_missing, bool *partial, char *why,
			     size_t whylen)
{
	char walk[PATH_MAX * 2], name[NAME_MAX + 1], target[PATH_MAX];
	const char *p = walk;
	int dirfd, links = 0, err;

	*partial = false;
	if (strlen(path) >= sizeof(walk))
		return -ENAMETOOLONG;
	strcpy(walk, path);
	dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	for (;;) {
		struct stat st;
		size_t len;
		ssize_t tlen;
		int fd;

		p += strspn(p, "/");
		len = strcspn(p, "/");
		if (!len)
			return dirfd;
		if (len > NAME_MAX) {
			err = -ENAMETOOLONG;
			goto fail;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		p += len;
		fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			close(dirfd);
			dirfd = fd;
			continue;
		}
		err = -errno;
		if (err == -ENOENT && allow_missing) {
			*partial = true;
			return dirfd;
		}
		if (err != -ENOTDIR && err != -ELOOP)
			goto fail;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			err = -errno;
			goto fail;
		}
		if (!S_ISLNK(st.st_mode)) {
			err = -ENOTDIR;
			goto fail;
		}
		if (st.st_uid != 0) {
			snprintf(why, whylen, "'%.64s' is a symlink owned by uid %u", name,
				 (unsigned)st.st_uid);
			err = -EPERM;
			goto fail;
		}
		tlen = readlinkat(dirfd, name, target, sizeof(target) - 1);
		if (tlen < 0 || ++links > MAX_LINKS) {
			err = tlen < 0 ? -errno : -ELOOP;
			goto fail;
		}
		target[tlen] = '\0';
		err = splice_link(walk, sizeof(walk), target, p);
		if (err < 0)
			goto fail;
		p = walk;
		if (target[0] == '/') {
			close(dirfd);
			dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (dirfd < 0)
				return -errno;
		}
	}
fail:
	close(dirfd);
	return err;
}

/* The directory part of pattern before its first expansion: admin's, must exist. */
static void fixed_prefix(const char *pattern, char *out, size_t len)
{
	const char *pct = strchr(pattern, '%');
	size_t n = pct ? (size_t)(pct - pattern) : strlen(pattern);

	while (pct && n && pattern[n - 1] != '/')
		n--;
	if (n >= len)
		n = len - 1;
	memcpy(out, pattern, n);
	out[n] = '\0';
}

struct disk_scan {
	struct problems p;
	unsigned checked;
	char skipped[PHX_HEALTH_TEXT];
	unsigned n_skipped;
	double lowest;
	char lowest_path[128];
};

static void disk_skip(struct disk_scan *s, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void disk_skip(struct disk_scan *s, const char *path, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	if (s->n_skipped++)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(s->skipped, sizeof(s->skipped), "%.90s: %s", path, what);
}

/* Errors that say the file system itself is broken, not the user's tree. */
static bool fs_broken(int err)
{
	return err == -EIO || err == -ESTALE || err == -ENOTCONN || err == -EHOSTDOWN ||
	       err == -ETIMEDOUT;
}

static void disk_path(const struct run *run, struct disk_scan *s, const char *pattern)
{
	static const char gone[] = "mount the file system, or fix health.paths";
	char path[PATH_MAX], fixed[PATH_MAX], why[PHX_HEALTH_TEXT] = "";
	double need = run->conf->health.min_free_gb, free_gib;
	struct statvfs sv;
	bool partial;
	int fd, rc;

	/* The part before %u/%j is the admin's: missing means not mounted. */
	fixed_prefix(pattern, fixed, sizeof(fixed));
	if (fixed[0]) {
		fd = open_dir_nofollow(fixed, false, &partial, why, sizeof(why));
		if (fd == -ENOENT || fs_broken(fd)) {
			add_problem(&s->p, gone, "%s: %s", fixed,
				    fd == -ENOENT ? "does not exist" : strerror(-fd));
			return;
		}
		if (fd >= 0)
			close(fd);
	}
	rc = phx_health_expand(pattern, run->ctx, path, sizeof(path));
	if (rc < 0) {
		disk_skip(s, pattern, "%s",
			  rc == -ENOENT ? "not checked without a job"
					: "cannot expand the pattern");
		return;
	}
	fd = open_dir_nofollow(path, true, &partial, why, sizeof(why));
	if (fd < 0) {
		if (fs_broken(fd))
			add_problem(&s->p, gone, "%s: %s", path, strerror(-fd));
		else if (fd == -EPERM)
			disk_skip(s, path, "not checked: %s (root never follows it)", why);
		else
			disk_skip(s, path, "not checked: %s", strerror(-fd));
		return;
	}
	rc = fstatvfs(fd, &sv);
	close(fd);
	if (rc < 0) {
		add_problem(&s->p, gone, "%s: statvfs: %s", path, strerror(errno));
		return;
	}
	s->checked++;
	/* f_bavail: what the job, not root, may still write. */
	free_gib = (double)sv.f_bavail * (double)sv.f_frsize / GIB;
	if (s->lowest < 0 || free_gib < s->lowest) {
		s->lowest = free_gib;
		snprintf(s->lowest_path, sizeof(s->lowest_path), "%.127s", path);
	}
	if (free_gib < need)
		add_problem(&s->p, "free space on that file system, or lower health.min_free_gb",
			    "%s: %.1f GiB free, health.min_free_gb is %d", path, free_gib,
			    run->conf->health.min_free_gb);
}

static void disk_child(const struct run *run, struct phx_health_result *r)
{
	const struct phx_strlist *paths = &run->conf->health.paths;
	struct disk_scan s = { .lowest = -1 };

	for (size_t i = 0; i < paths->n; i++)
		disk_path(run, &s, paths->items[i]);
	if (s.p.n)
		fail_with(r, &s.p);
	else if (!s.checked)
		set_result(r, PHX_HEALTH_SKIP, NULL, "%s", s.skipped);
	else if (s.n_skipped)
		set_result(r, PHX_HEALTH_PASS, NULL,
			   "%.1f GiB free on %.80s%s; %u not checked: "
			   "%.100s",
			   s.lowest, s.lowest_path, s.checked > 1 ? ", the fullest" : "",
			   s.n_skipped, s.skipped);
	else
		set_result(r, PHX_HEALTH_PASS, NULL, "%.1f GiB free on %.100s%s", s.lowest,
			   s.lowest_path, s.checked > 1 ? ", the fullest" : "");
}

static void check_disk(const struct run *run, struct phx_health_result *r)
{
	if (!run->conf->health.min_free_gb) {
		set_result(r, PHX_HEALTH_SKIP, NULL, "health.min_free_gb is 0");
		return;
	}
	if (!run->conf->health.paths.n) {
		set_result(r, PHX_HEALTH_SKIP, NULL, "health.paths is empty");
		return;
	}
	/* A hung NFS or Lustre mount blocks statvfs: bounded in a child. */
	run_in_child(run, r, disk_child);
}

/* ------------------------------------------------------------ command */

/*
 * The program runs as root: it, and the directory it is in, must belong to
 * root (or to whoever runs the checks) and be writable by nobody else.
 */
static int trusted_program(const char *path, char *why, size_t whylen)
{
	char dir[PATH_MAX];
	struct stat st;
	uid_t me = geteuid();
	char *slash;

	if (stat(path, &st) < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR)) {
		snprintf(why, whylen, "not an executable file");
		return -1;
	}
	if ((st.st_uid != 0 && st.st_uid != me) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(why, whylen,
			 "owned by uid %u with mode %04o; it must belong to root "
			 "and be writable only by root",
			 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash) {
		snprintf(why, whylen, "not an absolute path");
		return -1;
	}
	*(slash == dir ? slash + 1 : slash) = '\0';
	if (stat(dir, &st) < 0 || (st.st_uid != 0 && st.st_uid != me) ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(why, whylen, "its directory %.160s is writable by others than root", dir);
		return -1;
	}
	return 0;
}

static int split_args(char *line, char **argv, size_t max)
{
	size_t n = 0;

	for (char *tok = strtok(line, " \t"); tok; tok = strtok(NULL, " \t")) {
		if (n + 1 >= max)
			return -1;
		argv[n++] = tok;
	}
	argv[n] = NULL;
	return (int)n;
}

/* In the child: nothing of the caller's survives but what it was given. */
static void exec_command(char **argv, char **envp, int out_fd)
{
	char msg[PATH_MAX + 64];
	int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sigset_t none;
	int n;

	setpgid(0, 0);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
		_exit(126);
	if (close_range(3, ~0U, 0) < 0) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	}
	if (chdir("/") < 0)
		_exit(126);
	umask(022);
	execve(argv[0], argv, envp);
	n = snprintf(msg, sizeof(msg), "cannot run %s: %s\n", argv[0], strerror(errno));
	if (n > 0 && write(1, msg, (size_t)n) < 0)
		_exit(127);
	_exit(127);
}

/* Keeps the first non-empty output line, printable, in line. */
static void keep_first_line(char *line, size_t len, size_t *used, const char *buf, size_t n,
			    bool *done)
{
	for (size_t i = 0; i < n && !*done; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c == '\n') {
			*done = *used > 0;
			continue;
		}
		if (*used + 1 < len)
			line[(*used)++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	line[*used] = '\0';
}

struct cmd_out {
	char line[160];
	size_t used;
	bool line_done;
	bool late;
	int status;
};

/* Reads the output and waits for the command, killing its group at the deadline. */
static void watch_command(const struct run *run, pid_t pid, int fd, struct cmd_out *o)
{
	bool eof = false;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long left = ms_left(run);
		siginfo_t info = { .si_pid = 0 };
		char buf[512];
		ssize_t n;

		/* WNOWAIT: its zombie keeps the group id from being reused before the kill. */
		if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    info.si_pid == pid)
			break;
		if (left <= 0) {
			o->late = true;
			break;
		}
		/* Short polls: the command may exit while a grandchild keeps the pipe. */
		if (poll(eof ? NULL : &pfd, eof ? 0 : 1, left < 50 ? (int)left : 50) <= 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			eof = n == 0 || errno != EINTR;
		else
			keep_first_line(o->line, sizeof(o->line), &o->used, buf, (size_t)n,
					&o->line_done);
	}
	/* What it left behind in its process group goes with it. */
	kill(-pid, SIGKILL);
	if (!reap(pid, &o->status))
		o->status = W_EXITCODE(0, SIGKILL);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (char buf[512]; !o->line_done;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		keep_first_line(o->line, sizeof(o->line), &o->used, buf, (size_t)n, &o->line_done);
	}
}

static void command_env(const struct run *run, char **envp, char bufs[2][96])
{
	size_t n = 0;

	envp[n++] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	if (run->ctx->job_id) {
		snprintf(bufs[0], sizeof(bufs[0]), "SLURM_JOB_ID=%u", (unsigned)run->ctx->job_id);
		envp[n++] = bufs[0];
	}
	if (run->ctx->node && node_name_ok(run->ctx->node)) {
		snprintf(bufs[1], sizeof(bufs[1]), "SLURMD_NODENAME=%s", run->ctx->node);
		envp[n++] = bufs[1];
	}
	envp[n] = NULL;
}

static void command_result(const struct run *run, const char *prog, const struct cmd_out *o,
			   struct phx_health_result *r)
{
	static const char hint[] = "see what health.command checks, and its output";
	char how[96];

	if (o->late) {
		set_result(r, PHX_HEALTH_FAIL, "make it faster or raise health.timeout",
			   "%s did not finish within health.timeout (%d s); killed", prog,
			   run->conf->health.timeout_s);
		return;
	}
	if (WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0) {
		set_result(r, PHX_HEALTH_PASS, NULL, "%s exited 0", prog);
		return;
	}
	describe_status(o->status, how, sizeof(how));
	if (o->used)
		set_result(r, PHX_HEALTH_FAIL, hint, "%s (%s)", o->line, how);
	else
		set_result(r, PHX_HEALTH_FAIL, hint, "%s failed with %s and printed nothing", prog,
			   how);
}

static void check_command(const struct run *run, struct phx_health_result *r)
{
	char line[PATH_MAX], why[PHX_HEALTH_TEXT], envbuf[2][96];
	char *argv[MAX_ARGS], *envp[4];
	struct cmd_out o = { .status = 0 };
	int pfd[2];
	pid_t pid;

	if (!run->conf->health.command[0]) {
		set_result(r, PHX_HEALTH_SKIP, NULL, "health.command is not set");
		return;
	}
	snprintf(line, sizeof(line), "%s", run->conf->health.command);
	if (split_args(line, argv, MAX_ARGS) < 1) {
		set_result(r, PHX_HEALTH_FAIL, "fix health.command in phalanx.yaml",
			   "health.command has more than %d words", MAX_ARGS - 1);
		return;
	}
	if (trusted_program(argv[0], why, sizeof(why)) < 0) {
		set_result(r, PHX_HEALTH_FAIL,
			   "install it as root, mode 0755, in a directory only "
			   "root can write",
			   "refusing to run %s as root: %s", argv[0], why);
		return;
	}
	command_env(run, envp, envbuf);
	if (pipe2(pfd, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		set_result(r, PHX_HEALTH_FAIL, "the node is short of processes or memory",
			   "cannot start %s: %s", argv[0], strerror(errno));
		return;
	}
	if (pid == 0)
		exec_command(argv, envp, pfd[1]);
	close(pfd[1]);
	setpgid(pid, pid); /* also here: no race with the kill at the deadline */
	watch_command(run, pid, pfd[0], &o);
	close(pfd[0]);
	command_result(run, argv[0], &o, r);
}

/* ------------------------------------------------------------ all */

static const struct {
	const char *name;
	check_fn fn;
} checks[] = {
	{ "gpu", check_gpu },	{ "nvml", check_nvml },	      { "ib", check_ib },
	{ "disk", check_disk }, { "command", check_command },
};

_Static_assert(sizeof(checks) / sizeof(checks[0]) <= PHX_HEALTH_MAX_CHECKS, "report too small");

size_t phx_health_run(const struct phx_conf *conf, const struct phx_health_ctx *ctx,
		      struct phx_health_report *rep)
{
	struct run run = { .conf = conf, .ctx = ctx };
	struct sigaction dfl = { .sa_handler = SIG_DFL }, old;

	memset(rep, 0, sizeof(*rep));
	clock_gettime(CLOCK_MONOTONIC, &run.deadline);
	run.deadline.tv_sec += conf->health.timeout_s;
	/* waitpid needs our children not to be reaped behind our back. */
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGCHLD, &dfl, &old);
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		struct phx_health_result *r = &rep->results[rep->n++];

		snprintf(r->name, sizeof(r->name), "%s", checks[i].name);
		checks[i].fn(&run, r);
		rep->failed += r->status == PHX_HEALTH_FAIL;
	}
	sigaction(SIGCHLD, &old, NULL);
	return rep->failed;
}

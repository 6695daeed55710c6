/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node health checks against fake hardware built in a temporary
 * directory: device files, a sysfs tree with InfiniBand ports, checkpoint
 * paths with planted symlinks, site commands, and a fake NVML library.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/conf.h"
#include "health/health.h"
#include "tests/unit/scratch.h"

static char tmp[256];

static void mkdirs(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *text, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void vpath(char *out, const char *fmt, va_list ap)
{
	char rel[1024];

	vsnprintf(rel, sizeof(rel), fmt, ap);
	snprintf(out, PATH_MAX, "%s/%s", tmp, rel);
}

static void mkdirs(const char *fmt, ...)
{
	char path[PATH_MAX], cmd[PATH_MAX + 16];
	va_list ap;

	va_start(ap, fmt);
	vpath(path, fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	assert_int_equal(system(cmd), 0);
}

/* Writes text into the file tmp/FMT, making its directories. */
static void put(const char *text, const char *fmt, ...)
{
	char path[PATH_MAX], dir[PATH_MAX], cmd[PATH_MAX + 16];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vpath(path, fmt, ap);
	va_end(ap);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static char *at(const char *rel)
{
	static char buf[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", tmp, rel);
	return buf[i];
}

static void set_str(char **field, const char *value)
{
	free(*field);
	*field = strdup(value);
	assert_non_null(*field);
}

static void set_paths(struct phx_conf *c, const char *a, const char *b)
{
	const char *v[2] = { a, b };

	for (size_t i = 0; i < c->health.paths.n; i++)
		free(c->health.paths.items[i]);
	free(c->health.paths.items);
	c->health.paths.items = calloc(3, sizeof(char *));
	c->health.paths.n = 0;
	for (size_t i = 0; i < 2 && v[i]; i++)
		c->health.paths.items[c->health.paths.n++] = strdup(v[i]);
}

/* Defaults, with every check off: each test turns on the one it tests. */
static void quiet_conf(struct phx_conf *c)
{
	assert_int_equal(phx_conf_defaults(c), 0);
	set_str(&c->health.gpu_device, "");
	c->health.ib = PHX_TRI_FALSE;
	c->health.timeout_s = 10;
}

static const struct phx_health_result *run1(const struct phx_conf *c,
					    const struct phx_health_ctx *ctx, const char *name)
{
	static struct phx_health_report rep;
	const struct phx_health_result *r;

	phx_health_run(c, ctx, &rep);
	r = phx_health_find(&rep, name);
	assert_non_null(r);
	return r;
}

static void expect(const struct phx_health_result *r, enum phx_health_status status,
		   const char *part)
{
	if (r->status != status || (part && !strstr(r->reason, part)))
		fail_msg("%s: got %s '%s' (hint '%s'), want %s with '%s'", r->name,
			 phx_health_status_name(r->status), r->reason, r->hint,
			 phx_health_status_name(status), part ? part : "");
	if (status == PHX_HEALTH_FAIL && !r->hint[0])
		fail_msg("%s: failed without a hint: %s", r->name, r->reason);
}

static int setup(void **state)
{
	return phx_scratch_make(tmp, sizeof(tmp), "health");
}

static int teardown(void **state)
{
	return phx_scratch_remove(tmp);
}

/* ------------------------------------------------------------ parsing */

static void test_expand(void **state)
{
	struct phx_health_ctx ctx = {
		.node = "node7", .job_id = 42, .uid = 1000, .have_uid = true
	};
	char out[64];

	assert_int_equal(phx_health_expand("/c/%u/%j/%n/100%%", &ctx, out, sizeof(out)), 0);
	assert_string_equal(out, "/c/1000/42/node7/100%");
	assert_int_equal(phx_health_expand("/plain", &ctx, out, sizeof(out)), 0);
	assert_string_equal(out, "/plain");
	assert_int_equal(phx_health_expand("/c/%x", &ctx, out, sizeof(out)), -EINVAL);
	assert_int_equal(phx_health_expand("/c/%", &ctx, out, sizeof(out)), -EINVAL);
	assert_int_equal(phx_health_expand("/c/%u/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
					   "aaaaaaaaaaaaaaaaaaaa",
					   &ctx, out, sizeof(out)),
			 -ENAMETOOLONG);
	ctx.have_uid = false;
	assert_int_equal(phx_health_expand("/c/%u", &ctx, out, sizeof(out)), -ENOENT);
	assert_int_equal(phx_health_expand("/c/%j", &ctx, out, sizeof(out)), 0);
	ctx.job_id = 0;
	assert_int_equal(phx_health_expand("/c/%j", &ctx, out, sizeof(out)), -ENOENT);
	/* A node name never walks out of its root. */
	ctx.node = "../etc";
	assert_int_equal(phx_health_expand("/r/%n", &ctx, out, sizeof(out)), -EINVAL);
	ctx.node = "..";
	assert_int_equal(phx_health_expand("/r/%n", &ctx, out, sizeof(out)), -EINVAL);
	ctx.node = NULL;
	assert_int_equal(phx_health_expand("/r/%n", &ctx, out, sizeof(out)), -ENOENT);
}

/* ------------------------------------------------------------ gpu */

/* A character device: mknod as root, else a symlink to /dev/null. */
static void make_chr(const char *rel, unsigned minor)
{
	char *path = at(rel);

	if (geteuid() == 0)
		assert_int_equal(mknod(path, S_IFCHR | 0600, makedev(195, minor)), 0);
	else
		assert_int_equal(symlink("/dev/null", path), 0);
}

static void test_gpu_devices(void **state)
{
	struct phx_health_ctx ctx = { .node = "n1", .job_gpus = "0,1" };
	struct phx_conf c;
	char pattern[PATH_MAX];

	mkdirs("dev");
	make_chr("dev/gpu0", 0);
	make_chr("dev/gpu1", 1);
	put("not a device\n", "dev/gpu2");
	mkdirs("dev/gpu3");
	quiet_conf(&c);
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_SKIP, "health.gpu_device is \"\"");
	snprintf(pattern, sizeof(pattern), "%s/dev/gpu%%u", tmp);
	set_str(&c.health.gpu_device, pattern);
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_PASS, "2 GPU device files present");

	ctx.job_gpus = "0,2";
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_FAIL,
	       "/dev/gpu2 is a regular file, not a character device");
	ctx.job_gpus = "3";
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_FAIL, "is a directory, not a character device");
	ctx.job_gpus = "1,5";
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_FAIL, "GPU 5: ");
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_FAIL, "/dev/gpu5: missing");
	ctx.job_gpus = "0,2,5";
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_FAIL, "(and 1 more)");
	ctx.job_gpus = "0-1x";
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_SKIP, "is not a GPU index list");

	/* The per-node count, without a job. */
	ctx.job_gpus = NULL;
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_SKIP, "no GPUs to check");
	c.health.gpu_count = 2;
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_PASS, "2 GPU device files");
	c.health.gpu_count = 3;
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_FAIL, "GPU 2:");

	/* dev_root with %n: each node its own fake /dev. */
	mkdirs("nodes/n1/dev");
	mkdirs("nodes/n2/dev");
	make_chr("nodes/n1/dev/nvidia0", 0);
	c.health.gpu_count = 1;
	set_str(&c.health.gpu_device, "/dev/nvidia%u");
	snprintf(pattern, sizeof(pattern), "%s/nodes/%%n/", tmp);
	set_str(&c.health.dev_root, pattern);
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_PASS, NULL);
	ctx.node = "n2";
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_FAIL, "/nodes/n2/dev/nvidia0: missing");
	ctx.node = NULL;
	expect(run1(&c, &ctx, "gpu"), PHX_HEALTH_FAIL, "the node name is not known");
	phx_conf_free(&c);
}

/* ------------------------------------------------------------ ib */

static void ib_port(const char *node, const char *dev, int port, const char *state,
		    const char *rate)
{
	put(state, "%s/sys/class/infiniband/%s/ports/%d/state", node, dev, port);
	if (rate)
		put(rate, "%s/sys/class/infiniband/%s/ports/%d/rate", node, dev, port);
}

static void test_ib(void **state)
{
	struct phx_health_ctx ctx = { .node = "a" };
	struct phx_conf c;
	char root[PATH_MAX];

	ib_port("a", "mlx5_0", 1, "4: ACTIVE\n", "200 Gb/sec (4X HDR)\n");
	ib_port("a", "mlx5_1", 1, "4: ACTIVE\n", "400 Gb/sec (4X NDR)\n");
	ib_port("b", "mlx5_0", 1, "4: ACTIVE\n", "400 Gb/sec (4X NDR)\n");
	ib_port("b", "mlx5_1", 1, "1: DOWN\n", "10 Gb/sec (4X SDR)\n");
	ib_port("b", "mlx5_1", 2, "2: INIT\n", "400 Gb/sec (4X NDR)\n");
	mkdirs("c/sys/class/infiniband");
	mkdirs("d/sys");
	ib_port("e", "mlx5_0", 1, "4: ACTIVE\n", NULL);
	mkdirs("f/sys/class/infiniband/mlx5_0");
	quiet_conf(&c);
	snprintf(root, sizeof(root), "%s/%%n/sys", tmp);
	set_str(&c.health.sysfs_root, root);

	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_SKIP, "health.ib is false");
	c.health.ib = PHX_TRI_AUTO;
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_PASS, "2 ports ACTIVE, lowest rate 200 Gb/s");
	c.health.ib_min_rate_gbps = 200;
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_PASS, NULL);
	c.health.ib_min_rate_gbps = 400;
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_FAIL,
	       "mlx5_0 port 1 runs at 200 Gb/s, below health.ib_min_rate_gbps 400");
	c.health.ib_min_rate_gbps = 0;

	ctx.node = "b";
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_FAIL,
	       "mlx5_1 port 1 is '1: DOWN', not '4: ACTIVE' (and 1 more)");
	/* No InfiniBand: fine with auto, a failure with true. */
	ctx.node = "c";
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_SKIP, "no InfiniBand devices under");
	ctx.node = "d";
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_SKIP, "no InfiniBand devices under");
	c.health.ib = PHX_TRI_TRUE;
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_FAIL, "(health.ib is true)");
	/* No rate file: fine unless a rate is required. */
	ctx.node = "e";
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_PASS, "1 port ACTIVE");
	c.health.ib_min_rate_gbps = 100;
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_FAIL, "cannot read its rate");
	ctx.node = "f";
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_FAIL, "mlx5_0 has no ports");
	ctx.node = NULL;
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_FAIL, "health.sysfs_root: it uses %n");
	phx_conf_free(&c);
}

/* A FIFO where the state should be must not hang the prolog. */
static void test_ib_fifo(void **state)
{
	struct phx_health_ctx ctx = { .node = "g" };
	struct phx_conf c;
	char root[PATH_MAX];
	time_t t0 = time(NULL);

	mkdirs("g/sys/class/infiniband/mlx5_0/ports/1");
	assert_int_equal(mkfifo(at("g/sys/class/infiniband/mlx5_0/ports/1/state"), 0600), 0);
	quiet_conf(&c);
	c.health.ib = PHX_TRI_TRUE;
	snprintf(root, sizeof(root), "%s/%%n/sys", tmp);
	set_str(&c.health.sysfs_root, root);
	expect(run1(&c, &ctx, "ib"), PHX_HEALTH_FAIL, "cannot read its state");
	assert_true(time(NULL) - t0 < 5);
	phx_conf_free(&c);
}

/* ------------------------------------------------------------ disk */

static double free_gib(const char *path)
{
	struct statvfs sv;

	assert_int_equal(statvfs(path, &sv), 0);
	return (double)sv.f_bavail * (double)sv.f_frsize / (1024.0 * 1024 * 1024);
}

static void test_disk(void **state)
{
	struct phx_health_ctx ctx = { .node = "n1", .job_id = 42, .uid = 1000, .have_uid = true };
	struct phx_conf c;
	char p1[PATH_MAX], p2[PATH_MAX];
	struct stat st;

	mkdirs("ckpt");
	quiet_conf(&c);
	snprintf(p1, sizeof(p1), "%s/ckpt/%%u/%%j", tmp);
	set_paths(&c, p1, NULL);
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_SKIP, "health.min_free_gb is 0");
	c.health.min_free_gb = 1000000000;
	set_paths(&c, NULL, NULL);
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_SKIP, "health.paths is empty");

	/* The job's directory does not exist yet: its parent's file system counts. */
	set_paths(&c, p1, NULL);
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL, "/ckpt/1000/42: ");
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL,
	       "GiB free, health.min_free_gb is "
	       "1000000000");
	/* Nothing was created on the way. */
	assert_int_equal(stat(at("ckpt/1000"), &st), -1);
	assert_int_equal(errno, ENOENT);

	if (free_gib(tmp) >= 1.0) {
		c.health.min_free_gb = 1;
		expect(run1(&c, &ctx, "disk"), PHX_HEALTH_PASS, "GiB free on ");
		c.health.min_free_gb = 1000000000;
	}
	/* The admin's part of the pattern must exist: a missing mount fails. */
	snprintf(p2, sizeof(p2), "%s/not-mounted/%%u", tmp);
	set_paths(&c, p2, NULL);
	c.health.min_free_gb = 1;
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL, "/not-mounted/: does not exist");
	set_paths(&c, "/nonexistent-phalanx-scratch", NULL);
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL, "does not exist");
	/* Without a job, %u and %j paths are left alone. */
	ctx.have_uid = false;
	ctx.job_id = 0;
	set_paths(&c, p1, NULL);
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_SKIP, "not checked without a job");
	/* ...but the admin's part of them still must exist. */
	set_paths(&c, p2, NULL);
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL, "/not-mounted/: does not exist");
	phx_conf_free(&c);
}

/*
 * A user owns /ckpt/<uid>: a symlink planted there must not be followed
 * by root. The threshold is one no file system meets, so a path that is
 * checked fails: "skipped" proves it was not looked at.
 */
static void test_disk_symlinks(void **state)
{
	struct phx_health_ctx ctx = { .node = "n1", .job_id = 7, .uid = 1000, .have_uid = true };
	struct phx_conf c;
	char pattern[PATH_MAX];
	bool root = geteuid() == 0;

	mkdirs("users");
	mkdirs("elsewhere");
	mkdirs("users/1001");
	assert_int_equal(symlink(at("elsewhere"), at("users/1000")), 0);
	assert_int_equal(symlink(at("elsewhere"), at("users/1001/ckpt")), 0);
	if (root) {
		/* As a user would have made them. */
		assert_int_equal(lchown(at("users/1000"), 1000, 1000), 0);
		assert_int_equal(lchown(at("users/1001"), 1001, 1001), 0);
		assert_int_equal(lchown(at("users/1001/ckpt"), 1001, 1001), 0);
	}
	quiet_conf(&c);
	c.health.min_free_gb = 1000000000;
	snprintf(pattern, sizeof(pattern), "%s/users/%%u/ckpt", tmp);
	set_paths(&c, pattern, NULL);
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_SKIP,
	       "/users/1000/ckpt: not checked: '1000' is a symlink owned by uid");
	ctx.uid = 1001;
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_SKIP, "'ckpt' is a symlink owned by uid");
	/* A mix: the failure of the good path is kept, the planted one noted. */
	set_paths(&c, pattern, at("elsewhere"));
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL, "/elsewhere: ");
	c.health.min_free_gb = 1;
	if (free_gib(tmp) >= 1.0)
		expect(run1(&c, &ctx, "disk"), PHX_HEALTH_PASS, "1 not checked: ");
	c.health.min_free_gb = 1000000000;
	set_paths(&c, pattern, NULL);

	if (!root) {
		phx_conf_free(&c);
		return;
	}
	/* A symlink root made (an admin's) is followed, relative or absolute. */
	assert_int_equal(symlink("../elsewhere", at("users/0")), 0);
	ctx.uid = 0;
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL, "/users/0/ckpt: ");
	assert_int_equal(symlink(at("elsewhere"), at("users/2")), 0);
	ctx.uid = 2;
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL, "/users/2/ckpt: ");
	/* A loop of root's symlinks ends, not checked. */
	assert_int_equal(symlink("3", at("users/3")), 0);
	ctx.uid = 3;
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_SKIP, "not checked: ");
	/* A user's file where a directory should be: not the node's fault. */
	put("x", "users/4");
	assert_int_equal(chown(at("users/4"), 4, 4), 0);
	ctx.uid = 4;
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_SKIP, "Not a directory");
	phx_conf_free(&c);
}

/* ------------------------------------------------------------ command */

/* tmp/bin/NAME, a shell script; returns its path, to be freed. */
static char *script(const char *name, const char *body, mode_t mode)
{
	char text[1024], path[PATH_MAX];

	snprintf(text, sizeof(text), "#!/bin/sh\n%s\n", body);
	put(text, "bin/%s", name);
	snprintf(path, sizeof(path), "%s/bin/%s", tmp, name);
	assert_int_equal(chmod(path, mode), 0);
	return strdup(path);
}

/* Running: it exists and is not a zombie (which a container's init may never reap). */
static bool alive(int pid)
{
	char path[64], stat[512], *end;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	stat[n] = '\0';
	end = strrchr(stat, ')');
	return end && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

static void command(struct phx_conf *c, const char *name, const char *body, const char *args)
{
	char *path = script(name, body, 0755);
	char line[PATH_MAX + 64];

	snprintf(line, sizeof(line), "%s%s%s", path, args ? " " : "", args ? args : "");
	set_str(&c->health.command, line);
	free(path);
}

static void test_command(void **state)
{
	struct phx_health_ctx ctx = { .node = "node9", .job_id = 42 };
	struct phx_conf c;
	char body[256];
	int leak;

	mkdirs("bin");
	quiet_conf(&c);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_SKIP, "health.command is not set");
	command(&c, "ok", "exit 0", NULL);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_PASS, "/bin/ok exited 0");
	/* The first line it prints is the reason. */
	command(&c, "fan", "echo; echo 'fan 3 failed'; echo second; exit 1", NULL);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "fan 3 failed (exit status 1)");
	command(&c, "quiet", "exit 4", NULL);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL,
	       "failed with exit status 4 and "
	       "printed nothing");
	command(&c, "stderr", "echo 'on stderr' >&2; exit 1", NULL);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "on stderr");
	command(&c, "killed", "kill -9 $$", NULL);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "killed by signal 9");
	command(&c, "args", "echo \"[$1][$2]\"; exit 1", "a  b");
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "[a][b]");
	/* An empty environment, but for a safe PATH, the job and the node. */
	setenv("PHX_TEST_SECRET", "leaked", 1);
	command(&c, "env",
		"echo \"$SLURM_JOB_ID $SLURMD_NODENAME ${HOME:-nohome} "
		"${PHX_TEST_SECRET:-clean} $PATH\"; exit 1",
		NULL);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL,
	       "42 node9 nohome clean /usr/sbin:/usr/bin:/sbin:/bin (exit status 1)");
	unsetenv("PHX_TEST_SECRET");
	/* No descriptor of the caller leaks into it. */
	leak = open("/dev/null", O_RDONLY);
	assert_true(leak > 2);
	snprintf(body, sizeof(body),
		 "if [ -e /proc/self/fd/%d ]; then echo leaked; exit 1; fi; "
		 "read x && echo stdin; exit 0",
		 leak);
	command(&c, "fds", body, NULL);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_PASS, NULL);
	close(leak);
	/* Control characters do not reach the log. */
	command(&c, "ctl", "printf 'a\\033[31mb\\tc\\n'; exit 1", NULL);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "a?[31mb?c (exit status 1)");
	phx_conf_free(&c);
}

static void test_command_timeout(void **state)
{
	struct phx_health_ctx ctx = { .node = "node9" };
	struct phx_conf c;
	struct timespec t0, t1;
	char pidfile[PATH_MAX], body[PATH_MAX + 64];
	FILE *f;
	int pid = 0;

	mkdirs("bin");
	quiet_conf(&c);
	c.health.timeout_s = 1;
	command(&c, "sleepy", "echo started; exec sleep 30", NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL,
	       "/bin/sleepy did not finish within health.timeout (1 s); killed");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 5);

	/* A background child that keeps the pipe open does not hold it up... */
	snprintf(pidfile, sizeof(pidfile), "%s/bg.pid", tmp);
	snprintf(body, sizeof(body), "sleep 30 & echo $! > %s; exit 0", pidfile);
	c.health.timeout_s = 10;
	command(&c, "bg", body, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_PASS, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 5);
	/* ...and is killed with it. */
	f = fopen(pidfile, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &pid), 1);
	fclose(f);
	for (int i = 0; i < 50 && alive(pid); i++)
		usleep(20000);
	assert_false(alive(pid));
	phx_conf_free(&c);
}

static void test_command_trust(void **state)
{
	struct phx_health_ctx ctx = { .node = "node9" };
	struct phx_conf c;
	char *path;

	mkdirs("bin");
	mkdirs("open");
	quiet_conf(&c);
	path = script("writable", "exit 0", 0777);
	set_str(&c.health.command, path);
	free(path);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "refusing to run");
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "writable only by root");
	path = script("noexec", "exit 0", 0644);
	set_str(&c.health.command, path);
	free(path);
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "not an executable file");
	set_str(&c.health.command, at("bin/missing"));
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "No such file or directory");
	/* A good program in a directory others can write to. */
	put("#!/bin/sh\nexit 0\n", "open/prog");
	assert_int_equal(chmod(at("open/prog"), 0755), 0);
	assert_int_equal(chmod(at("open"), 0777), 0);
	set_str(&c.health.command, at("open/prog"));
	expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "/open is writable by others");
	if (geteuid() == 0) {
		/* Root never runs what a user owns. */
		path = script("users", "exit 0", 0755);
		assert_int_equal(chown(path, 1000, 1000), 0);
		set_str(&c.health.command, path);
		free(path);
		expect(run1(&c, &ctx, "command"), PHX_HEALTH_FAIL, "owned by uid 1000");
	}
	phx_conf_free(&c);
}

/* ------------------------------------------------------------ nvml */

static const char *const nvml_env[] = {
	"FAKE_NVML_COUNT",	 "FAKE_NVML_INIT_FAIL", "FAKE_NVML_CRASH",   "FAKE_NVML_HANG",
	"FAKE_NVML_LOST",	 "FAKE_NVML_ECC",	"FAKE_NVML_PENDING", "FAKE_NVML_REMAP_FAIL",
	"FAKE_NVML_NVLINK_DOWN", "FAKE_NVML_NO_NVLINK",
};

static void nvml_reset(void)
{
	for (size_t i = 0; i < sizeof(nvml_env) / sizeof(nvml_env[0]); i++)
		unsetenv(nvml_env[i]);
}

static void nvml_case(const char *var, const char *value, const char *job_gpus,
		      enum phx_health_status want, const char *part)
{
	struct phx_health_ctx ctx = { .node = "n1", .job_gpus = job_gpus, .nvml_lib = FAKE_NVML };
	struct phx_conf c;

	quiet_conf(&c);
	nvml_reset();
	if (var)
		setenv(var, value, 1);
	expect(run1(&c, &ctx, "nvml"), want, part);
	nvml_reset();
	phx_conf_free(&c);
}

static void test_nvml(void **state)
{
	struct phx_health_ctx ctx = { .node = "n1", .nvml_lib = FAKE_NVML };
	struct phx_conf c;
	struct timespec t0, t1;

	if (access(FAKE_NVML, R_OK))
		fail_msg("%s is not built", FAKE_NVML);
	nvml_case(NULL, NULL, "0,1", PHX_HEALTH_PASS, "2 GPUs healthy");
	nvml_case(NULL, NULL, "1", PHX_HEALTH_PASS, "1 GPU healthy");
	nvml_case(NULL, NULL, "1,3", PHX_HEALTH_FAIL, "GPU 3 is not among the 2 GPUs NVML sees");
	nvml_case("FAKE_NVML_ECC", "1", "0,1", PHX_HEALTH_FAIL,
		  "GPU 1: 3 uncorrectable ECC errors since the driver loaded");
	/* GPU 0 is not the job's: its errors do not fail this job's node check. */
	nvml_case("FAKE_NVML_ECC", "0", "1", PHX_HEALTH_PASS, NULL);
	nvml_case("FAKE_NVML_PENDING", "0", "0", PHX_HEALTH_FAIL,
		  "GPU 0: retired memory pages are pending");
	nvml_case("FAKE_NVML_REMAP_FAIL", "1", "1", PHX_HEALTH_FAIL,
		  "GPU 1: memory row remapping failed");
	nvml_case("FAKE_NVML_NVLINK_DOWN", "1", "0,1", PHX_HEALTH_FAIL,
		  "GPU 1: 3 NVLinks up and 1 down, its peers have 4 up");
	nvml_case("FAKE_NVML_NO_NVLINK", "1", "0,1", PHX_HEALTH_PASS, NULL);
	nvml_case("FAKE_NVML_LOST", "1", "0,1", PHX_HEALTH_FAIL,
		  "GPU at NVML index 1: GPU is lost");
	nvml_case("FAKE_NVML_INIT_FAIL", "1", "0", PHX_HEALTH_FAIL, "nvmlInit: Driver Not Loaded");
	/* A crashing library takes its child down, not the caller. */
	nvml_case("FAKE_NVML_CRASH", "1", "0", PHX_HEALTH_FAIL, "ended without a result");
	/* No job GPUs, no expected count: nothing to ask NVML. */
	nvml_case(NULL, NULL, NULL, PHX_HEALTH_SKIP, "no GPUs to check");

	/* The count every node must have. */
	quiet_conf(&c);
	c.health.gpu_count = 4;
	expect(run1(&c, &ctx, "nvml"), PHX_HEALTH_FAIL, "NVML sees 2 GPUs, health.gpu_count is 4");
	c.health.gpu_count = 2;
	setenv("FAKE_NVML_ECC", "0", 1);
	expect(run1(&c, &ctx, "nvml"), PHX_HEALTH_FAIL, "GPU 0: 3 uncorrectable");
	nvml_reset();
	/* By hand, without a job: every GPU. */
	c.health.gpu_count = 0;
	ctx.all_gpus = true;
	expect(run1(&c, &ctx, "nvml"), PHX_HEALTH_PASS, "2 GPUs healthy");
	/* No library: a node without the NVIDIA driver, skipped. */
	ctx.nvml_lib = "/nonexistent/libnvidia-ml.so.1";
	expect(run1(&c, &ctx, "nvml"), PHX_HEALTH_SKIP, "NVML not available");
	ctx.nvml_lib = "/bin/sh";
	expect(run1(&c, &ctx, "nvml"), PHX_HEALTH_SKIP, "NVML not available");

	/* A hanging library is killed at health.timeout... */
	ctx.nvml_lib = FAKE_NVML;
	c.health.timeout_s = 1;
	c.health.min_free_gb = 1;
	set_paths(&c, "/", NULL);
	setenv("FAKE_NVML_HANG", "1", 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	expect(run1(&c, &ctx, "nvml"), PHX_HEALTH_FAIL, "did not finish within health.timeout");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 5);
	/* ...and the checks after it have no time left. */
	expect(run1(&c, &ctx, "disk"), PHX_HEALTH_FAIL, "not run: the checks before it used up");
	nvml_reset();
	phx_conf_free(&c);
}

/* ------------------------------------------------------------ report */

static void test_report(void **state)
{
	static const char *const names[] = { "gpu", "nvml", "ib", "disk", "command" };
	struct phx_health_ctx ctx = { .node = "quiet" };
	struct phx_health_report rep;
	struct phx_conf c;
	char root[PATH_MAX];

	/* The defaults on a node with nothing to check: nothing fails. */
	assert_int_equal(phx_conf_defaults(&c), 0);
	mkdirs("quiet/sys");
	snprintf(root, sizeof(root), "%s/%%n/sys", tmp);
	set_str(&c.health.sysfs_root, root);
	assert_int_equal(phx_health_run(&c, &ctx, &rep), 0);
	assert_int_equal(rep.n, 5);
	assert_int_equal(rep.failed, 0);
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(rep.results[i].name, names[i]);
		assert_int_equal(rep.results[i].status, PHX_HEALTH_SKIP);
		assert_string_equal(rep.results[i].hint, "");
	}
	assert_null(phx_health_find(&rep, "nope"));
	/* Two failures are counted. */
	ib_port("quiet", "mlx5_0", 1, "1: DOWN\n", NULL);
	c.health.min_free_gb = 1;
	set_paths(&c, "/nonexistent-phalanx-scratch", NULL);
	assert_int_equal(phx_health_run(&c, &ctx, &rep), 2);
	assert_int_equal(rep.failed, 2);
	assert_int_equal(phx_health_find(&rep, "ib")->status, PHX_HEALTH_FAIL);
	assert_int_equal(phx_health_find(&rep, "disk")->status, PHX_HEALTH_FAIL);
	assert_string_equal(phx_health_status_name(PHX_HEALTH_PASS), "pass");
	assert_string_equal(phx_health_status_name(PHX_HEALTH_FAIL), "fail");
	assert_string_equal(phx_health_status_name(PHX_HEALTH_SKIP), "skip");
	assert_string_equal(phx_health_status_name((enum phx_health_status)9), "unknown");
	phx_conf_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expand),
		cmocka_unit_test_setup_teardown(test_gpu_devices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ib, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ib_fifo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_command, setup, teardown),
		cmocka_unit_test_setup_teardown(test_command_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_command_trust, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nvml, setup, teardown),
		cmocka_unit_test_setup_teardown(test_report, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

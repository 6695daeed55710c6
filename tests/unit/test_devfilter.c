/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spank/devfilter.c against the kernel's device check: a task's process
 * opens device nodes of GPU major 195 after the filter went on, and the
 * kernel's answer (EPERM or not) is the verdict. The site's programs are
 * set up as Slurm's cgroup/v2 attaches them (ALLOW_OVERRIDE on the job
 * and step, no flag on the task) and as systemd does (ALLOW_MULTI); each
 * must still deny what it denied. Root only: the real cgroup-v2 hierarchy
 * and BPF.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "spank/devfilter.h"

#define GPU_MAJOR 195
#define OURS 1 /* denied by the filter under test */
#define FREE 2 /* denied by nobody */
#define SITE_A 5 /* denied by a site program */
#define SITE_B 6

static char base[4096], devdir[] = "/tmp/phx-devfilter-XXXXXX";

static const char *cgroup2_root(void)
{
	static const char *const where[] = { "/sys/fs/cgroup/unified", "/sys/fs/cgroup" };
	struct statfs fs;

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (!statfs(where[i], &fs) && fs.f_type == CGROUP2_SUPER_MAGIC)
			return where[i];
	return NULL;
}

static int setup(void **state)
{
	const char *root;

	(void)state;
	if (geteuid() != 0)
		return 0;
	root = cgroup2_root();
	assert_non_null(root);
	snprintf(base, sizeof(base), "%s/phx-test-devfilter-%d", root, (int)getpid());
	assert_int_equal(mkdir(base, 0755), 0);
	assert_non_null(mkdtemp(devdir));
	for (unsigned m = 1; m <= SITE_B; m++) {
		char path[128];

		snprintf(path, sizeof(path), "%s/gpu%u", devdir, m);
		assert_int_equal(mknod(path, S_IFCHR | 0666, makedev(GPU_MAJOR, m)), 0);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (geteuid() != 0)
		return 0;
	for (unsigned m = 1; m <= SITE_B; m++) {
		char path[128];

		snprintf(path, sizeof(path), "%s/gpu%u", devdir, m);
		unlink(path);
	}
	rmdir(devdir);
	return 0;
}

/* ------------------------------------------------------------ a site's program */

static int bpf_call(int cmd, union bpf_attr *attr)
{
	return (int)syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/* Loads "deny char GPU_MAJOR:minor, allow the rest" and attaches it to dir with flags. */
static void site_program(const char *dir, unsigned minor, unsigned flags)
{
	struct bpf_insn p[] = {
		{ BPF_LDX | BPF_W | BPF_MEM, BPF_REG_2, BPF_REG_1,
		  offsetof(struct bpf_cgroup_dev_ctx, major), 0 },
		{ BPF_LDX | BPF_W | BPF_MEM, BPF_REG_3, BPF_REG_1,
		  offsetof(struct bpf_cgroup_dev_ctx, minor), 0 },
		{ BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 3, GPU_MAJOR },
		{ BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 2, (int)minor },
		{ BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0 },
		{ BPF_JMP | BPF_EXIT, 0, 0, 0, 0 },
		{ BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1 },
		{ BPF_JMP | BPF_EXIT, 0, 0, 0, 0 },
	};
	union bpf_attr attr;
	int prog, cg;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	attr.insns = (uintptr_t)p;
	attr.insn_cnt = sizeof(p) / sizeof(p[0]);
	attr.license = (uintptr_t) "Apache-2.0";
	prog = bpf_call(BPF_PROG_LOAD, &attr);
	assert_true(prog >= 0);
	cg = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(cg >= 0);
	memset(&attr, 0, sizeof(attr));
	attr.target_fd = (uint32_t)cg;
	attr.attach_bpf_fd = (uint32_t)prog;
	attr.attach_type = BPF_CGROUP_DEVICE;
	attr.attach_flags = flags;
	assert_int_equal(bpf_call(BPF_PROG_ATTACH, &attr), 0);
	close(cg);
	close(prog);
}

/* ------------------------------------------------------------ a task */

struct task {
	pid_t pid;
	int go, verdict; /* pipe ends: start the opens; read one errno per minor */
};

/* A process that waits, then opens gpu1..gpu6 and reports each errno (0: opened). */
static void start_task(struct task *t)
{
	int go[2], verdict[2];

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(verdict), 0);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (!t->pid) {
		char c;

		close(go[1]);
		close(verdict[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		for (unsigned m = 1; m <= SITE_B; m++) {
			char path[128];
			int fd, err;

			snprintf(path, sizeof(path), "%s/gpu%u", devdir, m);
			fd = open(path, O_RDWR);
			err = fd < 0 ? errno : 0;
			if (fd >= 0)
				close(fd);
			if (write(verdict[1], &err, sizeof(err)) != sizeof(err))
				_exit(1);
		}
		_exit(0);
	}
	close(go[0]);
	close(verdict[1]);
	t->go = go[1];
	t->verdict = verdict[0];
}

static void put_in(const char *dir, pid_t pid)
{
	char path[4200], text[32];
	int fd;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	snprintf(text, sizeof(text), "%d", (int)pid);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* Runs the opens; denied[m] is true where the kernel said EPERM for gpu m. */
static void finish_task(struct task *t, bool denied[SITE_B + 1])
{
	int status, err;

	assert_int_equal(write(t->go, "g", 1), 1);
	for (unsigned m = 1; m <= SITE_B; m++) {
		assert_int_equal(read(t->verdict, &err, sizeof(err)), sizeof(err));
		denied[m] = err == EPERM;
	}
	assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(t->go);
	close(t->verdict);
}

static void subdir(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", base, name);
	assert_int_equal(mkdir(out, 0755), 0);
}

static bool apply(pid_t pid, struct phx_devfilter *made, char *why, size_t len)
{
	dev_t deny[] = { makedev(GPU_MAJOR, OURS) };

	return phx_devfilter_apply(pid, deny, 1, "phalanx-1.0.3", made, why, len) == 0;
}

/* ------------------------------------------------------------ cases */

struct outcome {
	bool applied;
	char why[512], cgroup[4096];
	bool denied[SITE_B + 1], other_denied[SITE_B + 1];
};

/*
 * Two processes share cgroup base/name (as under proctrack/linuxproc or
 * in slurmd's unit) with nprogs site programs (denying SITE_A, SITE_B)
 * attached with flags; the first is filtered. Its cgroup goes after.
 */
static void filter_in_shared(const char *name, unsigned flags, unsigned nprogs, struct outcome *o)
{
	static const unsigned site[] = { SITE_A, SITE_B };
	struct phx_devfilter made;
	struct task task, other;
	char unit[4200];

	subdir(unit, sizeof(unit), name);
	for (unsigned i = 0; i < nprogs; i++)
		site_program(unit, site[i], flags);
	start_task(&task);
	start_task(&other);
	put_in(unit, task.pid);
	put_in(unit, other.pid);
	o->applied = apply(task.pid, &made, o->why, sizeof(o->why));
	snprintf(o->cgroup, sizeof(o->cgroup), "%s", made.cgroup);
	finish_task(&task, o->denied);
	finish_task(&other, o->other_denied);
	assert_int_equal(phx_devfilter_release(&made), 0);
	assert_int_equal(access(o->cgroup, F_OK), -1);
	assert_int_equal(rmdir(unit), 0);
}

/*
 * Slurm's cgroup/v2 layout: the step's program denying SITE_A with
 * ALLOW_OVERRIDE; below it task_0 holding the task alone, with a program
 * of its own (no flag) denying SITE_B where task_program.
 */
static void filter_in_slurm_task(const char *step_name, bool task_program, struct outcome *o)
{
	struct phx_devfilter made;
	struct task task;
	char step[4200], tdir[4300];

	subdir(step, sizeof(step), step_name);
	snprintf(tdir, sizeof(tdir), "%s/task_0", step);
	assert_int_equal(mkdir(tdir, 0755), 0);
	site_program(step, SITE_A, BPF_F_ALLOW_OVERRIDE);
	if (task_program)
		site_program(tdir, SITE_B, 0);
	start_task(&task);
	put_in(tdir, task.pid);
	o->applied = apply(task.pid, &made, o->why, sizeof(o->why));
	snprintf(o->cgroup, sizeof(o->cgroup), "%s", made.cgroup);
	finish_task(&task, o->denied);
	assert_int_equal(phx_devfilter_release(&made), 0);
	assert_int_equal(rmdir(tdir), 0);
	assert_int_equal(rmdir(step), 0);
}

#define ROOT_ONLY()                                                                                \
	do {                                                                                       \
		if (geteuid() != 0) {                                                              \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* ------------------------------------------------------------ tests */

/*
 * A task in a cgroup it shares gets one of its own below it; the process
 * left in the shared one is not filtered.
 */
static void test_shared_cgroup_gets_one_per_task(void **state)
{
	struct outcome o;
	char want[4200];

	(void)state;
	ROOT_ONLY();
	filter_in_shared("shared", 0, 0, &o);
	assert_true(o.applied);
	snprintf(want, sizeof(want), "%s/shared/phalanx-1.0.3", base);
	assert_string_equal(o.cgroup, want);
	assert_true(o.denied[OURS]);
	assert_false(o.denied[FREE]);
	assert_false(o.other_denied[OURS]);
}

/*
 * Slurm's ConstrainDevices: the task's own program holds every rule for
 * the task (the step's is overridden). Ours replaces it and calls it.
 */
static void test_slurm_task_program_still_applies(void **state)
{
	struct outcome o;

	(void)state;
	ROOT_ONLY();
	filter_in_slurm_task("step_0", true, &o);
	assert_true(o.applied);
	assert_string_equal(o.cgroup, ""); /* the task's own cgroup took it */
	assert_true(o.denied[OURS] && o.denied[SITE_B]);
	assert_false(o.denied[FREE]);
}

/* An ALLOW_OVERRIDE program above the task's cgroup would be dropped by ours: it is called. */
static void test_override_ancestor_still_applies(void **state)
{
	struct outcome o;

	(void)state;
	ROOT_ONLY();
	filter_in_slurm_task("step_1", false, &o);
	assert_true(o.applied);
	assert_true(o.denied[OURS] && o.denied[SITE_A]);
	assert_false(o.denied[FREE]);
}

/* systemd's way (ALLOW_MULTI, here two programs): ours is added, all apply. */
static void test_multi_programs_all_apply(void **state)
{
	struct outcome o;

	(void)state;
	ROOT_ONLY();
	filter_in_shared("slurmd.service", BPF_F_ALLOW_MULTI, 2, &o);
	assert_true(o.applied);
	assert_true(o.denied[OURS] && o.denied[SITE_A] && o.denied[SITE_B]);
	assert_false(o.denied[FREE]);
	assert_true(!o.other_denied[OURS] && o.other_denied[SITE_A] && o.other_denied[SITE_B]);
}

/* A program that admits none below it: refused with the reason, the site's rule stands. */
static void test_exclusive_program_is_not_overridden(void **state)
{
	struct outcome o;

	(void)state;
	ROOT_ONLY();
	filter_in_shared("exclusive", 0, 1, &o);
	assert_false(o.applied);
	assert_non_null(strstr(o.why, "cannot attach the device program"));
	assert_true(o.denied[SITE_A]);
	assert_false(o.denied[OURS]);
}

/*
 * A node's worth of GPUs in one program (the verifier's log once made a
 * long one fail), and a cgroup of the same name left over from an earlier
 * task, whose program must not deny the new task anything.
 */
static void test_many_gpus_and_a_stale_cgroup(void **state)
{
	struct phx_devfilter made;
	struct task task, other;
	bool denied[SITE_B + 1], other_denied[SITE_B + 1];
	dev_t deny[256];
	char why[512], unit[4200], stale[4300];

	(void)state;
	ROOT_ONLY();
	subdir(unit, sizeof(unit), "node");
	snprintf(stale, sizeof(stale), "%s/phalanx-1.0.3", unit);
	assert_int_equal(mkdir(stale, 0755), 0);
	site_program(stale, FREE, BPF_F_ALLOW_MULTI);
	deny[0] = makedev(GPU_MAJOR, OURS);
	for (unsigned i = 1; i < 256; i++)
		deny[i] = makedev(GPU_MAJOR, 100 + i);
	start_task(&task);
	start_task(&other);
	put_in(unit, task.pid);
	put_in(unit, other.pid);
	assert_int_equal(
		phx_devfilter_apply(task.pid, deny, 256, "phalanx-1.0.3", &made, why, sizeof(why)),
		0);
	finish_task(&task, denied);
	finish_task(&other, other_denied);
	assert_true(denied[OURS]);
	assert_false(denied[FREE]);
	assert_int_equal(phx_devfilter_release(&made), 0);
	assert_int_equal(rmdir(unit), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shared_cgroup_gets_one_per_task),
		cmocka_unit_test(test_slurm_task_program_still_applies),
		cmocka_unit_test(test_override_ancestor_still_applies),
		cmocka_unit_test(test_multi_programs_all_apply),
		cmocka_unit_test(test_exclusive_program_is_not_overridden),
		cmocka_unit_test(test_many_gpus_and_a_stale_cgroup),
	};
	int rc = cmocka_run_group_tests(tests, setup, teardown);

	if (geteuid() == 0 && rmdir(base) < 0)
		fprintf(stderr, "test_devfilter: %s left behind: %s\n", base, strerror(errno));
	return rc;
}

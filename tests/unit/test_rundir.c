/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Run directories: the sweep removes exactly the directories whose owner
 * died (the kernel dropped its lock), and nothing a live owner, another
 * prefix or a link points at.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/rundir.h"
#include "tests/unit/scratch.h"

static char base[256];

static int setup(void **state)
{
	(void)state;
	return phx_scratch_make(base, sizeof(base), "test-rundir");
}

static int teardown(void **state)
{
	(void)state;
	return phx_scratch_remove(base);
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void touch(const char *dir, const char *name)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
}

/* A child makes a run directory with a file in it and dies without cleaning up. */
static void make_in_dying_child(char *out, size_t len)
{
	int p[2], st;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char dir[512];
		int lock;

		if (phx_rundir_make(base, "phx-test", dir, sizeof(dir), &lock) < 0)
			_exit(1);
		touch(dir, "rank0.err");
		if (write(p[1], dir, strlen(dir) + 1) < 0)
			_exit(1);
		_exit(0); /* as SIGKILL would: no phx_rundir_remove */
	}
	close(p[1]);
	assert_true(read(p[0], out, len) > 0);
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_make_remove(void **state)
{
	char dir[512];
	struct stat st;
	int lock;

	(void)state;
	assert_int_equal(phx_rundir_make(base, "phx-test", dir, sizeof(dir), &lock), 0);
	assert_true(lock >= 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	touch(dir, "rank0.err");
	phx_rundir_remove(dir, lock);
	assert_false(exists(dir));
	/* Nothing made, nothing held: a no-op. */
	phx_rundir_remove("", -1);
}

static void test_sweep_dead_owner(void **state)
{
	char dead[512], live[512];
	int lock;

	(void)state;
	make_in_dying_child(dead, sizeof(dead));
	assert_true(exists(dead));
	/* The next owner's make sweeps the dead one and keeps its own. */
	assert_int_equal(phx_rundir_make(base, "phx-test", live, sizeof(live), &lock), 0);
	assert_false(exists(dead));
	assert_true(exists(live));
	/* A live owner's directory survives any sweep. */
	assert_int_equal(phx_rundir_sweep(base, "phx-test"), 0);
	assert_true(exists(live));
	/* An owner that ends sweeps the dead ones that died after it started. */
	make_in_dying_child(dead, sizeof(dead));
	phx_rundir_remove(live, lock);
	assert_false(exists(live));
	assert_false(exists(dead));
}

static void test_sweep_leaves_others(void **state)
{
	char dead[512], path[600], other[600], young[600];

	(void)state;
	make_in_dying_child(dead, sizeof(dead));
	/* Another prefix, a prefix without its dot, a young directory with no lock. */
	snprintf(other, sizeof(other), "%s/phx-testing.abc", base);
	assert_int_equal(mkdir(other, 0700), 0);
	snprintf(young, sizeof(young), "%s/phx-test.young", base);
	assert_int_equal(mkdir(young, 0700), 0);
	/* A link named like a run directory is never followed. */
	snprintf(path, sizeof(path), "%s/phx-test.link", base);
	assert_int_equal(symlink(dead, path), 0);
	assert_int_equal(phx_rundir_sweep(base, "phx-test"), 1);
	assert_false(exists(dead));
	assert_true(exists(other));
	assert_true(exists(young));
	assert_true(exists(path));
	/* A base that is not there: nothing to do. */
	assert_int_equal(phx_rundir_sweep("/nonexistent-phalanx-base", "phx-test"), 0);
}

static void test_make_too_long(void **state)
{
	char dir[16];
	int lock;

	(void)state;
	assert_int_equal(phx_rundir_make(base, "phx-test", dir, sizeof(dir), &lock), -ENAMETOOLONG);
	assert_int_equal(lock, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_make_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_dead_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_leaves_others, setup, teardown),
		cmocka_unit_test_setup_teardown(test_make_too_long, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

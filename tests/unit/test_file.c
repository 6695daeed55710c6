/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/file.h"
#include "tests/unit/scratch.h"

static char dir[256];

static int setup(void **state)
{
	return phx_scratch_make(dir, sizeof(dir), "test-file");
}

static int teardown(void **state)
{
	return phx_scratch_remove(dir);
}

static int count_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void test_write_read_roundtrip(void **state)
{
	char path[512], *data;
	size_t len;
	struct stat st;

	snprintf(path, sizeof(path), "%s/a.json", dir);
	assert_int_equal(phx_file_write_atomic(path, "hello", 5, 0640), 0);
	assert_int_equal(phx_file_read(path, 100, &data, &len), 0);
	assert_int_equal(len, 5);
	assert_string_equal(data, "hello");
	free(data);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	/* Replacing keeps exactly one file: no temporary left behind. */
	assert_int_equal(phx_file_write_atomic(path, "bye", 3, 0600), 0);
	assert_int_equal(phx_file_read(path, 100, &data, &len), 0);
	assert_string_equal(data, "bye");
	free(data);
	assert_int_equal(count_entries(), 1);
}

static void test_write_failure_leaves_old_file(void **state)
{
	char path[512], *data;
	size_t len;

	snprintf(path, sizeof(path), "%s/keep", dir);
	assert_int_equal(phx_file_write_atomic(path, "old", 3, 0600), 0);
	/* A directory in the way makes rename fail after the data was written. */
	snprintf(path, sizeof(path), "%s/sub", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(phx_file_write_atomic(path, "x", 1, 0600), -EISDIR);
	assert_int_equal(count_entries(), 2);
	snprintf(path, sizeof(path), "%s/keep", dir);
	assert_int_equal(phx_file_read(path, 100, &data, &len), 0);
	assert_string_equal(data, "old");
	free(data);
	snprintf(path, sizeof(path), "%s/missing/x", dir);
	assert_int_equal(phx_file_write_atomic(path, "x", 1, 0600), -ENOENT);
}

static void test_read_limits(void **state)
{
	char path[512], *data = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s/ten", dir);
	assert_int_equal(phx_file_write_atomic(path, "0123456789", 10, 0600), 0);
	/* Exactly the limit is fine, one byte less is refused. */
	assert_int_equal(phx_file_read(path, 10, &data, &len), 0);
	assert_int_equal(len, 10);
	free(data);
	assert_int_equal(phx_file_read(path, 9, &data, &len), -EFBIG);
	assert_int_equal(phx_file_read(dir, 100, &data, &len), -EINVAL);
	snprintf(path, sizeof(path), "%s/none", dir);
	assert_int_equal(phx_file_read(path, 100, &data, &len), -ENOENT);
	snprintf(path, sizeof(path), "%s/empty", dir);
	assert_int_equal(phx_file_write_atomic(path, "", 0, 0600), 0);
	assert_int_equal(phx_file_read(path, 0, &data, &len), 0);
	assert_int_equal(len, 0);
	assert_string_equal(data, "");
	free(data);
}

/* A FIFO where a file was expected (a user's trap for a root reader) is refused at once. */
static void test_read_refuses_fifo(void **state)
{
	char path[512], *data = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(10); /* a blocking open would hang here without a writer */
	assert_int_equal(phx_file_read(path, 100, &data, &len), -EINVAL);
	alarm(0);
	assert_null(data);
}

/*
 * Directories fsynced, by inode (fsync is wrapped at link time): POSIX
 * makes a new directory entry durable only through its parent's fsync.
 */
static ino_t synced[16];
static size_t nsynced;

int __real_fsync(int fd);
int __wrap_fsync(int fd);

int __wrap_fsync(int fd)
{
	struct stat st;

	if (!fstat(fd, &st) && S_ISDIR(st.st_mode) && nsynced < 16)
		synced[nsynced++] = st.st_ino;
	return __real_fsync(fd);
}

static bool was_synced(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	for (size_t i = 0; i < nsynced; i++)
		if (synced[i] == st.st_ino)
			return true;
	return false;
}

static void test_mkdirs_syncs_each_new_entry(void **state)
{
	char a[300], ab[310], abc[320], file[300], under_file[310];
	struct stat st;

	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(ab, sizeof(ab), "%s/b", a);
	snprintf(abc, sizeof(abc), "%s/c", ab);
	assert_int_equal(mkdir(a, 0700), 0);
	nsynced = 0;
	assert_int_equal(phx_mkdirs(abc, 0700), 0);
	assert_int_equal(stat(abc, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	/* b is new in a, c is new in b; nothing is new in the scratch directory. */
	assert_true(was_synced(a));
	assert_true(was_synced(ab));
	assert_false(was_synced(dir));
	/* Again: nothing made, nothing to sync. */
	nsynced = 0;
	assert_int_equal(phx_mkdirs(abc, 0700), 0);
	assert_int_equal(nsynced, 0);
	/* A file in the way is an error, not a success. */
	snprintf(file, sizeof(file), "%s/f", dir);
	assert_int_equal(phx_file_write_atomic(file, "x", 1, 0600), 0);
	snprintf(under_file, sizeof(under_file), "%s/x", file);
	assert_int_equal(phx_mkdirs(under_file, 0700), -ENOTDIR);
}

static void test_read_proc_file(void **state)
{
	char *data;
	size_t len;

	/* /proc files report size 0 but have content: read to EOF. */
	assert_int_equal(phx_file_read("/proc/self/status", 1 << 20, &data, &len), 0);
	assert_true(len > 0);
	assert_non_null(strstr(data, "Pid:"));
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_read_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_failure_leaves_old_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_read_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_refuses_fifo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mkdirs_syncs_each_new_entry, setup, teardown),
		cmocka_unit_test(test_read_proc_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phx_run_as: the child is the user (ids and no groups of root's), its
 * reply comes back bounded, and a child that hangs is stopped.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/file.h"
#include "common/runas.h"

/* Debian's nobody/nogroup. */
#define NOBODY 65534

static int reply_ids(void *arg, int out_fd)
{
	char buf[128];
	int n;

	(void)arg;
	n = snprintf(buf, sizeof(buf), "%u %u %u %u %d", (unsigned)getuid(), (unsigned)geteuid(),
		     (unsigned)getgid(), (unsigned)getegid(), getgroups(0, NULL));
	return phx_write_all(out_fd, buf, (size_t)n) < 0 ? 1 : 7;
}

static void test_reply_and_status(void **state)
{
	char out[128], want[128];

	(void)state;
	assert_int_equal(phx_run_as(getuid(), getgid(), 10, reply_ids, NULL, out, sizeof(out)), 7);
	snprintf(want, sizeof(want), "%u %u %u %u ", (unsigned)getuid(), (unsigned)getuid(),
		 (unsigned)getgid(), (unsigned)getgid());
	assert_memory_equal(out, want, strlen(want));
}

static void test_becomes_the_user(void **state)
{
	char out[128];

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(phx_run_as(NOBODY, NOBODY, 10, reply_ids, NULL, out, sizeof(out)), 7);
	/* Real, effective and saved ids all the user's; no supplementary groups. */
	assert_string_equal(out, "65534 65534 65534 65534 0");
}

static void test_cannot_become_another_user(void **state)
{
	char out[128];

	(void)state;
	if (geteuid() == 0)
		skip();
	assert_int_equal(phx_run_as(0, 0, 10, reply_ids, NULL, out, sizeof(out)), -1);
}

static int reply_a_lot(void *arg, int out_fd)
{
	static char big[1 << 20];

	(void)arg;
	memset(big, 'x', sizeof(big));
	return phx_write_all(out_fd, big, sizeof(big)) < 0;
}

static void test_reply_is_bounded(void **state)
{
	char out[16];

	(void)state;
	/* More than a pipe holds: the parent drains it rather than deadlock. */
	assert_int_equal(phx_run_as(getuid(), getgid(), 10, reply_a_lot, NULL, out, sizeof(out)),
			 0);
	assert_string_equal(out, "xxxxxxxxxxxxxxx");
}

static int hang(void *arg, int out_fd)
{
	(void)arg;
	(void)out_fd;
	for (;;)
		pause();
	return 0;
}

static void test_hung_child_is_stopped(void **state)
{
	char out[16];

	(void)state;
	assert_int_equal(phx_run_as(getuid(), getgid(), 1, hang, NULL, out, sizeof(out)), -1);
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reply_and_status),
		cmocka_unit_test(test_becomes_the_user),
		cmocka_unit_test(test_cannot_become_another_user),
		cmocka_unit_test(test_reply_is_bounded),
		cmocka_unit_test(test_hung_child_is_stopped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The heartbeat page: its layout, and libphalanx's phx_heartbeat() writing into it. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint/proto/heartbeat.h"
#include "phalanx.h"

static void test_layout(void **state)
{
	size_t len = phx_hb_size(3);
	void *page = calloc(1, len);
	struct phx_hb_snapshot s;

	assert_int_equal(len, 64 + 3 * 64);
	assert_int_equal(phx_hb_check(page, len), -1); /* no magic yet */
	phx_hb_format(page, 3);
	assert_int_equal(phx_hb_check(page, len), 3);
	assert_int_equal(phx_hb_check(page, len - 1), -1);
	assert_int_equal(phx_hb_check(page, 8), -1);
	/* Slots are cache lines apart: workers never share one. */
	assert_int_equal((char *)phx_hb_slot(page, 1) - (char *)phx_hb_slot(page, 0), 64);
	phx_hb_reset(page, 2, 4242);
	phx_hb_beat(phx_hb_slot(page, 2), 17, 99);
	phx_hb_beat(phx_hb_slot(page, 2), 18, 100);
	phx_hb_read(page, 2, &s);
	assert_int_equal(s.step, 18);
	assert_int_equal(s.beat_ns, 100);
	assert_int_equal(s.beats, 2);
	assert_int_equal(s.pid, 4242);
	phx_hb_reset(page, 2, 7);
	phx_hb_read(page, 2, &s);
	assert_int_equal(s.beat_ns, 0);
	assert_int_equal(s.beats, 0);
	((struct phx_hb_header *)page)->version = 2;
	assert_int_equal(phx_hb_check(page, len), -1);
	free(page);
}

static void test_no_agent(void **state)
{
	unsetenv(PHX_HB_ENV_SHM);
	unsetenv(PHX_HB_ENV_SLOT);
	phx_finalize();
	assert_int_equal(phx_heartbeat(1), -PHX_ENOAGENT);
	assert_int_equal(phx_init(), -PHX_ENOAGENT);
	setenv(PHX_HB_ENV_SHM, "notanumber", 1);
	setenv(PHX_HB_ENV_SLOT, "0", 1);
	assert_int_equal(phx_heartbeat(1), -PHX_ENOAGENT);
	setenv(PHX_HB_ENV_SHM, "0", 1); /* stdin: not a heartbeat page */
	assert_int_equal(phx_heartbeat(1), -PHX_ENOAGENT);
}

static int page_fd(unsigned nslots, void **page)
{
	int fd = memfd_create("test-heartbeat", 0);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)phx_hb_size(nslots)), 0);
	*page = mmap(NULL, phx_hb_size(nslots), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(*page != MAP_FAILED);
	phx_hb_format(*page, nslots);
	return fd;
}

static void test_heartbeat_reaches_the_page(void **state)
{
	struct phx_hb_snapshot s;
	struct timespec now;
	char buf[16];
	void *page;
	int fd = page_fd(4, &page);

	phx_finalize();
	snprintf(buf, sizeof(buf), "%d", fd);
	setenv(PHX_HB_ENV_SHM, buf, 1);
	setenv(PHX_HB_ENV_SLOT, "3", 1);
	assert_int_equal(phx_heartbeat(-1), -PHX_EINVAL);
	assert_int_equal(phx_heartbeat(41), 0);
	assert_int_equal(phx_heartbeat(42), 0);
	phx_hb_read(page, 3, &s);
	clock_gettime(CLOCK_MONOTONIC, &now);
	assert_int_equal(s.step, 42);
	assert_int_equal(s.beats, 2);
	assert_true(s.beat_ns > 0);
	assert_true(s.beat_ns <= (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec);
	/* Other slots untouched. */
	phx_hb_read(page, 2, &s);
	assert_int_equal(s.beat_ns, 0);
	phx_finalize();
	/* Finalized: no beat time, so no hang, but the step stays for the record. */
	phx_hb_read(page, 3, &s);
	assert_true(s.beat_ns == 0);
	assert_int_equal(s.step, 42);
	/* A slot beyond the page is refused, not written. */
	setenv(PHX_HB_ENV_SLOT, "4", 1);
	assert_int_equal(phx_heartbeat(1), -PHX_ENOAGENT);
	assert_int_equal(phx_init(), -PHX_ENOAGENT);
	phx_finalize();
	munmap(page, phx_hb_size(4));
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_no_agent),
		cmocka_unit_test(test_heartbeat_reaches_the_page),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

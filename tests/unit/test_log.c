/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <cmocka.h>

#include "common/log.h"

static char last_line[8192];
static enum phx_log_level last_level;
static int lines;

static void capture(enum phx_log_level level, const char *line)
{
	snprintf(last_line, sizeof(last_line), "%s", line);
	last_level = level;
	lines++;
}

static int setup(void **state)
{
	phx_log_set_sink(capture);
	phx_log_set_level(PHX_LOG_INFO);
	last_line[0] = '\0';
	lines = 0;
	return 0;
}

static int teardown(void **state)
{
	phx_log_set_sink(NULL);
	return 0;
}

static void test_prefix_and_levels(void **state)
{
	phx_info("node %s is %d", "n1", 7);
	assert_string_equal(last_line, "phalanx: node n1 is 7");
	assert_int_equal(last_level, PHX_LOG_INFO);
	phx_error("bad %s", "thing");
	assert_string_equal(last_line, "phalanx: error: bad thing");
	phx_warn("careful");
	assert_string_equal(last_line, "phalanx: warning: careful");
	assert_int_equal(lines, 3);
}

static void test_filtering(void **state)
{
	phx_debug("hidden");
	assert_int_equal(lines, 0);
	phx_log_set_level(PHX_LOG_DEBUG);
	phx_debug("shown");
	assert_string_equal(last_line, "phalanx: shown");
	phx_log_set_level(PHX_LOG_ERROR);
	phx_warn("hidden");
	phx_info("hidden");
	assert_int_equal(lines, 1);
	phx_error("x");
	assert_int_equal(lines, 2);
}

static void test_trailing_newline_and_truncation(void **state)
{
	char big[10000];

	phx_info("ends with newline\n");
	assert_string_equal(last_line, "phalanx: ends with newline");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	phx_info("%s", big);
	assert_true(strncmp(last_line, "phalanx: aaa", 12) == 0);
	assert_true(strlen(last_line) < 4096);
}

/* --log-time: RFC 3339 local time to the millisecond after the prefix, then the line. */
static void test_time_stamp(void **state)
{
	struct timeval before, after;
	struct tm tm;
	char date[16];
	int y, mo, d, h, mi, sec, ms, zh, zm;
	char sign;

	gettimeofday(&before, NULL);
	phx_log_set_time(true);
	phx_error("bad %s", "thing");
	phx_log_set_time(false);
	gettimeofday(&after, NULL);
	assert_int_equal(sscanf(last_line, "phalanx: %4d-%2d-%2dT%2d:%2d:%2d.%3d%c%2d:%2d ", &y,
				&mo, &d, &h, &mi, &sec, &ms, &sign, &zh, &zm),
			 10);
	assert_true(sign == '+' || sign == '-');
	assert_non_null(strstr(last_line, " error: bad thing"));
	assert_int_equal(strlen(last_line), strlen("phalanx: 2026-12-03T18:45:42.123+01:00 "
						   "error: bad thing"));
	/* The date is today's, as localtime says (or tomorrow's past midnight). */
	localtime_r(&before.tv_sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d", &tm);
	if (strncmp(last_line + 9, date, 10)) {
		localtime_r(&after.tv_sec, &tm);
		strftime(date, sizeof(date), "%Y-%m-%d", &tm);
		assert_memory_equal(last_line + 9, date, 10);
	}
	phx_info("plain again");
	assert_string_equal(last_line, "phalanx: plain again");
}

static void test_level_parse(void **state)
{
	enum phx_log_level l;

	assert_int_equal(phx_log_level_parse("debug", &l), 0);
	assert_int_equal(l, PHX_LOG_DEBUG);
	assert_int_equal(phx_log_level_parse("WARN", &l), 0);
	assert_int_equal(l, PHX_LOG_WARN);
	assert_int_equal(phx_log_level_parse("verbose", &l), -1);
	assert_int_equal(phx_log_level_parse("", &l), -1);
	assert_int_equal(phx_log_level_parse(NULL, &l), -1);
	assert_string_equal(phx_log_level_name(PHX_LOG_ERROR), "error");
	assert_string_equal(phx_log_level_name((enum phx_log_level)42), "unknown");
	/* Out-of-range levels are ignored, not stored. */
	phx_log_set_level((enum phx_log_level)42);
	assert_int_equal(phx_log_get_level(), PHX_LOG_INFO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_prefix_and_levels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_filtering, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trailing_newline_and_truncation, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_time_stamp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_level_parse, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

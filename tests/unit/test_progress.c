/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx ckpt verify's progress lines: when they come, what they say. */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/progress.h"

#define GIB (1ull << 30)

struct sink {
	char *text;
	size_t len;
	FILE *f;
};

static void sink_open(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	s->f = open_memstream(&s->text, &s->len);
	assert_non_null(s->f);
}

static void sink_close(struct sink *s)
{
	fclose(s->f);
	free(s->text);
}

static void test_quick_work_says_nothing(void **state)
{
	struct phx_progress p;
	struct sink s;

	(void)state;
	sink_open(&s);
	phx_progress_init(&p, "verify", "ranks", 4, 4 * GIB, s.f, false, 100.0);
	for (int i = 0; i < 4; i++)
		phx_progress_add(&p, 1, GIB, 100.0 + i);
	phx_progress_end(&p);
	fflush(s.f);
	assert_int_equal(s.len, 0);
	sink_close(&s);
}

static void test_log_lines_every_ten_seconds(void **state)
{
	struct phx_progress p;
	struct sink s;

	(void)state;
	sink_open(&s);
	phx_progress_init(&p, "verify", "ranks", 4, 4 * GIB, s.f, false, 0.0);
	phx_progress_add(&p, 1, GIB, 5.0); /* not due yet */
	phx_progress_add(&p, 1, GIB, 10.0); /* 2 GiB in 10 s: 10 s for the rest */
	phx_progress_add(&p, 1, GIB, 12.0); /* due again at 20 s */
	fflush(s.f);
	assert_string_equal(s.text, "phalanx: verify: 2 of 4 ranks, 2.0 GiB of 4.0 GiB, "
				    "204.8 MiB/s, about 10 s left\n");
	phx_progress_add(&p, 1, GIB, 30.0); /* done: the caller's summary says the rest */
	phx_progress_end(&p);
	fflush(s.f);
	assert_null(strchr(strchr(s.text, '\n') + 1, '\n'));
	sink_close(&s);
}

static void test_tty_rewrites_one_line(void **state)
{
	struct phx_progress p;
	struct sink s;

	(void)state;
	sink_open(&s);
	phx_progress_init(&p, "verify", "ranks", 3, 0, s.f, true, 0.0);
	phx_progress_add(&p, 1, 0, 1.0);
	phx_progress_clear(&p); /* a warning is about to be printed */
	phx_progress_add(&p, 1, 0, 2.0);
	phx_progress_end(&p);
	fflush(s.f);
	/* No bytes to go by: the time left comes from the units done. */
	assert_string_equal(s.text,
			    "\rphalanx: verify: 1 of 3 ranks, 0 B of 0 B, 0 B/s, about 2 s "
			    "left\033[K\r\033[K\rphalanx: verify: 2 of 3 ranks, 0 B of 0 B, "
			    "0 B/s, about 1 s left\033[K\r\033[K");
	sink_close(&s);
}

static void *adder(void *arg)
{
	for (int i = 0; i < 10000; i++)
		phx_progress_add(arg, 1, 3, 0.0);
	return NULL;
}

static void test_threads_add_up(void **state)
{
	struct phx_progress p;
	pthread_t t[4];
	struct sink s;

	(void)state;
	sink_open(&s);
	phx_progress_init(&p, "verify", "ranks", 40000, 120000, s.f, false, 0.0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, adder, &p), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(p.done, 40000);
	assert_int_equal(p.bytes, 120000);
	phx_progress_end(&p);
	sink_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quick_work_says_nothing),
		cmocka_unit_test(test_log_lines_every_ten_seconds),
		cmocka_unit_test(test_tty_rewrites_one_line),
		cmocka_unit_test(test_threads_add_up),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The restart decisions, the round reports, output lines and error files. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "launcher/output.h"
#include "launcher/restart.h"
#include "launcher/role.h"

static struct phx_report running(unsigned epoch)
{
	return (struct phx_report){ .epoch = epoch, .state = PHX_NODE_RUNNING, .fail_rank = -1 };
}

static struct phx_report failed(unsigned epoch, uint64_t when, long rank)
{
	return (struct phx_report){ .epoch = epoch,
				    .state = PHX_NODE_FAILED,
				    .fail_ns = when,
				    .fail_rank = rank,
				    .kind = PHX_FAIL_EXIT,
				    .code = 1 };
}

static struct phx_report done(unsigned epoch)
{
	return (struct phx_report){ .epoch = epoch, .state = PHX_NODE_DONE, .fail_rank = -1 };
}

static void decide(const struct phx_report *r, size_t n, unsigned epoch, unsigned max,
		   enum phx_action want, long first)
{
	struct phx_role_state role = { PHX_RESTART_GROUP, epoch, max };
	struct phx_decision d;

	phx_restart_decide(r, n, &role, 1, &d);
	assert_int_equal(d.action, want);
	assert_int_equal(d.first, first);
}

static void test_all_running_continues(void **state)
{
	struct phx_report r[] = { running(0), running(0), running(0) };

	decide(r, 3, 0, 3, PHX_ACT_CONTINUE, -1);
}

static void test_earliest_failure_restarts(void **state)
{
	/* Node 2 failed first; node 0's failure is its consequence. */
	struct phx_report r[] = { failed(1, 500, 0), running(1), failed(1, 200, 5), done(1) };

	decide(r, 4, 1, 3, PHX_ACT_RESTART, 2);
}

static void test_ties_go_to_the_lowest_agent(void **state)
{
	struct phx_report r[] = { running(0), failed(0, 100, 3), failed(0, 100, 1) };

	decide(r, 3, 0, 1, PHX_ACT_RESTART, 1);
}

/* A worker that waits in a collective is a victim: the stopped one is the cause. */
static void test_waiting_hangs_come_last(void **state)
{
	struct phx_report r[] = { failed(0, 100, 1), failed(0, 300, 5), failed(0, 50, 7) };

	r[0].kind = r[1].kind = r[2].kind = PHX_FAIL_HANG;
	r[0].waiting = r[2].waiting = true;
	decide(r, 3, 0, 3, PHX_ACT_RESTART, 1);
	r[1].waiting = true;
	decide(r, 3, 0, 3, PHX_ACT_RESTART, 2);
}

static void test_out_of_restarts_gives_up(void **state)
{
	struct phx_report r[] = { running(2), failed(2, 7, 2) };

	decide(r, 2, 2, 2, PHX_ACT_GIVE_UP, 1);
	/* max_restarts 0: the first failure ends the job. */
	r[1].epoch = 0;
	r[0].epoch = 0;
	decide(r, 2, 0, 0, PHX_ACT_GIVE_UP, 1);
}

static void test_all_done_succeeds(void **state)
{
	struct phx_report r[] = { done(1), done(1), done(1) };

	decide(r, 3, 1, 3, PHX_ACT_SUCCESS, -1);
	r[1] = running(1);
	decide(r, 3, 1, 3, PHX_ACT_CONTINUE, -1);
	decide(r, 0, 0, 3, PHX_ACT_CONTINUE, -1);
}

/* A failure reported for an epoch already being replaced is not acted on again. */
static void test_late_failure_of_old_epoch_ignored(void **state)
{
	struct phx_report r[] = { running(3), failed(2, 10, 4), running(3) };

	decide(r, 3, 3, 5, PHX_ACT_CONTINUE, -1);
	r[1] = failed(3, 20, 4);
	decide(r, 3, 3, 5, PHX_ACT_RESTART, 1);
}

static void test_shutdown_wins(void **state)
{
	struct phx_report r[] = { failed(0, 1, 0), running(0), running(0) };

	r[2].state = PHX_NODE_SHUTDOWN;
	decide(r, 3, 0, 3, PHX_ACT_SHUTDOWN, 0);
	/* Even a shutdown report of another epoch stops the job. */
	r[0] = running(0);
	r[2].epoch = 9;
	decide(r, 3, 0, 3, PHX_ACT_SHUTDOWN, -1);
}

static void test_report_round_trip(void **state)
{
	struct phx_report in = { .epoch = 7,
				 .state = PHX_NODE_FAILED,
				 .fail_ns = 1790000000123456789ull,
				 .fail_rank = 4095,
				 .kind = PHX_FAIL_HANG,
				 .code = 30,
				 .waiting = true },
			  out;
	char buf[256];

	in.role = 3;
	assert_true(phx_report_format(&in, NULL, buf, sizeof(buf)) < (int)sizeof(buf));
	assert_int_equal(phx_report_parse(buf, 4, &out), 0);
	assert_int_equal(out.role, 3);
	assert_int_equal(out.rates_at, 0);
	/* The role must be one of the job's. */
	assert_int_equal(phx_report_parse(buf, 3, &out), -1);
	assert_int_equal(phx_report_parse(buf, 4, &out), 0);
	/* Field by field: padding bytes are not part of the report. */
	assert_int_equal(out.epoch, in.epoch);
	assert_int_equal(out.state, in.state);
	assert_true(out.fail_ns == in.fail_ns);
	assert_int_equal(out.fail_rank, in.fail_rank);
	assert_int_equal(out.kind, in.kind);
	assert_int_equal(out.code, in.code);
	assert_int_equal(out.waiting, in.waiting);
	in = running(0);
	phx_report_format(&in, NULL, buf, sizeof(buf));
	assert_int_equal(phx_report_parse(buf, 1, &out), 0);
	assert_int_equal(out.fail_rank, -1);
	/* With step rates: they follow " ;", where rates_at points. */
	phx_report_format(&in, " 3:1500:10", buf, sizeof(buf));
	assert_int_equal(phx_report_parse(buf, 1, &out), 0);
	assert_string_equal(buf + out.rates_at, " 3:1500:10");
}

static void test_report_refusals(void **state)
{
	struct phx_report r;

	assert_int_equal(phx_report_parse("", 1, &r), -1);
	assert_int_equal(phx_report_parse("1 0 0 0 -1 0 0 0", 1, &r), -1); /* version 1 */
	assert_int_equal(phx_report_parse("2 0 0 9 0 -1 0 0 0", 1, &r), -1); /* state */
	assert_int_equal(phx_report_parse("2 0 0 0 0 -1 7 0 0", 1, &r), -1); /* kind */
	assert_int_equal(phx_report_parse("2 0 0 0 0 -1 0 0 2", 1, &r), -1); /* waiting */
	assert_int_equal(phx_report_parse("2 0 0 0 0 -2 0 0 0", 1, &r), -1); /* rank */
	assert_int_equal(phx_report_parse("2 1 0 0 0 -1 0 0 0", 1, &r), -1); /* role */
	assert_int_equal(phx_report_parse("2 0 0 0 0 -1 0 0 0 x", 1, &r), -1); /* trailing */
	assert_int_equal(phx_report_parse("2 0 0 0 0 -1 0 0 0|", 1, &r), -1);
	assert_int_equal(phx_report_parse("2 0 0 0 0 -1 0 0", 1, &r), -1); /* short */
	assert_int_equal(phx_report_parse("44019", 1, &r), -1); /* another fence's value */
	assert_int_equal(phx_report_parse("2 0 0 5 0 -1 0 0 1", 1, &r), 0);
	assert_true(r.waiting);
	assert_int_equal(r.state, PHX_NODE_PREEMPTED);
}

static void test_fail_describe(void **state)
{
	struct phx_report r = failed(0, 0, 0);
	char buf[128];

	assert_string_equal(phx_fail_describe(&r, buf, sizeof(buf)), "exited with code 1");
	r.kind = PHX_FAIL_SIGNAL;
	r.code = 9;
	assert_string_equal(phx_fail_describe(&r, buf, sizeof(buf)),
			    "was killed by signal 9 (SIGKILL)");
	r.kind = PHX_FAIL_HANG;
	r.code = 30;
	assert_string_equal(phx_fail_describe(&r, buf, sizeof(buf)),
			    "hung: no heartbeat progress for 30 s");
}

struct lines {
	char text[4][PHX_LINE_MAX + 1];
	size_t len[4];
	int n;
};

static void collect(void *arg, const char *line, size_t len)
{
	struct lines *l = arg;

	assert_true(l->n < 4);
	memcpy(l->text[l->n], line, len);
	l->text[l->n][len] = '\0';
	l->len[l->n++] = len;
}

static void test_linebuf(void **state)
{
	static struct phx_linebuf lb;
	static struct lines l;
	static char big[PHX_LINE_MAX + 10];

	phx_linebuf_feed(&lb, "hel", 3, collect, &l);
	assert_int_equal(l.n, 0);
	phx_linebuf_feed(&lb, "lo\n\nwor", 7, collect, &l);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.text[0], "hello");
	assert_string_equal(l.text[1], "");
	phx_linebuf_flush(&lb, collect, &l);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.text[2], "wor");
	phx_linebuf_flush(&lb, collect, &l);
	assert_int_equal(l.n, 3);
	/* A line longer than the buffer is cut, nothing is lost. */
	memset(&l, 0, sizeof(l));
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	phx_linebuf_feed(&lb, big, sizeof(big), collect, &l);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.len[0], PHX_LINE_MAX);
	assert_int_equal(l.len[1], 9);
}

static void test_errfile(void **state)
{
	const char *torch =
		"{\"message\": {\"message\": \"ValueError: boom on rank 3\", "
		"\"extraInfo\": {\"py_callstack\": \"Traceback (most recent call "
		"last):\\n  File \\\"x.py\\\", line 3\\nValueError: boom on rank 3\\n\", "
		"\"timestamp\": \"1790000000\"}}}";
	char msg[256], trace[512];

	assert_int_equal(phx_errfile_parse(torch, msg, sizeof(msg), trace, sizeof(trace)), 0);
	assert_string_equal(msg, "ValueError: boom on rank 3");
	assert_non_null(strstr(trace, "File \"x.py\", line 3\nValueError"));
	assert_int_equal(trace[strlen(trace) - 1], '3');
	assert_int_equal(phx_errfile_parse("{\"message\": \"plain\"}", msg, sizeof(msg), trace,
					   sizeof(trace)),
			 0);
	assert_string_equal(msg, "plain");
	assert_string_equal(trace, "");
	assert_int_equal(phx_errfile_parse("  not json\n", msg, sizeof(msg), trace, sizeof(trace)),
			 0);
	assert_string_equal(msg, "not json");
	assert_int_equal(phx_errfile_parse("\n", msg, sizeof(msg), trace, sizeof(trace)), -1);
	/* A peer's death seen by a collective is a consequence, not a root cause. */
	assert_true(phx_errfile_peer_lost(
		"RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer "
		"[10.77.1.12]:9404"));
	assert_true(phx_errfile_peer_lost("NCCL error: remote process exited or there was a "
					  "network error"));
	assert_false(phx_errfile_peer_lost("ValueError: injected failure on rank 3 at step 2"));
	assert_false(phx_errfile_peer_lost(""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_running_continues),
		cmocka_unit_test(test_earliest_failure_restarts),
		cmocka_unit_test(test_ties_go_to_the_lowest_agent),
		cmocka_unit_test(test_waiting_hangs_come_last),
		cmocka_unit_test(test_out_of_restarts_gives_up),
		cmocka_unit_test(test_all_done_succeeds),
		cmocka_unit_test(test_late_failure_of_old_epoch_ignored),
		cmocka_unit_test(test_shutdown_wins),
		cmocka_unit_test(test_report_round_trip),
		cmocka_unit_test(test_report_refusals),
		cmocka_unit_test(test_fail_describe),
		cmocka_unit_test(test_linebuf),
		cmocka_unit_test(test_errfile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

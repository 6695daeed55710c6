/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "launcher/options.h"

#define NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

static int parse(char **argv, int argc, struct phx_launch_opts *o, char *err)
{
	return phx_launch_parse(argc, argv, o, err, 512);
}

static void test_agent_with_command(void **state)
{
	char *argv[] = { "phalanx-launch",
			 "--agent",
			 "--nproc-per-node",
			 "2",
			 "--hang-timeout",
			 "5",
			 "--max-restarts",
			 "1",
			 "--layout",
			 "tp=2,dp=*",
			 "--place",
			 "block",
			 "--log-dir",
			 "logs",
			 "--",
			 "python3",
			 "train.py",
			 "--steps",
			 "3",
			 NULL };
	struct phx_launch_opts o;
	char err[512];

	assert_int_equal(parse(argv, NARGS(argv), &o, err), 0);
	assert_true(o.agent);
	assert_int_equal(o.nproc_per_node, 2);
	assert_int_equal(o.hang_timeout_s, 5);
	assert_int_equal(o.max_restarts, 1);
	assert_string_equal(o.layout, "tp=2,dp=*");
	assert_int_equal(o.place, PHX_PLACE_BLOCK);
	assert_string_equal(o.log_dir, "logs");
	/* The command's own options stay the command's. */
	assert_int_equal(o.argc, 4);
	assert_string_equal(o.argv[0], "python3");
	assert_string_equal(o.argv[2], "--steps");
}

/* Durations as Slurm writes times; a bare number is seconds. */
static void test_durations(void **state)
{
	char *argv[] = { "phalanx-launch",
			 "--agent",
			 "--hang-timeout",
			 "10:00",
			 "--term-timeout",
			 "90",
			 "--evidence-timeout",
			 "0:30",
			 "--preempt-grace",
			 "1-00:00:00",
			 "--straggler-window",
			 "1:00:00",
			 "true",
			 NULL };
	struct phx_launch_opts o;
	char err[512];

	assert_int_equal(parse(argv, NARGS(argv), &o, err), 0);
	assert_int_equal(o.hang_timeout_s, 600);
	assert_int_equal(o.term_timeout_s, 90);
	assert_int_equal(o.evidence_timeout_s, 30);
	assert_int_equal(o.preempt_grace_s, 86400);
	assert_int_equal(o.straggler_window_s, 3600);
}

static void test_command_without_dashes(void **state)
{
	char *argv[] = { "phalanx-launch", "--agent", "env", "--version", NULL };
	struct phx_launch_opts o;
	char err[512];

	assert_int_equal(parse(argv, NARGS(argv), &o, err), 0);
	assert_int_equal(o.argc, 2);
	assert_string_equal(o.argv[1], "--version");
	/* Left to phalanx.yaml, and the built-in defaults. */
	assert_int_equal(o.hang_timeout_s, -1);
	assert_int_equal(o.max_restarts, -1);
	assert_int_equal(o.term_timeout_s, 10);
	assert_int_equal(o.sync_ms, 1000);
	assert_int_equal(o.place, PHX_PLACE_TOPO);
}

static void test_conf_fills_defaults(void **state)
{
	char *argv[] = { "phalanx-launch", "--agent", "--max-restarts", "0", "true", NULL };
	struct phx_launch_opts o;
	struct phx_conf conf;
	char err[512];

	assert_int_equal(phx_conf_defaults(&conf), 0);
	assert_int_equal(parse(argv, NARGS(argv), &o, err), 0);
	phx_launch_apply_conf(&o, &conf);
	assert_int_equal(o.hang_timeout_s, conf.launcher.hang_timeout_s);
	/* An explicit 0 is not "unset". */
	assert_int_equal(o.max_restarts, 0);
	/* launcher.log_time, unless --log-time asks for the time anyway. */
	assert_int_equal(o.log_time, 0);
	phx_launch_opts_free(&o);
	conf.launcher.log_time = true;
	assert_int_equal(parse(argv, NARGS(argv), &o, err), 0);
	phx_launch_apply_conf(&o, &conf);
	assert_int_equal(o.log_time, 1);
	phx_launch_opts_free(&o);
	conf.launcher.log_time = false;
	{
		char *with[] = { "phalanx-launch", "--agent", "--log-time", "true", NULL };

		assert_int_equal(parse(with, NARGS(with), &o, err), 0);
		phx_launch_apply_conf(&o, &conf);
		assert_int_equal(o.log_time, 1);
	}
	phx_launch_opts_free(&o);
	phx_conf_free(&conf);
}

/* The job's checkpoint settings go over the site's, checked as in phalanx.yaml. */
static void test_job_checkpoint_settings(void **state)
{
	char *argv[] = { "phalanx-launch",
			 "--ckpt-dir",
			 "/scratch/%u/ckpt-%j",
			 "--save-interval",
			 "50",
			 "--keep=5",
			 "--",
			 "true",
			 NULL };
	static const struct {
		const char *opt, *value, *want;
	} bad[] = {
		{ "--keep", "0",
		  "--keep: key 'checkpoint.keep': expected an integer from 1 to 1000, "
		  "got '0'; out of range" },
		{ "--save-interval", "ten", "--save-interval: key 'checkpoint.interval'" },
		{ "--ckpt-dir", "ckpt",
		  "--ckpt-dir: key 'checkpoint.shared_dir': expected an "
		  "absolute path" },
		{ "--ckpt-dir", "/ckpt/%n", "'%n' is not known here" },
	};
	struct phx_launch_opts o;
	struct phx_conf conf;
	char err[512];

	(void)state;
	assert_int_equal(phx_conf_defaults(&conf), 0);
	assert_int_equal(parse(argv, NARGS(argv), &o, err), 0);
	assert_int_equal(phx_launch_override_conf(&o, &conf, err, sizeof(err)), 0);
	assert_string_equal(conf.checkpoint.shared_dir, "/scratch/%u/ckpt-%j");
	assert_int_equal(conf.checkpoint.interval, 50);
	assert_int_equal(conf.checkpoint.keep, 5);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *args[] = { "phalanx-launch", (char *)bad[i].opt, (char *)bad[i].value, "true",
				 NULL };

		assert_int_equal(parse(args, NARGS(args), &o, err), 0);
		assert_int_equal(phx_launch_override_conf(&o, &conf, err, sizeof(err)), -1);
		if (!strstr(err, bad[i].want))
			fail_msg("%s %s: '%s' lacks '%s'", bad[i].opt, bad[i].value, err,
				 bad[i].want);
	}
	/* Refused values left the settings as they were. */
	assert_string_equal(conf.checkpoint.shared_dir, "/scratch/%u/ckpt-%j");
	assert_int_equal(conf.checkpoint.keep, 5);
	phx_conf_free(&conf);
}

static void expect_error(char **argv, int argc, const char *needle)
{
	struct phx_launch_opts o;
	char err[512] = "";

	assert_int_equal(parse(argv, argc, &o, err), -1);
	if (!strstr(err, needle))
		fail_msg("error '%s' lacks '%s'", err, needle);
}

static void test_refusals(void **state)
{
	char *no_cmd[] = { "phalanx-launch", "--agent", NULL };
	char *agent_spares[] = { "phalanx-launch", "--agent", "--spares", "1", "true", NULL };
	char *bad_n[] = { "phalanx-launch", "--agent", "--nproc-per-node", "0", "true", NULL };
	char *bad_n2[] = { "phalanx-launch", "--agent", "--nproc-per-node", "2x", "true", NULL };
	char *bad_place[] = { "phalanx-launch", "--agent", "--place", "off", "true", NULL };
	char *bad_hang[] = { "phalanx-launch", "--agent", "--hang-timeout", "-3", "true", NULL };
	char *bad_grace[] = { "phalanx-launch", "--agent", "--preempt-grace",
			      "1-00:00:01",	"true",	   NULL };
	char *unknown[] = { "phalanx-launch", "--agent", "--bogus", "true", NULL };
	char *missing[] = { "phalanx-launch", "--agent", "--max-restarts", NULL };
	char *bad_id[] = { "phalanx-launch", "--agent", "--run-id", "a b", "true", NULL };

	expect_error(no_cmd, NARGS(no_cmd), "no command");
	expect_error(agent_spares, NARGS(agent_spares), "for the driver");
	expect_error(bad_n, NARGS(bad_n), "--nproc-per-node '0'");
	expect_error(bad_n2, NARGS(bad_n2), "--nproc-per-node '2x'");
	expect_error(bad_place, NARGS(bad_place), "topo or block");
	expect_error(bad_hang, NARGS(bad_hang),
		     "--hang-timeout '-3' is not a duration of 1 to 86400");
	expect_error(bad_grace, NARGS(bad_grace), "--preempt-grace '1-00:00:01'");
	expect_error(unknown, NARGS(unknown), "--bogus");
	expect_error(missing, NARGS(missing), "--max-restarts");
	expect_error(bad_id, NARGS(bad_id), "one word");
}

static void test_help(void **state)
{
	char *argv[] = { "phalanx-launch", "--help", NULL };
	struct phx_launch_opts o;
	char err[512];
	FILE *saved = stdout;

	stdout = fopen("/dev/null", "w");
	assert_non_null(stdout);
	assert_int_equal(parse(argv, NARGS(argv), &o, err), 1);
	fclose(stdout);
	stdout = saved;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_with_command),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_job_checkpoint_settings),
		cmocka_unit_test(test_command_without_dashes),
		cmocka_unit_test(test_conf_fills_defaults),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_help),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

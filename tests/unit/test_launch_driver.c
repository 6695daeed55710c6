/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Driver mode's pure parts: its options and the agents' command line, the
 * mode, the result line, srun's reports, node choice, elastic layouts,
 * failure signatures and the decision after a step.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "health/preflight.h"
#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/result.h"
#include "launcher/standin.h"
#include "placement/rankmap.h"
#include "launcher/driver/driver_plan.h"
#include "launcher/driver/driver_preflight.h"

#define NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

static void test_driver_options(void **state)
{
	char *argv[] = { "phalanx-launch",
			 "--spares",
			 "2",
			 "--elastic",
			 "--max-relaunches=5",
			 "--same-failure-limit",
			 "3",
			 "--drain-bad-nodes",
			 "--nproc-per-node",
			 "2",
			 "--",
			 "python",
			 "t.py",
			 "--spares",
			 "9",
			 NULL };
	struct phx_launch_opts o;
	char err[512];

	(void)state;
	assert_int_equal(phx_launch_parse(NARGS(argv), argv, &o, err, sizeof(err)), 0);
	assert_false(o.agent);
	assert_true(o.driver.any);
	assert_int_equal(o.driver.spares, 2);
	assert_true(o.driver.elastic);
	assert_int_equal(o.driver.max_relaunches, 5);
	assert_int_equal(o.driver.same_failure_limit, 3);
	assert_int_equal(o.driver.drain, 1);
	assert_int_equal(o.nproc_per_node, 2);
	assert_int_equal(o.argc, 4);
	assert_string_equal(o.argv[0], "python");
}

static void test_driver_defaults_and_refusals(void **state)
{
	char *plain[] = { "phalanx-launch", "--", "true", NULL };
	char *zero_k[] = { "phalanx-launch", "--same-failure-limit", "0", "true", NULL };
	char *neg[] = { "phalanx-launch", "--spares", "-1", "true", NULL };
	struct phx_launch_opts o;
	char err[512];

	(void)state;
	assert_int_equal(phx_launch_parse(NARGS(plain), plain, &o, err, sizeof(err)), 0);
	assert_false(o.driver.any);
	assert_int_equal(o.driver.spares, -1);
	assert_int_equal(o.driver.drain, -1);
	assert_int_equal(phx_launch_parse(NARGS(zero_k), zero_k, &o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--same-failure-limit '0'"));
	assert_int_equal(phx_launch_parse(NARGS(neg), neg, &o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--spares '-1'"));
}

/*
 * --srun-arg: passed to each step's srun in order, never to the agents; the
 * step's shape stays the driver's.
 */
static void test_srun_args(void **state)
{
	char *argv[] = { "phalanx-launch",
			 "--srun-arg=--container-image=nvcr.io#nvidia/pytorch:24.10-py3",
			 "--srun-arg",
			 "--cpu-bind=none",
			 "--srun-arg=--mpi=pmix_v5",
			 "--",
			 "python",
			 NULL };
	static const char *const refused[] = {
		"-N2",	   "--nodes=3",	   "-n4",	  "--ntasks=2", "--ntasks-per-node=2",
		"-wnode1", "--nodelist=a", "--exclude=b", "--overlap",	"container",
		NULL
	};
	char *ok[] = { "phalanx-launch", "--srun-arg=--network=sn_all",
		       "--srun-arg=-l",	 "--",
		       "true",		 NULL };
	struct phx_launch_opts o;
	char err[512], opt[64];
	char **v;
	int n;

	(void)state;
	assert_int_equal(phx_launch_parse(NARGS(argv), argv, &o, err, sizeof(err)), 0);
	assert_int_equal(o.driver.n_srun_args, 3);
	assert_string_equal(o.driver.srun_args[0],
			    "--container-image=nvcr.io#nvidia/pytorch:24.10-py3");
	assert_string_equal(o.driver.srun_args[1], "--cpu-bind=none");
	assert_string_equal(o.driver.srun_args[2], "--mpi=pmix_v5");
	v = phx_driver_agent_args(NARGS(argv) - 1, argv + 1, NULL, &n);
	assert_non_null(v);
	assert_int_equal(n, 2);
	assert_string_equal(v[0], "--");
	free(v);
	for (size_t i = 0; refused[i]; i++) {
		char *bad[] = { "phalanx-launch", opt, "--", "true", NULL };

		snprintf(opt, sizeof(opt), "--srun-arg=%s", refused[i]);
		assert_int_equal(phx_launch_parse(NARGS(bad), bad, &o, err, sizeof(err)), -1);
		if (!strstr(err, refused[i]))
			fail_msg("'%s': %s", refused[i], err);
	}
	/* Names like theirs that do not shape the step pass. */
	assert_int_equal(phx_launch_parse(NARGS(ok), ok, &o, err, sizeof(err)), 0);
	assert_int_equal(o.driver.n_srun_args, 2);
}

static void test_agent_args(void **state)
{
	char *argv[] = { "--spares", "1",	  "--nproc-per-node",	"2",	  "--elastic",
			 "--layout", "tp=2,dp=*", "--max-relaunches=4", "--srun", "/x/srun",
			 "--",	     "python",	  "--spares",		"3",	  NULL };
	char **v;
	int n;

	(void)state;
	v = phx_driver_agent_args(NARGS(argv), argv, NULL, &n);
	assert_non_null(v);
	assert_int_equal(n, 8);
	assert_string_equal(v[0], "--nproc-per-node");
	assert_string_equal(v[2], "--layout");
	assert_string_equal(v[3], "tp=2,dp=*");
	assert_string_equal(v[4], "--");
	/* The command's own words are the command's. */
	assert_string_equal(v[6], "--spares");
	assert_string_equal(v[7], "3");
	assert_null(v[8]);
	free(v);
	v = phx_driver_agent_args(NARGS(argv), argv, "tp=2,dp=3", &n);
	assert_non_null(v);
	assert_int_equal(n, 8);
	assert_string_equal(v[0], "--layout");
	assert_string_equal(v[1], "tp=2,dp=3");
	assert_string_equal(v[2], "--nproc-per-node");
	assert_string_equal(v[4], "--");
	free(v);
}

static void test_mode(void **state)
{
	char err[512];

	(void)state;
	assert_int_equal(phx_launch_mode(true, NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(phx_launch_mode(false, "12", NULL, err, sizeof(err)), 1);
	assert_int_equal(phx_launch_mode(false, "12", "", err, sizeof(err)), 1);
	assert_int_equal(phx_launch_mode(false, "12", "0", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--agent"));
	assert_int_equal(phx_launch_mode(false, NULL, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "SLURM_JOB_ID"));
}

static void test_result_round_trip(void **state)
{
	struct phx_result r = { .rank = 5, .kind = 1, .code = 1, .step = 42, .restarts = 2 }, b;
	char line[4096];
	int n;

	(void)state;
	snprintf(r.node, sizeof(r.node), "gpu-a17");
	snprintf(r.msg, sizeof(r.msg), "ValueError: bad 100%% input\tat x");
	n = phx_result_format(&r, line, sizeof(line));
	assert_true(n > 0 && (size_t)n < sizeof(line));
	assert_int_equal(line[n - 1], '\n');
	assert_null(strchr(line, '\t'));
	assert_int_equal(phx_result_parse(line, (size_t)n, &b), 0);
	assert_int_equal(b.rank, 5);
	assert_int_equal(b.kind, 1);
	assert_int_equal(b.code, 1);
	assert_int_equal(b.step, 42);
	assert_int_equal(b.restarts, 2);
	assert_string_equal(b.node, "gpu-a17");
	assert_string_equal(b.msg, r.msg);
	/* Empty message. */
	r.msg[0] = '\0';
	n = phx_result_format(&r, line, sizeof(line));
	assert_int_equal(phx_result_parse(line, (size_t)n, &b), 0);
	assert_string_equal(b.msg, "");
}

static void test_result_refusals(void **state)
{
	static const char *const bad[] = {
		"phalanx: result 2 workers-failed rank=1 node=n kind=1 code=1 step=1 restarts=0 "
		"msg=x",
		"phalanx: result 1 workers-failed rank=1 node=n kind=1 code=1 step=1 restarts=0",
		"phalanx: result 1 workers-failed rank=1 node=n kind=1 code=1 step=1 restarts=0 "
		"msg=x msg=y",
		"phalanx: result 1 workers-failed rank=1 node=n kind=1 code=1 step=1 restarts=0 "
		"msg=%4",
		"phalanx: result 1 workers-failed rank=1 node=n kind=1 code=1 step=1 restarts=0 "
		"msg=%00",
		"phalanx: result 1 workers-failed rank=x node=n kind=1 code=1 step=1 restarts=0 "
		"msg=a",
		"phalanx: result 1 workers-failed rank=1 node=n kind=1 code=1 step=-1 restarts=0 "
		"msg=a",
		"phalanx: result 1 workers-failed rank=1 node=n kind=1 code=1 step=1 restarts=0 "
		"msg=a extra=1",
		"phalanx: result 1 workers-failed  rank=1 node=n kind=1 code=1 step=1 restarts=0 "
		"msg=a",
		"phalanx: result 1 workers-failed rank=1 node= kind=1 code=1 step=1 restarts=0 "
		"msg=a",
		"phalanx: info: starting",
		"",
	};
	struct phx_result r;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (phx_result_parse(bad[i], strlen(bad[i]), &r) == 0)
			fail_msg("accepted '%s'", bad[i]);
	}
}

static void test_srun_lines(void **state)
{
	char node[64];
	static const char *const other[] = {
		"srun: error: node2: task 1: Exited with exit code 1",
		"srun: error: node2: tasks 0-3: Exited with exit code 143",
		"srun: Job step aborted: Waiting up to 7 seconds for job step to finish.",
		"srun: error: Node failure on ",
		"srun: error: : task 1: Killed",
		"[rank 0] srun: error: node2: task 1: Killed",
		"srun: error: no\tde2: task 1: Killed",
	};

	(void)state;
	assert_int_equal(
		phx_srun_line_parse("srun: error: Node failure on node3", 34, node, sizeof(node)),
		1);
	assert_string_equal(node, "node3");
	assert_int_equal(
		phx_srun_line_parse("srun: error: node4: task 3: Killed\n", 35, node, sizeof(node)),
		2);
	assert_string_equal(node, "node4");
	/* A failed launch, as srun 22.05 to 24.11 says it: no node is named as lost. */
	{
		static const char *const launch[] = {
			"srun: error: task 0 launch failed: Unspecified error",
			"srun: error: task 12 launch failed: Slurmd could not execve job",
			"srun: error: Task launch for StepId=14.0 failed on node node1: "
			"Unspecified "
			"error",
			"srun: error: Application launch failed: Unspecified error",
			"srun: launch/slurm: launch_p_step_launch: StepId=14.0 aborted before step "
			"completely launched.\n",
		};

		for (size_t i = 0; i < sizeof(launch) / sizeof(launch[0]); i++)
			assert_int_equal(phx_srun_line_parse(launch[i], strlen(launch[i]), node,
							     sizeof(node)),
					 3);
		/* A job whose own output says so is not srun's. */
		assert_int_equal(
			phx_srun_line_parse("task 0 launch failed", 20, node, sizeof(node)), 0);
		assert_int_equal(phx_srun_line_parse("srun: error: task x launch failed", 33, node,
						     sizeof(node)),
				 0);
	}
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		if (phx_srun_line_parse(other[i], strlen(other[i]), node, sizeof(node)) != 0)
			fail_msg("took '%s' for a lost node", other[i]);
	}
}

static void test_pick(void **state)
{
	bool bad[6] = { false, true, false, false, true, false };
	size_t idx[6];

	(void)state;
	assert_int_equal(phx_drv_pick(bad, 6, 3, idx), 3);
	assert_int_equal(idx[0], 0);
	assert_int_equal(idx[1], 2);
	assert_int_equal(idx[2], 3);
	assert_int_equal(phx_drv_pick(bad, 6, 5, idx), 4);
	assert_int_equal(idx[3], 5);
	assert_int_equal(phx_drv_healthy(bad, 6), 4);
}

static void test_elastic(void **state)
{
	char spec[256], err[256];

	(void)state;
	assert_int_equal(phx_drv_elastic(NULL, 3, 2, spec, sizeof(spec), err, sizeof(err)), 3);
	assert_non_null(strstr(spec, "dp=6"));
	/* tp=4 over 2 workers a node: only an even node count fits. */
	assert_int_equal(phx_drv_elastic("tp=4,dp=2", 3, 2, spec, sizeof(spec), err, sizeof(err)),
			 2);
	assert_non_null(strstr(spec, "tp=4"));
	assert_non_null(strstr(spec, "dp=1"));
	assert_int_equal(phx_drv_elastic("tp=8,dp=*", 3, 2, spec, sizeof(spec), err, sizeof(err)),
			 0);
	assert_non_null(strstr(err, "no data-parallel degree"));
	assert_int_equal(phx_drv_elastic("tp=*,dp=2", 3, 2, spec, sizeof(spec), err, sizeof(err)),
			 0);
	assert_non_null(strstr(err, "not dp"));
	assert_int_equal(phx_drv_elastic("qq=2", 3, 2, spec, sizeof(spec), err, sizeof(err)), 0);
}

static void test_signature(void **state)
{
	struct phx_result a = { .step = 2 }, b = { .step = 2 };
	char sa[PHX_DRV_SIG_MAX], sb[PHX_DRV_SIG_MAX];

	(void)state;
	snprintf(a.msg, sizeof(a.msg), "ValueError: boom");
	snprintf(b.msg, sizeof(b.msg), "ValueError: boom");
	snprintf(a.node, sizeof(a.node), "n1");
	snprintf(b.node, sizeof(b.node), "n2");
	phx_drv_signature(&a, sa, sizeof(sa));
	phx_drv_signature(&b, sb, sizeof(sb));
	/* The node and rank do not make it another failure. */
	assert_string_equal(sa, sb);
	b.step = 3;
	phx_drv_signature(&b, sb, sizeof(sb));
	assert_string_not_equal(sa, sb);
}

static void state_init(struct phx_drv_state *s, bool *bad, size_t n, unsigned want)
{
	memset(s, 0, sizeof(*s));
	memset(bad, 0, n * sizeof(*bad));
	s->nalloc = n;
	s->bad = bad;
	s->want = want;
	s->nproc = 2;
	s->max_relaunches = 3;
	s->same_limit = 2;
}

static void test_decide_success_and_node_failure(void **state)
{
	struct phx_drv_state s;
	struct phx_drv_decision d;
	struct phx_drv_outcome o = { 0 };
	bool bad[5];

	(void)state;
	state_init(&s, bad, 5, 4);
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_DONE);
	/* A node lost, one spare: same world. */
	bad[2] = true;
	o.status = 137;
	o.new_bad = 1;
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_RELAUNCH);
	assert_int_equal(d.nodes, 4);
	assert_int_equal(s.relaunches, 1);
	/* A second one: too few, no --elastic: requeue. */
	bad[0] = true;
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_REQUEUE);
	assert_int_equal(d.exit_code, PHX_EXIT_REQUEUE);
	/* With --elastic: 3 nodes, dp shrinks. */
	s.elastic = true;
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_RELAUNCH);
	assert_int_equal(d.nodes, 3);
	assert_int_equal(s.want, 3);
	assert_non_null(strstr(s.layout_now, "dp=6"));
}

static void test_decide_same_failure(void **state)
{
	struct phx_drv_state s;
	struct phx_drv_decision d;
	struct phx_result r = { .rank = 1, .step = 2 }, other = { .rank = 1, .step = 7 };
	struct phx_drv_outcome o = { .status = 1, .result = &r };
	bool bad[4];

	(void)state;
	state_init(&s, bad, 4, 4);
	snprintf(r.msg, sizeof(r.msg), "ValueError: x");
	snprintf(other.msg, sizeof(other.msg), "ValueError: x");
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_RELAUNCH);
	assert_int_equal(d.nodes, 4);
	/* Another step: another failure, the count starts again. */
	o.result = &other;
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_RELAUNCH);
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_REPEATED);
	assert_int_equal(d.exit_code, PHX_EXIT_REPEATED);
	assert_non_null(strstr(d.why, "ValueError: x @ step 7"));
	/* K = 1: the first failure stops. */
	state_init(&s, bad, 4, 4);
	s.same_limit = 1;
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_REPEATED);
}

static void test_decide_limits(void **state)
{
	struct phx_drv_state s;
	struct phx_drv_decision d;
	struct phx_drv_outcome o = { .status = 3 };
	bool bad[4];

	(void)state;
	state_init(&s, bad, 4, 4);
	s.max_relaunches = 1;
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_RELAUNCH);
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_STOP);
	assert_int_equal(d.exit_code, 3);
	/* Refused options: relaunching cannot help. */
	state_init(&s, bad, 4, 4);
	o.status = 2;
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_STOP);
	/* Told to stop. */
	o.status = 143;
	o.stopped = true;
	phx_drv_decide(&s, &o, &d);
	assert_int_equal(d.action, PHX_DRV_STOP);
	assert_int_equal(d.exit_code, 143);
}

static void test_fit(void **state)
{
	struct phx_drv_state s;
	struct phx_drv_decision d;
	bool bad[3];

	(void)state;
	state_init(&s, bad, 3, 2);
	phx_drv_fit(&s, &d);
	assert_int_equal(d.action, PHX_DRV_RELAUNCH);
	bad[0] = bad[1] = true;
	phx_drv_fit(&s, &d);
	assert_int_equal(d.action, PHX_DRV_REQUEUE);
}

static void test_preflight_options(void **state)
{
	char *argv[] = { "phalanx-launch",
			 "--preflight-results",
			 "r.json",
			 "--spares=1",
			 "--",
			 "python",
			 "t.py",
			 NULL };
	char *argv2[] = { "phalanx-launch", "--preflight", "--no-preflight", "--", "x", NULL };
	char *argv3[] = { "phalanx-launch", "--preflight-results=", "--", "x", NULL };
	char *argv4[] = { "phalanx-launch", "--agent", "--slow-nodes", "n[1-2]", "--", "x", NULL };
	char *argv5[] = { "phalanx-launch", "--agent", "--slow-nodes", "n1 n2", "--", "x", NULL };
	struct phx_launch_opts o;
	char err[512], **v;
	int n;

	(void)state;
	assert_int_equal(phx_launch_parse(NARGS(argv), argv, &o, err, sizeof(err)), 0);
	assert_int_equal(o.driver.preflight, 1);
	assert_string_equal(o.driver.preflight_results, "r.json");
	/* The agents get neither the driver's preflight options nor their values. */
	v = phx_driver_agent_args(NARGS(argv) - 1, argv + 1, NULL, &n);
	assert_int_equal(n, 3);
	assert_string_equal(v[0], "--");
	assert_string_equal(v[1], "python");
	free(v);
	phx_launch_opts_free(&o);
	assert_int_equal(phx_launch_parse(NARGS(argv2), argv2, &o, err, sizeof(err)), 0);
	assert_int_equal(o.driver.preflight, 0);
	assert_null(o.driver.preflight_results);
	phx_launch_opts_free(&o);
	assert_int_equal(phx_launch_parse(NARGS(argv3), argv3, &o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--preflight-results"));
	phx_launch_opts_free(&o);
	assert_int_equal(phx_launch_parse(NARGS(argv4), argv4, &o, err, sizeof(err)), 0);
	assert_string_equal(o.slow_nodes, "n[1-2]");
	phx_launch_opts_free(&o);
	assert_int_equal(phx_launch_parse(NARGS(argv5), argv5, &o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--slow-nodes"));
	phx_launch_opts_free(&o);
}

static void test_to_check(void **state)
{
	bool bad[5] = { false, false, true, false, false };
	bool trusted[5] = { false };
	size_t idx[5], prev[2] = { 0, 1 }, next[2] = { 0, 3 };

	(void)state;
	/* First: every healthy node, the spares too. */
	assert_int_equal(phx_drv_to_check(bad, trusted, 5, NULL, 0, NULL, 0, idx), 4);
	assert_int_equal(idx[0], 0);
	assert_int_equal(idx[1], 1);
	assert_int_equal(idx[2], 3);
	assert_int_equal(idx[3], 4);
	for (size_t i = 0; i < 5; i++)
		trusted[i] = !bad[i];
	assert_int_equal(phx_drv_to_check(bad, trusted, 5, NULL, 0, NULL, 0, idx), 0);
	/* Same nodes again: nothing to check. */
	assert_int_equal(phx_drv_to_check(bad, trusted, 5, prev, 2, prev, 2, idx), 0);
	/* Node 1 went bad, spare 3 comes in: it alone is checked again. */
	bad[1] = true;
	assert_int_equal(phx_drv_to_check(bad, trusted, 5, prev, 2, next, 2, idx), 1);
	assert_int_equal(idx[0], 3);
	assert_false(trusted[3]);
	assert_true(trusted[0]);
	assert_true(trusted[4]);
}

static void test_verdicts_for(void **state)
{
	struct phx_check_verdict all[3] = { 0 }, out[3];
	char *hosts[] = { "c", "a", "zz" };

	(void)state;
	snprintf(all[0].node, sizeof(all[0].node), "a");
	snprintf(all[1].node, sizeof(all[1].node), "b");
	all[1].state = PHX_CHECK_FAILED;
	snprintf(all[2].node, sizeof(all[2].node), "c");
	all[2].state = PHX_CHECK_SLOW;
	snprintf(all[2].reason, sizeof(all[2].reason), "GEMM 50 TFLOP/s");
	phx_drv_verdicts_for(all, 3, hosts, 3, "rec.json", out);
	assert_string_equal(out[0].node, "c");
	assert_int_equal(out[0].state, PHX_CHECK_SLOW);
	assert_string_equal(out[0].reason, "GEMM 50 TFLOP/s");
	assert_int_equal(out[1].state, PHX_CHECK_OK);
	/* Never a pass without a measurement. */
	assert_string_equal(out[2].node, "zz");
	assert_int_equal(out[2].state, PHX_CHECK_FAILED);
	assert_string_equal(out[2].reason, "no result for it in rec.json");
}

static void test_preempted(void **state)
{
	(void)state;
	assert_true(phx_drv_preempted(true, PHX_EXIT_REQUEUE));
	assert_false(phx_drv_preempted(false, PHX_EXIT_REQUEUE));
	assert_false(phx_drv_preempted(true, 0));
	assert_false(phx_drv_preempted(true, 1));
}

/* The nodes that went and came, paired in order; none when the sizes differ. */
static void test_stand_in_pairs(void **state)
{
	const size_t last[] = { 0, 1, 2, 3, 4, 5 }, next[] = { 0, 1, 3, 5, 6, 7 };
	const size_t shrunk[] = { 0, 1, 3, 4, 5 };
	size_t lost[8], spare[8];

	(void)state;
	assert_int_equal(phx_stand_ins_pair(last, 6, next, 6, lost, spare), 2);
	assert_int_equal(lost[0], 2);
	assert_int_equal(spare[0], 6);
	assert_int_equal(lost[1], 4);
	assert_int_equal(spare[1], 7);
	assert_int_equal(phx_stand_ins_pair(last, 6, last, 6, lost, spare), 0);
	assert_int_equal(phx_stand_ins_pair(last, 6, shrunk, 5, lost, spare), 0);
	assert_int_equal(phx_stand_ins_pair(NULL, 0, next, 6, lost, spare), 0);
}

static void test_stand_ins_refused(void **state)
{
	char *hosts[] = { "n1", "n2", "n4", "n5" }, err[256];
	const char *bad[] = { "n3",    "n3=",	"=n5",	       "n3=n5=n6",
			      "n3=n9", "n2=n5", "n3=n5,n6=n5", "n3=n5,n3=n4" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char spec[64], *copy[4];

		memcpy(copy, hosts, sizeof(hosts));
		snprintf(spec, sizeof(spec), "%s", bad[i]);
		err[0] = '\0';
		assert_int_equal(phx_stand_ins_apply(spec, copy, 4, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "--stand-ins"));
	}
}

static void ranks_of(char **hosts, size_t n, const char *node, unsigned long *out)
{
	struct phx_conf conf;
	struct phx_layout layout;
	struct phx_rankmap map = { 0 };
	struct phx_plan *plan = NULL;
	char err[512];

	assert_int_equal(phx_conf_defaults(&conf), 0);
	assert_int_equal(phx_layout_parse("tp=2,pp=2,dp=*", &layout, err, sizeof(err)), 0);
	assert_int_equal(phx_layout_resolve(&layout, n * 4, err, sizeof(err)), 0);
	assert_int_equal(
		phx_rankmap_place(&conf, &layout, hosts, n, 4, node, &map, &plan, err, sizeof(err)),
		0);
	assert_int_equal(map.tasks_per_node, 4);
	memcpy(out, map.slot_rank, 4 * sizeof(*out));
	phx_rankmap_free(&map);
	phx_plan_free(plan);
	phx_conf_free(&conf);
}

/*
 * The contract of a relaunch on a spare: after gpu3 dies and gpu9 takes
 * its place, every surviving node runs the ranks it ran (and finds them
 * in its own local tier), and gpu9 runs gpu3's.
 */
static void test_stand_in_keeps_survivors_ranks(void **state)
{
	char *before[] = { "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7", "gpu8" };
	char *after[] = { "gpu1", "gpu2", "gpu4", "gpu5", "gpu6", "gpu7", "gpu8", "gpu9" };
	char *placed[8], spec[] = "gpu3=gpu9", err[256];
	unsigned long was[4], now[4];

	(void)state;
	memcpy(placed, after, sizeof(after));
	assert_int_equal(phx_stand_ins_apply(spec, placed, 8, err, sizeof(err)), 0);
	for (size_t i = 0; i < 8; i++) {
		const char *old = !strcmp(after[i], "gpu9") ? "gpu3" : after[i];

		ranks_of(before, 8, old, was);
		ranks_of(placed, 8, placed[i], now);
		assert_memory_equal(was, now, sizeof(was));
	}
	/* Without the stand-in the nodes after gpu3 each move over. */
	ranks_of(before, 8, "gpu4", was);
	ranks_of(after, 8, "gpu4", now);
	assert_memory_not_equal(was, now, sizeof(was));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stand_in_pairs),
		cmocka_unit_test(test_stand_ins_refused),
		cmocka_unit_test(test_stand_in_keeps_survivors_ranks),
		cmocka_unit_test(test_driver_options),
		cmocka_unit_test(test_driver_defaults_and_refusals),
		cmocka_unit_test(test_agent_args),
		cmocka_unit_test(test_srun_args),
		cmocka_unit_test(test_mode),
		cmocka_unit_test(test_result_round_trip),
		cmocka_unit_test(test_result_refusals),
		cmocka_unit_test(test_srun_lines),
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_elastic),
		cmocka_unit_test(test_signature),
		cmocka_unit_test(test_decide_success_and_node_failure),
		cmocka_unit_test(test_decide_same_failure),
		cmocka_unit_test(test_decide_limits),
		cmocka_unit_test(test_fit),
		cmocka_unit_test(test_preflight_options),
		cmocka_unit_test(test_to_check),
		cmocka_unit_test(test_verdicts_for),
		cmocka_unit_test(test_preempted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "checkpoint/ckptd/goodput.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-6)

static double sum_parts(const struct phx_goodput *g, double now, double p[PHX_GP_PARTS])
{
	double s = 0, wall = phx_gp_snapshot(g, now, p);

	for (int i = 0; i < PHX_GP_PARTS; i++) {
		assert_true(p[i] >= 0);
		s += p[i];
	}
	NEAR(s, wall);
	return wall;
}

/* Start 10 s, train 100 s with a 3 s stall and a commit at 60, lose the node at 130
 * (last heartbeat 127), requeue at 131, run again at 150, train again at 160. */
static void test_timeline(void **state)
{
	struct phx_goodput g;
	double p[PHX_GP_PARTS];

	(void)state;
	phx_gp_begin(&g, 1000);
	phx_gp_step(&g, 1010);
	phx_gp_stall(&g, 1050, 3);
	phx_gp_commit(&g, 1060);
	phx_gp_straggler(&g, 1080, 2);
	phx_gp_fault(&g, 1130, 3);
	phx_gp_requeue(&g, 1131);
	phx_gp_running(&g, 1150);
	phx_gp_step(&g, 1160);
	NEAR(sum_parts(&g, 1200, p), 200);
	/* Run 1010..1130 = 120, less stall 3, straggler 2, detect 3, lost 70-2-3 = 65. */
	NEAR(p[PHX_GP_STALL], 3);
	NEAR(p[PHX_GP_STRAGGLER], 2);
	NEAR(p[PHX_GP_DETECT], 3);
	NEAR(p[PHX_GP_LOST], 65);
	NEAR(p[PHX_GP_RESTART], 10 + 1 + 10);
	NEAR(p[PHX_GP_QUEUE], 19);
	NEAR(p[PHX_GP_PRODUCTIVE], 120 - 3 - 2 - 3 - 65 + 40);
	assert_int_equal(g.failures, 1);
	assert_int_equal(g.requeues, 1);
	phx_gp_end(&g, 1210);
	NEAR(sum_parts(&g, 5000, p), 210); /* an ended ledger stops */
}

/* Deductions never go below zero productive time, and the sum holds. */
static void test_clamped(void **state)
{
	struct phx_goodput g;
	double p[PHX_GP_PARTS];

	(void)state;
	phx_gp_begin(&g, 0);
	phx_gp_step(&g, 1);
	phx_gp_stall(&g, 2, 50);
	phx_gp_fault(&g, 3, 100);
	phx_gp_requeue(&g, 4);
	phx_gp_requeue(&g, 5);
	phx_gp_running(&g, 4.5); /* a start time before the last event moves nothing back */
	phx_gp_step(&g, 7);
	NEAR(sum_parts(&g, 9, p), 9);
	NEAR(p[PHX_GP_STALL], 1);
	NEAR(p[PHX_GP_DETECT], 1);
	NEAR(p[PHX_GP_PRODUCTIVE], 2);
	NEAR(p[PHX_GP_QUEUE], 1);
}

/* Hand-computed: M = 1e4 s, delta = 50 s, R = 100 s: Young 1000, Daly
 * 1000 (1 + 0.05/3 + 0.0025/9) - 50 = 966.944, goodput 966.944/1016.944
 * (1 - (100 + 508.472)/1e4) = 0.892978. */
static void test_model(void **state)
{
	struct phx_gp_model m = { .gpus = 1, .stall_s = 50, .mttr_s = 100, .rate_per_gpu_s = 1e-4 };

	(void)state;
	phx_gp_model(&m);
	NEAR(m.mtbf_s, 1e4);
	assert_true(fabs(m.interval_s - 966.944444) < 1e-5);
	assert_true(fabs(m.goodput - 0.8929776) < 1e-6);
	/* Llama 3's rate: 16,384 GPUs fail every 54 d / 419 = 11135.08 s. */
	m = (struct phx_gp_model){
		.gpus = 16384, .stall_s = 2, .mttr_s = 30, .rate_per_gpu_s = PHX_GP_LLAMA3_RATE
	};
	phx_gp_model(&m);
	assert_true(fabs(m.mtbf_s - 11135.0835) < 1e-3);
	/* 10k GPUs, 2 s stall, 30 s MTTR: M 18243.72, tau 268.807, 0.983615. */
	m.gpus = 10000;
	phx_gp_model(&m);
	assert_true(fabs(m.interval_s - 268.80695) < 1e-4);
	assert_true(fabs(m.goodput - 0.9836153) < 1e-6);
	/* A recovery longer than the MTBF leaves nothing. */
	m.mttr_s = 1e6;
	phx_gp_model(&m);
	NEAR(m.goodput, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timeline),
		cmocka_unit_test(test_clamped),
		cmocka_unit_test(test_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

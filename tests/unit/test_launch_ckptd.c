// SPDX-License-Identifier: Apache-2.0
/* Crash signatures reported to phalanx-ckptd: the same failure, the same text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "launcher/agent/agent_ckptd.h"

static void sig(const char *msg, const char *how, uint64_t step, const char *want)
{
	char buf[256];

	phx_crash_signature(msg, how, step, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static void test_exception_name(void **state)
{
	(void)state;
	sig("ValueError: bad batch 17 at 0x7f00", "exited with code 1", 1200,
	    "ValueError@step 1200");
	sig("  builtins.RuntimeError: CUDA error\nmore", "", 5, "RuntimeError@step 5");
	sig("torch.distributed.DistBackendError: x", NULL, 0, "DistBackendError@step 0");
	sig("KeyboardInterrupt", NULL, 3, "KeyboardInterrupt@step 3");
}

static void test_folded_message(void **state)
{
	char a[256], b[256];

	(void)state;
	/* Two runs of one failure differ in numbers only. */
	phx_crash_signature("out of memory: tried 1024 bytes (pid 77)\ntrace", NULL, 9, a,
			    sizeof(a));
	phx_crash_signature("out of memory: tried 2048 bytes (pid 4121)\nother", NULL, 9, b,
			    sizeof(b));
	assert_string_equal(a, b);
	assert_string_equal(a, "out of memory: tried # bytes (pid #)@step 9");
	/* A different step is a different failure. */
	phx_crash_signature("out of memory: tried 1024 bytes", NULL, 10, b, sizeof(b));
	assert_string_not_equal(a, b);
}

static void test_no_message(void **state)
{
	char small[8];

	(void)state;
	/* How the worker ended is taken as it is. */
	sig(NULL, "killed by signal 9 (KILL)", 42, "killed by signal 9 (KILL)@step 42");
	sig("", "", 1, "failure@step 1");
	sig("   \n", "exited with code 3", 7, "exited with code 3@step 7");
	phx_crash_signature("ValueError: x", NULL, 123456, small, sizeof(small));
	assert_int_equal(strlen(small), 7);
}

static void test_straggler_lost(void **state)
{
	(void)state;
	/* 150 ms against a 100 ms median over 40 steps: 2 s lost. */
	assert_int_equal(phx_straggler_lost_us(150000000, 100000000, 40), 2000000);
	assert_int_equal(phx_straggler_lost_us(90000000, 100000000, 40), 0);
	assert_int_equal(phx_straggler_lost_us(100000000, 100000000, 40), 0);
	/* A day of 1-hour steps' excess does not overflow. */
	assert_int_equal(phx_straggler_lost_us(7200000000000ull, 3600000000000ull, 24),
			 86400000000ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exception_name),
		cmocka_unit_test(test_folded_message),
		cmocka_unit_test(test_no_message),
		cmocka_unit_test(test_straggler_lost),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "placement/layout.h"

static char err[512];

static struct phx_layout parse_ok(const char *spec)
{
	struct phx_layout l;

	err[0] = '\0';
	if (phx_layout_parse(spec, &l, err, sizeof(err)) < 0)
		fail_msg("'%s' refused: %s", spec, err);
	return l;
}

/* Refused, and the message names what it should. */
static void parse_bad(const char *spec, const char *expect)
{
	struct phx_layout l;

	err[0] = '\0';
	assert_int_equal(phx_layout_parse(spec, &l, err, sizeof(err)), -1);
	if (!strstr(err, expect))
		fail_msg("'%s': message '%s' lacks '%s'", spec ? spec : "(null)", err, expect);
}

static void test_defaults(void **state)
{
	struct phx_layout l = parse_ok("tp=8,pp=4");

	assert_int_equal(l.size[PHX_DIM_TP], 8);
	assert_int_equal(l.size[PHX_DIM_PP], 4);
	assert_int_equal(l.size[PHX_DIM_CP], 1);
	assert_int_equal(l.size[PHX_DIM_EP], 1);
	/* dp is what is left when nothing else is '*'. */
	assert_int_equal(l.star, PHX_DIM_DP);
	assert_int_equal(l.size[PHX_DIM_DP], 0);
	assert_int_equal(l.order[0], PHX_DIM_TP);
	assert_int_equal(l.order[1], PHX_DIM_CP);
	assert_int_equal(l.order[2], PHX_DIM_EP);
	assert_int_equal(l.order[3], PHX_DIM_DP);
	assert_int_equal(l.order[4], PHX_DIM_PP);
}

static void test_full_spec(void **state)
{
	struct phx_layout l = parse_ok("tp=8,cp=2,ep=1,pp=4,dp=*,order=tp-cp-ep-pp-dp");

	assert_int_equal(l.star, PHX_DIM_DP);
	assert_int_equal(l.order[3], PHX_DIM_PP);
	assert_int_equal(l.order[4], PHX_DIM_DP);
	assert_int_equal(phx_layout_resolve(&l, 1024, err, sizeof(err)), 0);
	assert_int_equal(l.size[PHX_DIM_DP], 16);
	assert_int_equal(l.world, 1024);
	assert_int_equal(l.star, -1);
}

static void test_star_elsewhere(void **state)
{
	struct phx_layout l = parse_ok("tp=4,pp=*,dp=2");

	assert_int_equal(l.star, PHX_DIM_PP);
	assert_int_equal(phx_layout_resolve(&l, 64, err, sizeof(err)), 0);
	assert_int_equal(l.size[PHX_DIM_PP], 8);
}

static void test_spaces_and_partial_order(void **state)
{
	struct phx_layout l = parse_ok(" tp = 2 , dp=4 ,order=dp-tp");

	assert_int_equal(l.size[PHX_DIM_TP], 2);
	assert_int_equal(l.size[PHX_DIM_DP], 4);
	/* Listed first, then the rest in the default order. */
	assert_int_equal(l.order[0], PHX_DIM_DP);
	assert_int_equal(l.order[1], PHX_DIM_TP);
	assert_int_equal(l.order[2], PHX_DIM_CP);
	assert_int_equal(l.order[3], PHX_DIM_EP);
	assert_int_equal(l.order[4], PHX_DIM_PP);
}

static void test_errors(void **state)
{
	parse_bad(NULL, "empty");
	parse_bad("", "empty");
	parse_bad("  ", "empty");
	parse_bad("xp=2", "unknown key 'xp' at column 1");
	parse_bad("tp=8,TP=2", "unknown key 'TP' at column 6");
	parse_bad("tp=8,tp=4", "'tp' is given twice (columns 1 and 6)");
	parse_bad("tp=8,order=tp-dp,order=dp-tp", "'order' is given twice");
	parse_bad("tp=0", "at least 1");
	parse_bad("tp=-2", "positive integer");
	parse_bad("tp=abc", "positive integer");
	parse_bad("tp=8x", "positive integer");
	parse_bad("tp=1.5", "positive integer");
	parse_bad("tp=", "has no value");
	parse_bad("tp=99999999999999999999", "larger than");
	parse_bad("tp=2097152", "larger than");
	parse_bad("tp=*,dp=*", "both tp and dp are '*'");
	parse_bad("tp8", "is not KEY=VALUE");
	parse_bad("tp=8,,pp=2", "empty item at column 6");
	parse_bad("tp=8,", "empty item");
	parse_bad("=8", "has no key");
	parse_bad("order=tp-xx", "'xx' at column 10 is not a dimension");
	parse_bad("order=tp-tp", "'tp' appears twice");
	parse_bad("order=tp--dp", "is not a dimension");
	parse_bad("order=", "has no value");
	parse_bad("tp=2,pp=2,order=tp-dp", "order leaves out pp=2");
	parse_bad("tp=2,order=tp-pp", "order leaves out dp=*");
	parse_bad("tp=8,order=*", "is not a dimension");
}

static void resolve_bad(const char *spec, unsigned long world, const char *expect)
{
	struct phx_layout l = parse_ok(spec);

	err[0] = '\0';
	assert_int_equal(phx_layout_resolve(&l, world, err, sizeof(err)), -1);
	if (!strstr(err, expect))
		fail_msg("'%s' world %lu: message '%s' lacks '%s'", spec, world, err, expect);
}

static void test_resolve_errors(void **state)
{
	resolve_bad("tp=8,pp=3", 100, "does not divide the world size of 100");
	resolve_bad("tp=8,pp=3", 100, "tp=8 x pp=3");
	resolve_bad("tp=8,pp=4,dp=2", 128, "make 64 ranks but the world size is 128");
	resolve_bad("tp=8,dp=*", 0, "out of range");
	resolve_bad("tp=8,dp=*", PHX_LAYOUT_MAX_WORLD + 8, "out of range");
	resolve_bad("tp=4096,cp=2048,dp=*", 1024, "more than");
}

static void test_resolve_exact(void **state)
{
	struct phx_layout l = parse_ok("tp=8,pp=4,dp=2");

	assert_int_equal(phx_layout_resolve(&l, 64, err, sizeof(err)), 0);
	assert_int_equal(l.world, 64);
}

static void test_format(void **state)
{
	struct phx_layout l = parse_ok("tp=8,pp=4");
	char buf[128];

	phx_layout_format(&l, buf, sizeof(buf));
	assert_string_equal(buf, "tp=8,cp=1,ep=1,dp=*,pp=4,order=tp-cp-ep-dp-pp");
	assert_int_equal(phx_layout_resolve(&l, 512, err, sizeof(err)), 0);
	phx_layout_format(&l, buf, sizeof(buf));
	assert_string_equal(buf, "tp=8,cp=1,ep=1,dp=16,pp=4,order=tp-cp-ep-dp-pp");
	/* The formatted spec parses back to the same layout. */
	{
		struct phx_layout back = parse_ok(buf);

		assert_int_equal(phx_layout_resolve(&back, 512, err, sizeof(err)), 0);
		assert_memory_equal(back.size, l.size, sizeof(l.size));
		assert_memory_equal(back.order, l.order, sizeof(l.order));
	}
}

static void test_rank_math(void **state)
{
	struct phx_layout l = parse_ok("tp=4,cp=2,ep=3,pp=2,dp=*");
	unsigned long c[PHX_DIM_COUNT];

	assert_int_equal(phx_layout_resolve(&l, 4 * 2 * 3 * 2 * 5, err, sizeof(err)), 0);
	/* Megatron's order: tp fastest, then cp, ep, dp, pp. */
	assert_int_equal(phx_layout_stride(&l, PHX_DIM_TP), 1);
	assert_int_equal(phx_layout_stride(&l, PHX_DIM_CP), 4);
	assert_int_equal(phx_layout_stride(&l, PHX_DIM_EP), 8);
	assert_int_equal(phx_layout_stride(&l, PHX_DIM_DP), 24);
	assert_int_equal(phx_layout_stride(&l, PHX_DIM_PP), 120);
	for (unsigned long r = 0; r < l.world; r++) {
		phx_layout_coords(&l, r, c);
		for (int d = 0; d < PHX_DIM_COUNT; d++)
			assert_true(c[d] < l.size[d]);
		assert_int_equal(phx_layout_rank(&l, c), r);
	}
	phx_layout_coords(&l, 121, c);
	assert_int_equal(c[PHX_DIM_TP], 1);
	assert_int_equal(c[PHX_DIM_PP], 1);
	assert_int_equal(c[PHX_DIM_DP], 0);
}

static void test_dim_names(void **state)
{
	assert_string_equal(phx_dim_name(PHX_DIM_EP), "ep");
	assert_string_equal(phx_dim_name(PHX_DIM_COUNT), "?");
	assert_int_equal(phx_dim_parse("pp", 2), PHX_DIM_PP);
	assert_int_equal(phx_dim_parse("ppx", 3), -1);
	assert_int_equal(phx_dim_parse("p", 1), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full_spec),
		cmocka_unit_test(test_star_elsewhere),
		cmocka_unit_test(test_spaces_and_partial_order),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_resolve_errors),
		cmocka_unit_test(test_resolve_exact),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_rank_math),
		cmocka_unit_test(test_dim_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hostlist.h"

static void expect_expand(const char *expr, const char *const *names, size_t n)
{
	struct phx_hostnames hosts;
	char err[256];

	assert_int_equal(phx_hostlist_expand(expr, &hosts, err, sizeof(err)), 0);
	assert_int_equal(hosts.count, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(hosts.names[i], names[i]);
	phx_hostnames_free(&hosts);
}

static void test_expand(void **state)
{
	static const char *const a[] = { "node01", "node02", "node03", "node07" };
	static const char *const b[] = { "gpu5", "n1", "n2" };
	static const char *const c[] = { "single" };

	expect_expand("node[01-03,07]", a, 4);
	expect_expand("gpu5,n[1-2]", b, 3);
	expect_expand("gpu5 n[1-2]", b, 3);
	expect_expand("single", c, 1);
}

static void expect_refused(const char *expr, const char *needle)
{
	struct phx_hostnames hosts;
	char err[256] = "";

	assert_int_equal(phx_hostlist_expand(expr, &hosts, err, sizeof(err)), -1);
	assert_null(hosts.names);
	assert_non_null(strstr(err, needle));
}

static void test_expand_refuses(void **state)
{
	expect_refused("", "empty host list");
	expect_refused(NULL, "empty host list");
	expect_refused("node[1-", "unbalanced brackets");
	expect_refused("node1]", "unbalanced brackets");
	expect_refused("[", "unbalanced brackets");
	expect_refused("node[a-b]", "bad host list");
	/* libslurm makes 801,908 names of each, with brackets or without. */
	expect_refused("[2[2-900][09]-900][09]", "unbalanced brackets");
	expect_refused("[2-900][9]2-900][9]", "unbalanced brackets");
	expect_refused("a[1[2]", "unbalanced brackets");
	/* libslurm loops forever on these. */
	expect_refused("a[18446744073709551615][0-1]", "10^18 or more");
	expect_refused("n18446744073709551614,n18446744073709551615", "10^18 or more");
	expect_refused("a[99999999999999999999][0-1]", "10^18 or more");
	expect_expand("n999999999999999999", (const char *const[]){ "n999999999999999999" }, 1);
	/* A typo that would name millions of hosts. */
	expect_refused("n[0-9999999]", "n[0-9999999]");
	/* Refused before libslurm expands the leading brackets host by host. */
	expect_refused("n[1-2000][0-1000][0-10099]", "more than 1048576 hosts");
	expect_refused("n[1-1024][1-1024],x", "more than 1048576 hosts");
	expect_refused("a[1-4294967296][1-2]", "more than 1048576 hosts");
	/* libslurm reads "0\xe9-100" as 0-100: the count must not read less. */
	expect_refused("n[1-20000][0\xe9-100]", "more than 1048576 hosts");
	/* Within the host limit, but a million one-host ranges inside libslurm. */
	expect_refused("n[1-1000][1-1000][1]", "more than 65536 separate ranges");
}

static int size_ok(const char *expr)
{
	char err[256];

	return phx_hostlist_check_size(expr, PHX_HOSTLIST_MAX_HOSTS, PHX_HOSTLIST_MAX_RANGES, err,
				       sizeof(err)) == 0;
}

/* The limits sit exactly at their values: a list at them is accepted. */
static void test_size_limits(void **state)
{
	assert_true(size_ok("n[1-1024][1-1024]"));
	assert_false(size_ok("n[1-1024][1-1024],x"));
	assert_true(size_ok("n[1-256][1-256][1]"));
	assert_false(size_ok("n[1-256][1-256][1],x"));
	assert_false(size_ok("n[1-257][1-256][1]"));
	/* Separators inside brackets join; outside they split. */
	assert_true(size_ok("n[1-512,1-512][1-1024]"));
	assert_false(size_ok("n[1-512,1-513][1-1024]"));
}

static void test_expand_products(void **state)
{
	static const char *const d[] = { "a1b1", "a1b2", "a2b1", "a2b2", "c7", "c9", "d" };

	expect_expand("a[1-2]b[1-2],c[7,9]\td", d, 7);
}

static void test_compress(void **state)
{
	char *in[] = { "node03", "node01", "node02", "node07", "gpu1" };
	char *bad[] = { "node1", "x[1-2]" };
	char err[256];
	char *s;

	s = phx_hostlist_compress(in, 5, err, sizeof(err));
	assert_non_null(s);
	/* Slurm's own rendering keeps the order: rank order matters. */
	assert_string_equal(s, "node[03,01-02,07],gpu1");
	free(s);
	assert_null(phx_hostlist_compress(bad, 2, err, sizeof(err)));
	assert_non_null(strstr(err, "x[1-2]"));
	assert_null(phx_hostlist_compress(in, 0, err, sizeof(err)));
}

static void test_roundtrip_large(void **state)
{
	struct phx_hostnames hosts;
	char err[256];
	char *s;

	assert_int_equal(phx_hostlist_expand("r[1-4]n[001-512]", &hosts, err, sizeof(err)), 0);
	assert_int_equal(hosts.count, 2048);
	assert_string_equal(hosts.names[0], "r1n001");
	assert_string_equal(hosts.names[2047], "r4n512");
	s = phx_hostlist_compress(hosts.names, hosts.count, err, sizeof(err));
	assert_non_null(s);
	phx_hostnames_free(&hosts);
	assert_int_equal(phx_hostlist_expand(s, &hosts, err, sizeof(err)), 0);
	assert_int_equal(hosts.count, 2048);
	phx_hostnames_free(&hosts);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expand),		cmocka_unit_test(test_expand_refuses),
		cmocka_unit_test(test_expand_products), cmocka_unit_test(test_size_limits),
		cmocka_unit_test(test_compress),	cmocka_unit_test(test_roundtrip_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

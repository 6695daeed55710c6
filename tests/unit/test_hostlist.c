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
	/* A typo that would name millions of hosts. */
	expect_refused("n[0-9999999]", "n[0-9999999]");
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
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_expand_refuses),
		cmocka_unit_test(test_compress),
		cmocka_unit_test(test_roundtrip_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

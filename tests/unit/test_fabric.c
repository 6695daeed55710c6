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

#include "placement/fabric.h"

static char err[1024];

static const char *data_dir(void)
{
	const char *d = getenv("PHX_TEST_DATA");

	return d ? d : "tests/data";
}

/* Two buffers: a test may pass two paths to one call. */
static char *data_path(const char *name)
{
	static char path[2][4096];
	static int next;

	next ^= 1;
	snprintf(path[next], sizeof(path[next]), "%s/fabric/%s", data_dir(), name);
	return path[next];
}

static struct phx_fabric *tconf(const char *text)
{
	struct phx_fabric *f = NULL;

	err[0] = '\0';
	if (phx_fabric_parse(NULL, NULL, 0, "t.conf", text, strlen(text), &f, err, sizeof(err)) < 0)
		return NULL;
	return f;
}

static struct phx_fabric *yaml(const char *text)
{
	struct phx_fabric *f = NULL;

	err[0] = '\0';
	if (phx_fabric_parse("f.yaml", text, strlen(text), NULL, NULL, 0, &f, err, sizeof(err)) < 0)
		return NULL;
	return f;
}

static void expect_err(struct phx_fabric *f, const char *what, const char *expect)
{
	if (f) {
		phx_fabric_free(f);
		fail_msg("%s was accepted", what);
	}
	if (!strstr(err, expect))
		fail_msg("%s: message '%s' lacks '%s'", what, err, expect);
}

static const struct phx_fabric_node *node(const struct phx_fabric *f, const char *name)
{
	long i = phx_fabric_find(f, name);

	if (i < 0)
		fail_msg("node %s missing", name);
	return &f->nodes[i];
}

static void test_hostname_order(void **state)
{
	assert_true(phx_hostname_cmp("n2", "n10") < 0);
	assert_true(phx_hostname_cmp("n10", "n2") > 0);
	assert_true(phx_hostname_cmp("a9", "b1") < 0);
	assert_true(phx_hostname_cmp("node", "node1") < 0);
	assert_true(phx_hostname_cmp("n007", "n7") != 0);
	assert_int_equal(phx_hostname_cmp("n007", "n007"), 0);
	assert_true(phx_hostname_cmp("n007", "n8") < 0);
	/* Only the trailing number counts as a number, as in Slurm. */
	assert_true(phx_hostname_cmp("r10-n1", "r9-n1") < 0);
}

static void test_tconf_tree(void **state)
{
	struct phx_fabric *f;

	assert_int_equal(phx_fabric_load(NULL, data_path("tree.conf"), &f, err, sizeof(err)), 0);
	assert_true(f->has_switches);
	assert_int_equal(f->n_nodes, 16);
	assert_int_equal(f->n_leaves, 4);
	assert_int_equal(f->n_spines, 2);
	assert_string_equal(f->leaves[node(f, "node06")->leaf], "s1");
	assert_string_equal(f->spines[f->leaf_spine[node(f, "node06")->leaf]], "spine0");
	assert_string_equal(f->spines[f->leaf_spine[node(f, "node14")->leaf]], "spine1");
	assert_int_equal(f->n_domains, 2);
	assert_string_equal(f->domains[node(f, "node04")->domain], "b1");
	assert_int_equal(node(f, "node05")->domain, -1);
	/* Sorted the way Slurm sorts host names. */
	for (size_t i = 1; i < f->n_nodes; i++)
		assert_true(phx_hostname_cmp(f->nodes[i - 1].name, f->nodes[i].name) < 0);
	assert_int_equal(phx_fabric_find(f, "node17"), -1);
	assert_int_equal(f->bandwidth[PHX_LEVEL_LEAF], PHX_BW_LEAF_DEFAULT);
	phx_fabric_free(f);
}

static void test_tconf_line_order(void **state)
{
	struct phx_fabric *a = tconf("SwitchName=s1 Nodes=n[3-4]\nSwitchName=top Switches=s[0-1]\n"
				     "SwitchName=s0 Nodes=n[1-2]\n");
	struct phx_fabric *b = tconf("SwitchName=top Switches=s[0-1]\nSwitchName=s0 Nodes=n[1-2]\n"
				     "SwitchName=s1 Nodes=n[3-4]\n");

	assert_non_null(a);
	assert_non_null(b);
	for (size_t i = 0; i < a->n_nodes; i++) {
		assert_string_equal(a->nodes[i].name, b->nodes[i].name);
		assert_int_equal(a->nodes[i].leaf, b->nodes[i].leaf);
	}
	phx_fabric_free(a);
	phx_fabric_free(b);
}

static void test_tconf_flat(void **state)
{
	/* Leaves without a parent share one nameless spine. */
	struct phx_fabric *f = tconf("SwitchName=a Nodes=x[1-2]\nSwitchName=b Nodes=y[1-2]\n");

	assert_non_null(f);
	assert_int_equal(f->n_spines, 1);
	assert_string_equal(f->spines[0], "");
	phx_fabric_free(f);
}

static void test_tconf_errors(void **state)
{
	expect_err(tconf("SwitchName=s0 Nodez=n1\n"), "typo",
		   "t.conf:1: unknown key 'Nodez'; did you mean 'Nodes'?");
	expect_err(tconf("# c\nSwitchName=s0 Nodes=n1 Switches=s1\n"), "both",
		   "t.conf:2: switch 's0' has both Switches= and Nodes=");
	expect_err(tconf("SwitchName=s0 LinkSpeed=10\n"), "neither",
		   "t.conf:1: switch 's0' has neither");
	expect_err(tconf("SwitchName=s0 Nodes=n1\nSwitchName=top Switches=s[0,9]\n"), "undefined",
		   "t.conf:2: switch 'top' lists 's9' under it, which is not a switch");
	expect_err(tconf("SwitchName=s0 Nodes=n1\n\n\nSwitchName=s0 Nodes=n2\n"), "twice",
		   "t.conf:4: switch 's0' is already defined at t.conf:1");
	expect_err(tconf("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[2-3]\n"), "node twice",
		   "node 'n2' is under two leaf switches, 's0' and 's1'");
	expect_err(tconf("SwitchName=s0 Nodes=n1\nSwitchName=a Switches=s0\nSwitchName=b "
			 "Switches=s0\n"),
		   "two parents", "switch 's0' is already under 'a'");
	expect_err(
		tconf("SwitchName=s0 Nodes=n1\nSwitchName=a Switches=b\nSwitchName=b Switches=a\n"),
		"loop", "switches form a loop");
	expect_err(tconf("SwitchName=a Switches=a\n"), "self", "lists itself");
	expect_err(tconf("SwitchName=s0 Nodes=n[1-\n"), "hostlist", "t.conf:1: bad host list");
	expect_err(tconf("SwitchName=s0 garbage Nodes=n1\n"), "token",
		   "t.conf:1: 'garbage' is not Key=Value");
	expect_err(tconf("NodeName=n1 CPUs=4\n"), "first key",
		   "t.conf:1: a line starting with 'NodeName=' is not SwitchName=");
	expect_err(tconf("SwitchName=s0 Nodes=\n"), "empty", "Nodes= has no value");
	expect_err(tconf("SwitchName=s0 Nodes=n1 Nodes=n2\n"), "repeat", "Nodes is given twice");
	expect_err(tconf("SwitchName=s0 Nodes=\"n1\n"), "quote", "no closing quote");
	expect_err(tconf("SwitchName=s0 \\\n  Nodes=n1 Bogus=1\nSwitchName=s1 Nodes=n2\n"),
		   "continued line", "t.conf:1: unknown key 'Bogus'");
	expect_err(
		tconf("SwitchName=s0 Nodes=n1\nSwitchName=s1 Nodes=n2\nBlockName=b Nodes=n[1-2]\n"),
		"block over leaves",
		"t.conf:3: NVLink domain 'b' spans leaf switches 's0' and 's1'");
	expect_err(tconf("SwitchName=s0 Nodes=n1\nBlockName=b Nodes=n7\n"), "block node",
		   "NVLink domain 'b' lists node 'n7', which is under no leaf switch");
	expect_err(
		tconf("SwitchName=s0 Nodes=n[1-2]\nBlockName=a Nodes=n1\nBlockName=b Nodes=n1\n"),
		"two blocks", "node 'n1' is already in NVLink domain 'a'");
	expect_err(tconf("BlockName=b Nodes=n1 Switches=x\n"), "block key",
		   "unknown key 'Switches'");
	{
		static const char nul[] = "SwitchName=s0 Nodes=n1\n\0\n";
		struct phx_fabric *f = NULL;

		assert_int_equal(phx_fabric_parse(NULL, NULL, 0, "t.conf", nul, sizeof(nul) - 1, &f,
						  err, sizeof(err)),
				 -1);
		assert_non_null(strstr(err, "NUL byte"));
	}
}

static void test_tconf_blocks_only(void **state)
{
	/* NVLink domains without switches: the domains list the nodes. */
	struct phx_fabric *f = tconf("BlockName=r0 Nodes=g[1-4]\nBlockName=r1 Nodes=g[5-8]\n");

	assert_non_null(f);
	assert_false(f->has_switches);
	assert_int_equal(f->n_nodes, 8);
	assert_int_equal(f->n_leaves, 1);
	assert_string_equal(f->domains[node(f, "g6")->domain], "r1");
	phx_fabric_free(f);
}

static void test_yaml_fabric(void **state)
{
	struct phx_fabric *f;

	assert_int_equal(phx_fabric_load(data_path("fabric.yaml"), NULL, &f, err, sizeof(err)), 0);
	assert_int_equal(f->n_nodes, 40);
	assert_int_equal(f->n_leaves, 3);
	assert_int_equal(f->n_spines, 2); /* "north" and the nameless one */
	assert_int_equal(f->bandwidth[PHX_LEVEL_NODE], 900000);
	assert_int_equal(f->bandwidth[PHX_LEVEL_CORE], 12500);
	/* nvlink_domain_size: 9 cuts each leaf into runs of 9 nodes. */
	assert_int_equal(f->n_domains, 2 + 2 + 1);
	assert_string_equal(f->domains[node(f, "gb010")->domain], "leaf-a/nvl1");
	assert_string_equal(f->domains[node(f, "gb040")->domain], "leaf-c/nvl0");
	assert_int_equal(node(f, "gb009")->domain, node(f, "gb001")->domain);
	phx_fabric_free(f);
}

static void test_yaml_with_tconf(void **state)
{
	struct phx_fabric *f;

	assert_int_equal(phx_fabric_load(data_path("with-tconf.yaml"), NULL, &f, err, sizeof(err)),
			 0);
	assert_int_equal(f->n_nodes, 16);
	assert_int_equal(f->n_domains, 2);
	assert_int_equal(f->bandwidth[PHX_LEVEL_LEAF], 100000);
	assert_int_equal(f->bandwidth[PHX_LEVEL_NVLINK], PHX_BW_NVLINK_DEFAULT);
	phx_fabric_free(f);
	/* A topology.conf given by the caller wins over the one the YAML names. */
	assert_int_equal(phx_fabric_load(data_path("with-tconf.yaml"), data_path("tree.conf"), &f,
					 err, sizeof(err)),
			 0);
	assert_int_equal(f->n_nodes, 16);
	phx_fabric_free(f);
}

static void test_yaml_errors(void **state)
{
	struct phx_fabric *f = NULL;

	assert_int_equal(phx_fabric_load(data_path("bad-nodes.yaml"), NULL, &f, err, sizeof(err)),
			 -1);
	if (!strstr(err, "bad-nodes.yaml:6:14: key 'fabric.leaves[1].nodes': bad host list"))
		fail_msg("message: %s", err);
	expect_err(yaml("log_level: info\n"), "no section", "f.yaml: no 'fabric:' section");
	expect_err(yaml("fabric:\n  leafs: []\n"), "typo",
		   "f.yaml:2:3: unknown key 'leafs'; known keys in 'fabric'");
	expect_err(yaml("fabric:\n  leafs: []\n"), "hint", "did you mean 'leaves'?");
	expect_err(yaml("fabric:\n  leaves:\n    - name: s0\n"), "no nodes",
		   "f.yaml:3:7: key 'fabric.leaves[0]': 'nodes' is missing");
	expect_err(yaml("fabric:\n  leaves:\n    - nodes: n1\n      nane: s0\n"), "item typo",
		   "f.yaml:4:7: unknown key 'nane'");
	expect_err(yaml("fabric:\n  leaves: {}\n"), "not a list", "key 'fabric.leaves'");
	expect_err(yaml("fabric:\n  leaves: []\n"), "empty list", "the list is empty");
	expect_err(yaml("fabric:\n  bandwidth:\n    leaf: fast\n"), "not a number",
		   "f.yaml:3:11: key 'fabric.bandwidth.leaf'");
	expect_err(yaml("fabric:\n  bandwidth:\n    lef: 10\n"), "level typo", "unknown key 'lef'");
	expect_err(yaml("fabric:\n  bandwidth:\n    leaf: 0.5\n"), "too slow",
		   "key 'fabric.bandwidth.leaf'");
	expect_err(
		yaml("fabric:\n  bandwidth:\n    spine: 400\n"), "faster spine",
		"bandwidth.spine (400000 MB/s) is above bandwidth.leaf (50000 MB/s, the default)");
	expect_err(yaml("fabric:\n  nvlink_domain_size: 4\n  nvlink_domains:\n    - {name: a, "
			"nodes: n1}\n"),
		   "both domain kinds", "give nvlink_domains or nvlink_domain_size, not both");
	expect_err(
		yaml("fabric:\n  topology_conf: x.conf\n  leaves:\n    - {name: a, nodes: n1}\n"),
		"both switch kinds", "give leaves or topology_conf, not both");
	expect_err(yaml("fabric:\n  nvlink_domain_size: 4\n"), "size without tree",
		   "nvlink_domain_size needs the switch tree");
	expect_err(yaml("fabric:\n  nvlink_domain_size: 0\n"), "size zero",
		   "key 'fabric.nvlink_domain_size'");
	expect_err(yaml("fabric:\n  topology_conf: /nonexistent/topology.conf\n"), "missing tconf",
		   "cannot read the topology_conf it names");
	expect_err(yaml("fabric: [1, 2]\n"), "not a map", "key 'fabric'");
	expect_err(yaml("fabric:\n  leaves:\n    - {name: a, nodes: \"n[1-2]\"}\n    - {name: a, "
			"nodes: n3}\n"),
		   "same leaf twice", "switch 'a' is already defined at f.yaml:3");
	expect_err(yaml("fabric:\n  leaves:\n    - {name: a, nodes: n1}\n"
			"  nvlink_domains:\n    - {name: d, nodes: \"n[1-2]\"}\n"),
		   "domain node unknown",
		   "f.yaml:5:24: key 'fabric.nvlink_domains[0].nodes': NVLink domain 'd' lists "
		   "node 'n2'");
}

static void test_yaml_and_tconf_conflict(void **state)
{
	static const char y[] = "fabric:\n  leaves:\n    - {name: a, nodes: n1}\n";
	static const char t[] = "SwitchName=s0 Nodes=n1\n";
	struct phx_fabric *f = NULL;

	assert_int_equal(phx_fabric_parse("f.yaml", y, sizeof(y) - 1, "t.conf", t, sizeof(t) - 1,
					  &f, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "t.conf: the switches already come from f.yaml"));
}

static void test_defaults(void **state)
{
	struct phx_fabric *f;

	assert_int_equal(phx_fabric_load(NULL, NULL, &f, err, sizeof(err)), 0);
	assert_false(f->has_switches);
	assert_int_equal(f->n_nodes, 0);
	assert_int_equal(f->n_leaves, 1);
	assert_int_equal(f->bandwidth[PHX_LEVEL_SPINE], PHX_BW_SPINE_DEFAULT);
	assert_string_equal(phx_level_name(PHX_LEVEL_NVLINK), "nvlink");
	phx_fabric_free(f);
	assert_int_equal(phx_fabric_load(NULL, "/nonexistent/t.conf", &f, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/t.conf: cannot read"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostname_order),
		cmocka_unit_test(test_tconf_tree),
		cmocka_unit_test(test_tconf_line_order),
		cmocka_unit_test(test_tconf_flat),
		cmocka_unit_test(test_tconf_errors),
		cmocka_unit_test(test_tconf_blocks_only),
		cmocka_unit_test(test_yaml_fabric),
		cmocka_unit_test(test_yaml_with_tconf),
		cmocka_unit_test(test_yaml_errors),
		cmocka_unit_test(test_yaml_and_tconf_conflict),
		cmocka_unit_test(test_defaults),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

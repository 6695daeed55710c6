/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology discovery and GPU-NIC pairing on the hand-made fixtures of
 * tests/data/hwloc (see its README for the machines they describe), and on
 * recorded production nodes when PHX_HWLOC_REAL_DIR names their folder.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "common/file.h"
#include "placement/topo.h"

struct pairing {
	const char *pci; /* GPU */
	const char *nic;
	enum phx_topo_prox prox;
};

static void fixture_path(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("PHX_TEST_DATA");

	snprintf(buf, len, "%s/hwloc/%s", dir ? dir : "tests/data", name);
}

static struct phx_node_topo *load_fixture(const char *name)
{
	struct phx_node_topo *t = NULL;
	char path[4096], err[512];

	fixture_path(path, sizeof(path), name);
	if (phx_topo_load(path, &t, err, sizeof(err)) < 0)
		fail_msg("%s: %s", path, err);
	return t;
}

static char *read_fixture(const char *name, size_t *len)
{
	char path[4096];
	char *data = NULL;

	fixture_path(path, sizeof(path), name);
	assert_int_equal(phx_file_read(path, 1 << 20, &data, len), 0);
	return data;
}

static const struct phx_topo_nic *nic_of(const struct phx_node_topo *t, size_t gpu)
{
	assert_true(gpu < t->ngpus);
	if (t->gpus[gpu].nic < 0)
		return NULL;
	assert_true((size_t)t->gpus[gpu].nic < t->nnics);
	return &t->nics[t->gpus[gpu].nic];
}

static const struct phx_topo_nic *nic_named(const struct phx_node_topo *t, const char *name)
{
	for (size_t i = 0; i < t->nnics; i++) {
		if (!strcmp(t->nics[i].name, name))
			return &t->nics[i];
	}
	fail_msg("no NIC named %s", name);
	return NULL;
}

static void check_pairing(const struct phx_node_topo *t, const struct pairing *want, size_t n)
{
	assert_int_equal(t->ngpus, n);
	for (size_t i = 0; i < n; i++) {
		const struct phx_topo_nic *nic = nic_of(t, i);

		assert_string_equal(t->gpus[i].pci, want[i].pci);
		assert_non_null(nic);
		if (strcmp(nic->name, want[i].nic) || t->gpus[i].prox != want[i].prox)
			fail_msg("GPU %zu (%s): got %s (%s), want %s (%s)", i, t->gpus[i].pci,
				 nic->name, phx_topo_prox_name(t->gpus[i].prox), want[i].nic,
				 phx_topo_prox_name(want[i].prox));
	}
}

/*
 * What must hold on any node: GPUs are NVIDIA display functions in strict
 * PCI order, cpulists match the bitmaps, and the NIC loads are balanced.
 */
static void check_invariants(const struct phx_node_topo *t)
{
	size_t cand = 0, any_usable = 0;
	unsigned lo = ~0u, hi = 0;

	for (size_t i = 0; i < t->ngpus; i++) {
		const struct phx_topo_gpu *g = &t->gpus[i];
		hwloc_bitmap_t set = hwloc_bitmap_alloc();

		assert_int_equal(g->index, i);
		assert_int_equal(g->vendor_id, 0x10de);
		assert_true(g->class_id == 0x0300 || g->class_id == 0x0302);
		if (i > 0)
			assert_true(strcmp(t->gpus[i - 1].pci, g->pci) < 0);
		assert_int_equal(hwloc_bitmap_list_sscanf(set, g->cpulist), 0);
		assert_true(hwloc_bitmap_isequal(set, g->cpuset));
		hwloc_bitmap_free(set);
	}
	for (size_t i = 0; i < t->nnics; i++)
		any_usable += t->nics[i].rdma && t->nics[i].usable;
	for (size_t i = 0; i < t->nnics; i++) {
		const struct phx_topo_nic *n = &t->nics[i];

		assert_int_equal(n->index, i);
		if (!n->rdma || (any_usable && !n->usable)) {
			assert_int_equal(n->ngpus, 0);
			continue;
		}
		cand++;
		lo = n->ngpus < lo ? n->ngpus : lo;
		hi = n->ngpus > hi ? n->ngpus : hi;
	}
	for (size_t i = 0; i < t->ngpus; i++)
		assert_true(cand ? t->gpus[i].nic >= 0 : t->gpus[i].nic == -1);
	/* No NIC serves two GPUs while another idles; loads differ by one at most. */
	if (cand && t->ngpus)
		assert_true(hi - lo <= 1);
}

/* ------------------------------------------------------------ fixtures */

static void test_dgx8_gpus(void **state)
{
	static const char *const pci[] = { "0000:13:00.0", "0000:14:00.0", "0000:33:00.0",
					   "0000:35:00.0", "0000:93:00.0", "0000:94:00.0",
					   "0000:b3:00.0", "0000:b5:00.0" };
	struct phx_node_topo *t = load_fixture("dgx8.xml");

	/* The ASPEED VGA (1a03, class 0300) and the NVSwitch (10de, class 0680) are no GPUs. */
	assert_int_equal(t->ngpus, 8);
	for (size_t i = 0; i < t->ngpus; i++) {
		/* The XML lists the switch on bus 0x30 before the one on 0x10. */
		assert_string_equal(t->gpus[i].pci, pci[i]);
		assert_int_equal(t->gpus[i].device_id, 0x20b0);
		assert_int_equal(t->gpus[i].class_id, 0x0302);
		assert_int_equal(t->gpus[i].numa, i < 4 ? 0 : 1);
		assert_string_equal(t->gpus[i].cpulist, i < 4 ? "0-3,8-11" : "4-7,12-15");
	}
	assert_string_equal(t->hostname, "dgx8");
	assert_int_equal(t->npackages, 2);
	assert_int_equal(t->npus, 16);
	assert_int_equal(t->nnumas, 2);
	assert_int_equal(t->numas[1].os_index, 1);
	assert_string_equal(t->numas[1].cpulist, "4-7,12-15");
	assert_int_equal(t->numas[1].memory, 64ull << 30);
	check_invariants(t);
	phx_topo_free(t);
}

static void test_dgx8_pairing(void **state)
{
	static const struct pairing want[] = {
		{ "0000:13:00.0", "mlx5_2", PHX_PROX_PCIE_SWITCH },
		{ "0000:14:00.0", "mlx5_2", PHX_PROX_PCIE_SWITCH },
		{ "0000:33:00.0", "mlx5_3", PHX_PROX_PCIE_SWITCH },
		{ "0000:35:00.0", "mlx5_3", PHX_PROX_PCIE_SWITCH },
		{ "0000:93:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
		{ "0000:94:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
		{ "0000:b3:00.0", "mlx5_1", PHX_PROX_PCIE_SWITCH },
		{ "0000:b5:00.0", "mlx5_1", PHX_PROX_PCIE_SWITCH },
	};
	struct phx_node_topo *t = load_fixture("dgx8.xml");

	check_pairing(t, want, 8);
	/* The switch's upstream port is the deepest bridge both sit below. */
	assert_string_equal(t->gpus[0].via, "0000:11:00.0");
	assert_string_equal(t->gpus[3].via, "0000:31:00.0");
	assert_int_equal(t->gpus[0].pci_hops, 4);
	for (size_t i = 0; i < t->nnics; i++)
		assert_int_equal(t->nics[i].ngpus, t->nics[i].rdma ? 2 : 0);
	check_invariants(t);
	phx_topo_free(t);
}

static void test_dgx8_nics(void **state)
{
	static const char *const names[] = { "eno1", "mlx5_2", "mlx5_3", "mlx5_0", "mlx5_1" };
	struct phx_node_topo *t = load_fixture("dgx8.xml");
	const struct phx_topo_nic *n;

	assert_int_equal(t->nnics, 5);
	for (size_t i = 0; i < t->nnics; i++)
		assert_string_equal(t->nics[i].name, names[i]); /* PCI order */
	n = nic_named(t, "eno1");
	assert_int_equal(n->kind, PHX_NIC_ETH);
	assert_false(n->rdma);
	assert_string_equal(n->netdev, "eno1");
	assert_int_equal(n->nports, 0);
	n = nic_named(t, "mlx5_2");
	assert_int_equal(n->kind, PHX_NIC_IB);
	assert_true(n->rdma);
	assert_true(n->usable);
	assert_string_equal(n->pci, "0000:15:00.0");
	assert_int_equal(n->vendor_id, 0x15b3);
	assert_int_equal(n->numa, 0);
	assert_string_equal(n->netdev, "ib2");
	assert_string_equal(n->node_guid, "0800:3800:0000:0012");
	assert_int_equal(n->nports, 1);
	assert_int_equal(n->ports[0].num, 1);
	assert_int_equal(n->ports[0].state, PHX_PORT_ACTIVE);
	assert_int_equal(n->ports[0].lid, 0x12);
	assert_string_equal(n->ports[0].netdev, "ib2");
	assert_string_equal(n->ports[0].link_layer, "");
	phx_topo_free(t);
}

static void test_fewer_nics(void **state)
{
	static const struct pairing want[] = {
		{ "0000:03:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
		{ "0000:05:00.0", "mlx5_0", PHX_PROX_HOST_BRIDGE },
		{ "0000:41:00.0", "mlx5_1", PHX_PROX_NUMA },
		{ "0000:42:00.0", "mlx5_1", PHX_PROX_NUMA },
	};
	struct phx_node_topo *t = load_fixture("fewer-nics.xml");

	check_pairing(t, want, 4);
	/* A GPU of class 0300 (VGA) counts as well as a 3D controller. */
	assert_int_equal(t->gpus[1].class_id, 0x0300);
	assert_int_equal(t->gpus[1].pci_hops, 6);
	assert_string_equal(t->gpus[1].via, "");
	check_invariants(t);
	phx_topo_free(t);
}

static void test_remote_nic(void **state)
{
	static const struct pairing want[] = {
		{ "0000:01:00.0", "mlx5_0", PHX_PROX_PACKAGE },
		{ "0000:81:00.0", "mlx5_0", PHX_PROX_SYSTEM },
	};
	struct phx_node_topo *t = load_fixture("remote-nic.xml");

	/* No latency matrix: package, then anything. eno1 is nearer but no RDMA NIC. */
	check_pairing(t, want, 2);
	assert_int_equal(t->gpus[0].numa, 0);
	assert_int_equal(t->gpus[1].numa, 2);
	assert_string_equal(t->gpus[0].cpulist, "0-1");
	assert_string_equal(t->gpus[1].cpulist, "4-5");
	assert_int_equal(nic_named(t, "mlx5_0")->numa, 1);
	assert_int_equal(nic_named(t, "eno1")->ngpus, 0);
	assert_int_equal(t->nnumas, 3);
	assert_string_equal(t->numas[0].cpulist, "0-1");
	assert_string_equal(t->numas[2].cpulist, "4-5");
	check_invariants(t);
	phx_topo_free(t);
}

static void test_balance_and_down_port(void **state)
{
	static const struct pairing want[] = {
		{ "0000:03:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
		{ "0000:04:00.0", "mlx5_1", PHX_PROX_NUMA_DISTANCE },
	};
	struct phx_node_topo *t = load_fixture("skewed.xml");
	const struct phx_topo_nic *n;

	/*
	 * Both GPUs sit on mlx5_0's switch; the second goes to the RoCE NIC on
	 * the other socket rather than share mlx5_0 while mlx5_1 idles, and
	 * not to the nearer mlx5_2, whose only port is down.
	 */
	check_pairing(t, want, 2);
	assert_int_equal(t->gpus[1].numa_distance, 21);
	n = nic_named(t, "mlx5_2");
	assert_false(n->usable);
	assert_int_equal(n->ports[0].state, PHX_PORT_DOWN);
	assert_int_equal(n->ngpus, 0);
	n = nic_named(t, "mlx5_1");
	assert_int_equal(n->kind, PHX_NIC_ROCE);
	assert_string_equal(n->netdev, "ens81f0");
	assert_int_equal(n->ports[0].lid, 0);
	check_invariants(t);
	phx_topo_free(t);
}

/* Replaces every occurrence of from by to (same length) in buf. */
static void patch(char *buf, const char *from, const char *to)
{
	size_t len = strlen(from);
	char *p;

	assert_int_equal(len, strlen(to));
	for (p = strstr(buf, from); p; p = strstr(p + len, from))
		memcpy(p, to, len);
}

static void test_all_ports_down(void **state)
{
	static const struct pairing want[] = {
		{ "0000:03:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
		{ "0000:04:00.0", "mlx5_2", PHX_PROX_NUMA },
	};
	struct phx_node_topo *t = NULL;
	char err[512];
	size_t len;
	char *xml = read_fixture("skewed.xml", &len);

	/* With no active port anywhere, the pairing still follows the hardware. */
	patch(xml, "\"Port1State\" value=\"4\"", "\"Port1State\" value=\"1\"");
	if (phx_topo_load_xmlbuffer(xml, len, &t, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	check_pairing(t, want, 2);
	for (size_t i = 0; i < t->nnics; i++)
		assert_false(t->nics[i].rdma && t->nics[i].usable);
	check_invariants(t);
	phx_topo_free(t);
	free(xml);
}

static void test_buffer_matches_file(void **state)
{
	struct phx_node_topo *a = load_fixture("fewer-nics.xml"), *b = NULL;
	char err[512];
	size_t len;
	char *xml = read_fixture("fewer-nics.xml", &len);

	assert_int_equal(phx_topo_load_xmlbuffer(xml, len, &b, err, sizeof(err)), 0);
	assert_int_equal(a->ngpus, b->ngpus);
	for (size_t i = 0; i < a->ngpus; i++) {
		assert_string_equal(a->gpus[i].pci, b->gpus[i].pci);
		assert_int_equal(a->gpus[i].nic, b->gpus[i].nic);
	}
	phx_topo_free(a);
	phx_topo_free(b);
	free(xml);
}

static struct json_object *field(struct json_object *obj, const char *key)
{
	struct json_object *v = NULL;

	if (!json_object_object_get_ex(obj, key, &v))
		fail_msg("JSON object has no '%s'", key);
	return v;
}

static const char *str_field(struct json_object *obj, const char *key)
{
	return json_object_get_string(field(obj, key));
}

static void test_json(void **state)
{
	struct phx_node_topo *t = load_fixture("dgx8.xml");
	struct json_object *j, *parsed, *gpu, *nic, *port, *gpus;

	assert_int_equal(phx_topo_to_json(t, &j), 0);
	/* What goes over the wire must parse back. */
	parsed = json_tokener_parse(json_object_to_json_string(j));
	assert_non_null(parsed);
	assert_string_equal(str_field(parsed, "hostname"), "dgx8");
	assert_int_equal(json_object_get_int(field(parsed, "pus")), 16);
	assert_int_equal(json_object_array_length(field(parsed, "gpus")), 8);
	gpu = json_object_array_get_idx(field(parsed, "gpus"), 2);
	assert_int_equal(json_object_get_int(field(gpu, "index")), 2);
	assert_string_equal(str_field(gpu, "pci"), "0000:33:00.0");
	assert_string_equal(str_field(gpu, "pci_id"), "10de:20b0");
	assert_int_equal(json_object_get_int(field(gpu, "numa")), 0);
	assert_string_equal(str_field(gpu, "cpus"), "0-3,8-11");
	assert_string_equal(str_field(gpu, "nic"), "mlx5_3");
	assert_string_equal(str_field(gpu, "proximity"), "pcie-switch");
	assert_string_equal(str_field(gpu, "via"), "0000:31:00.0");
	assert_int_equal(json_object_get_int(field(gpu, "pci_hops")), 4);
	assert_null(field(gpu, "numa_distance"));

	nic = json_object_array_get_idx(field(parsed, "nics"), 2);
	assert_string_equal(str_field(nic, "name"), "mlx5_3");
	assert_string_equal(str_field(nic, "kind"), "ib");
	assert_true(json_object_get_boolean(field(nic, "rdma")));
	assert_string_equal(str_field(nic, "netdev"), "ib3");
	port = json_object_array_get_idx(field(nic, "ports"), 0);
	assert_int_equal(json_object_get_int(field(port, "port")), 1);
	assert_string_equal(str_field(port, "state"), "active");
	assert_int_equal(json_object_get_int(field(port, "lid")), 0x13);
	assert_null(field(port, "link_layer"));
	gpus = field(nic, "gpus");
	assert_int_equal(json_object_array_length(gpus), 2);
	assert_int_equal(json_object_get_int(json_object_array_get_idx(gpus, 0)), 2);
	assert_int_equal(json_object_get_int(json_object_array_get_idx(gpus, 1)), 3);

	nic = json_object_array_get_idx(field(parsed, "nics"), 0);
	assert_string_equal(str_field(nic, "kind"), "eth");
	assert_null(field(nic, "node_guid"));
	assert_int_equal(json_object_array_length(field(nic, "gpus")), 0);
	assert_int_equal(json_object_array_length(field(parsed, "numa_nodes")), 2);
	json_object_put(parsed);
	json_object_put(j);
	phx_topo_free(t);
}

static void test_json_numa_distance(void **state)
{
	struct phx_node_topo *t = load_fixture("skewed.xml");
	struct json_object *j, *gpu;

	assert_int_equal(phx_topo_to_json(t, &j), 0);
	gpu = json_object_array_get_idx(field(j, "gpus"), 1);
	assert_string_equal(str_field(gpu, "nic"), "mlx5_1");
	assert_string_equal(str_field(gpu, "proximity"), "numa-distance");
	assert_int_equal(json_object_get_int(field(gpu, "numa_distance")), 21);
	assert_null(field(gpu, "via"));
	assert_null(field(gpu, "pci_hops"));
	json_object_put(j);
	phx_topo_free(t);
}

/* ------------------------------------------------------------ errors */

static void expect_error(const char *path, const char *want1, const char *want2)
{
	struct phx_node_topo *t = (struct phx_node_topo *)&t;
	char err[512];

	assert_int_equal(phx_topo_load(path, &t, err, sizeof(err)), -1);
	assert_null(t);
	if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
		fail_msg("error '%s' does not say '%s'", err, want1);
}

static void test_missing_file(void **state)
{
	expect_error("/nonexistent/phalanx/node.xml", "'/nonexistent/phalanx/node.xml'",
		     "No such file");
}

static void test_directory(void **state)
{
	expect_error("/", "'/'", "not a regular file");
}

static char *write_temp(const char *content, size_t len)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/phx-topo-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, len), (ssize_t)len);
	close(fd);
	return path;
}

static void test_malformed_file(void **state)
{
	size_t len;
	char *xml = read_fixture("dgx8.xml", &len);
	char *path;

	/* Cut in the middle of an element. */
	path = write_temp(xml, len / 2);
	expect_error(path, path, "lstopo --of xml");
	unlink(path);
	path = write_temp("not xml at all\n", 15);
	expect_error(path, path, NULL);
	unlink(path);
	path = write_temp("", 0);
	expect_error(path, path, NULL);
	unlink(path);
	free(xml);
}

static void test_malformed_buffer(void **state)
{
	struct phx_node_topo *t = (struct phx_node_topo *)&t;
	static const char bad[] = "<?xml version=\"1.0\"?><topology version=\"2.0\"><object";
	char err[512];

	assert_int_equal(phx_topo_load_xmlbuffer(bad, sizeof(bad) - 1, &t, err, sizeof(err)), -1);
	assert_null(t);
	assert_non_null(strstr(err, "XML document"));
	assert_int_equal(phx_topo_load_xmlbuffer("", 0, &t, err, sizeof(err)), -1);
}

/* Loads the fixture with its first from replaced by to; expects a refusal. */
static void expect_refused(const char *fixture, const char *from, const char *to, const char *want)
{
	struct phx_node_topo *t = (struct phx_node_topo *)&t;
	char err[512];
	size_t len;
	char *xml = read_fixture(fixture, &len);
	char *p = strstr(xml, from);

	assert_non_null(p);
	assert_int_equal(strlen(from), strlen(to));
	memcpy(p, to, strlen(to));
	assert_int_equal(phx_topo_load_xmlbuffer(xml, len, &t, err, sizeof(err)), -1);
	assert_null(t);
	if (!strstr(err, want))
		fail_msg("error '%s' does not say '%s'", err, want);
	free(xml);
}

/* Inputs that crash hwloc 2.9's importer are refused before it sees them. */
static void test_hwloc_crashers(void **state)
{
	/* An object without complete_cpuset (hwloc dereferences it). */
	expect_refused("fewer-nics.xml", "complete_cpuset=\"0x00000002\"",
		       "complete_cpUset=\"0x00000002\"", "only some of its CPU and NUMA node sets");
	/* A set starting with ',' (an assertion in hwloc_bitmap_sscanf). */
	expect_refused("skewed.xml", "complete_nodeset=\"0x00000001\"",
		       "complete_nodeset=\",x00000001\"", "malformed CPU or NUMA node set");
	expect_refused("skewed.xml", "cpuset=\"0x00000002\"", "cpuset=\"0x0000000,\"", "malformed");
	/* A PU without an os_index: hwloc sets bit 2^32 - 1 of a set (512 MiB). */
	expect_refused("skewed.xml", "<object type=\"PU\" os_index=\"1\"",
		       "<object type=\"PU\" os_indeX=\"1\"", "without an os_index below");
	/* A NUMA node's index past the bound, and one that is no number. */
	expect_refused("skewed.xml",
		       "<object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x000000f0\"",
		       "<object type=\"NUMANode\" os_index=\"2097152\" cpuset=\"0xf0\"",
		       "without an os_index below");
	expect_refused("skewed.xml", "<object type=\"PU\" os_index=\"2\"",
		       "<object type=\"PU\" os_index=\"-\"", "without an os_index below");
	/* A <topology tag that never closes (hwloc's own parser). */
	expect_refused("skewed.xml", "<topology version=\"2.0\">", "<topology version=\"2.0\"/",
		       "<topology> tag does not end");
	/* A DOCTYPE without a system identifier (libxml2's import reads it unchecked). */
	expect_refused("skewed.xml", "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">",
		       "<!DOCTYPE topology                    >", "its DOCTYPE names no DTD");
	expect_refused("skewed.xml", "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">",
		       "<!DOCTYPE topology [<!ELEMENT a ANY> ]>", "its DOCTYPE names no DTD");
}

/* ------------------------------------------------------------ this machine */

static void test_this_machine(void **state)
{
	struct phx_node_topo *t = NULL;
	char err[512];

	if (phx_topo_load(NULL, &t, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	/* Machines without a GPU (CI) must work too and report none. */
	printf("this machine: %zu GPUs, %zu NICs, %zu NUMA nodes, %u PUs\n", t->ngpus, t->nnics,
	       t->nnumas, t->npus);
	assert_true(t->npus > 0);
	assert_true(t->nnumas > 0);
	check_invariants(t);
	phx_topo_free(t);
}

/* ------------------------------------------------------------ real nodes */

struct real_node {
	const char *file;
	size_t gpus, hcas, numas;
	unsigned pus;
	struct pairing pairs[4];
};

/*
 * Counts from the topologies' README; pairings from their PCI trees (see
 * tests/data/hwloc/README.md for the reasoning on each node).
 */
static const struct real_node real_nodes[] = {
	{ "jwb0001.xml",
	  4,
	  4,
	  8,
	  96,
	  { { "0000:03:00.0", "mlx5_1", PHX_PROX_PCIE_SWITCH },
	    { "0000:44:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
	    { "0000:84:00.0", "mlx5_3", PHX_PROX_PCIE_SWITCH },
	    { "0000:c4:00.0", "mlx5_2", PHX_PROX_PCIE_SWITCH } } },
	{ "jrc0323.xml",
	  4,
	  4,
	  8,
	  256,
	  { { "0000:03:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
	    { "0000:44:00.0", "mlx5_1", PHX_PROX_PCIE_SWITCH },
	    { "0000:84:00.0", "mlx5_2", PHX_PROX_PCIE_SWITCH },
	    { "0000:c4:00.0", "mlx5_3", PHX_PROX_PCIE_SWITCH } } },
	/* mlx5_0's only port was down when recorded: every GPU uses mlx5_1. */
	{ "mel2001.xml",
	  4,
	  2,
	  8,
	  128,
	  { { "0000:03:00.0", "mlx5_1", PHX_PROX_NUMA_DISTANCE },
	    { "0000:44:00.0", "mlx5_1", PHX_PROX_NUMA_DISTANCE },
	    { "0000:84:00.0", "mlx5_1", PHX_PROX_PCIE_SWITCH },
	    { "0000:c3:00.0", "mlx5_1", PHX_PROX_NUMA_DISTANCE } } },
	{ "jwc09n003.xml",
	  4,
	  2,
	  2,
	  80,
	  { { "0000:5d:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
	    { "0000:5e:00.0", "mlx5_0", PHX_PROX_PCIE_SWITCH },
	    { "0000:88:00.0", "mlx5_1", PHX_PROX_PCIE_SWITCH },
	    { "0000:89:00.0", "mlx5_1", PHX_PROX_PCIE_SWITCH } } },
	/* Same distance to the RoCE and the InfiniBand port: InfiniBand wins. */
	{ "jsfc005.xml", 1, 2, 8, 256, { { "0000:01:00.0", "mlx5_1", PHX_PROX_NUMA_DISTANCE } } },
	{ "jrc0732.xml", 0, 1, 8, 256, { { NULL } } },
};

static void test_real_node(void **state)
{
	const struct real_node *want = *state;
	const char *dir = getenv("PHX_HWLOC_REAL_DIR");
	struct phx_node_topo *t = NULL;
	char path[4096], err[512];
	size_t hcas = 0;

	if (!dir || !*dir) {
		printf("phalanx: PHX_HWLOC_REAL_DIR is not set; skipping real-node topology %s\n",
		       want->file);
		skip();
	}
	snprintf(path, sizeof(path), "%s/%s", dir, want->file);
	if (phx_topo_load(path, &t, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	for (size_t i = 0; i < t->nnics; i++)
		hcas += t->nics[i].rdma;
	assert_int_equal(t->ngpus, want->gpus);
	assert_int_equal(hcas, want->hcas);
	assert_int_equal(t->nnumas, want->numas);
	assert_int_equal(t->npus, want->pus);
	if (want->gpus)
		check_pairing(t, want->pairs, want->gpus);
	check_invariants(t);
	phx_topo_free(t);
}

static void test_real_jwb0001_details(void **state)
{
	const char *dir = getenv("PHX_HWLOC_REAL_DIR");
	struct phx_node_topo *t = NULL;
	char path[4096], err[512];

	if (!dir || !*dir) {
		printf("phalanx: PHX_HWLOC_REAL_DIR is not set; skipping real-node details\n");
		skip();
	}
	snprintf(path, sizeof(path), "%s/jwb0001.xml", dir);
	if (phx_topo_load(path, &t, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	/* hwloc lists the NUMA 1 GPU first; PCI order puts bus 03 (NUMA 3) first. */
	assert_int_equal(t->gpus[0].numa, 3);
	assert_string_equal(t->gpus[0].cpulist, "18-23,66-71");
	assert_string_equal(t->gpus[0].via, "0000:01:00.0");
	assert_int_equal(t->gpus[1].numa, 1);
	assert_string_equal(t->gpus[1].cpulist, "6-11,54-59");
	assert_string_equal(nic_of(t, 0)->netdev, "ib1");
	assert_int_equal(nic_of(t, 0)->ports[0].lid, 0x333);
	phx_topo_free(t);
}

/* Named after the file, so a skip or failure says which node. */
#define REAL(i, name)                                                                              \
	{                                                                                          \
		"test_real_" name, test_real_node, NULL, NULL, (void *)&real_nodes[i]              \
	}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dgx8_gpus),
		cmocka_unit_test(test_dgx8_pairing),
		cmocka_unit_test(test_dgx8_nics),
		cmocka_unit_test(test_fewer_nics),
		cmocka_unit_test(test_remote_nic),
		cmocka_unit_test(test_balance_and_down_port),
		cmocka_unit_test(test_all_ports_down),
		cmocka_unit_test(test_buffer_matches_file),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_json_numa_distance),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_directory),
		cmocka_unit_test(test_malformed_file),
		cmocka_unit_test(test_malformed_buffer),
		cmocka_unit_test(test_hwloc_crashers),
		cmocka_unit_test(test_this_machine),
		REAL(0, "jwb0001"),
		REAL(1, "jrc0323"),
		REAL(2, "mel2001"),
		REAL(3, "jwc09n003"),
		REAL(4, "jsfc005"),
		REAL(5, "jrc0732"),
		cmocka_unit_test(test_real_jwb0001_details),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx topo [--hwloc-xml FILE] [--json] */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "common/log.h"
#include "placement/topo.h"
#include "cli/cli_args.h"
#include "cli/commands.h"

#define USAGE "usage: phalanx topo [--hwloc-xml FILE] [--json]"

static int width(size_t n, const char *(*get)(const struct phx_node_topo *, size_t),
		 const struct phx_node_topo *t, int min)
{
	int w = min;

	for (size_t i = 0; i < n; i++) {
		const char *s = get(t, i);
		int len = s ? (int)strlen(s) : 0;

		if (len > w)
			w = len;
	}
	return w;
}

static const char *gpu_cpus(const struct phx_node_topo *t, size_t i)
{
	return t->gpus[i].cpulist;
}

static const char *nic_name(const struct phx_node_topo *t, size_t i)
{
	return t->nics[i].name;
}

static const char *nic_netdev(const struct phx_node_topo *t, size_t i)
{
	return t->nics[i].netdev;
}

static const char *numa_cpus(const struct phx_node_topo *t, size_t i)
{
	return t->numas[i].cpulist;
}

static void print_numa_index(int numa, int w)
{
	if (numa >= 0)
		printf("%-*d", w, numa);
	else
		printf("%-*s", w, "-");
}

/* "pcie-switch via 0000:01:00.0, 4 hops", "numa-distance 12", ... */
static void print_prox(const struct phx_topo_gpu *g)
{
	fputs(phx_topo_prox_name(g->prox), stdout);
	if (g->via[0])
		printf(" via %s", g->via);
	if (g->prox == PHX_PROX_PCIE_SWITCH || g->prox == PHX_PROX_HOST_BRIDGE)
		printf("%s%u PCI hops", g->via[0] ? ", " : " ", g->pci_hops);
	if (g->prox == PHX_PROX_NUMA_DISTANCE)
		printf(" %u", g->numa_distance);
	putchar('\n');
}

static void print_gpus(const struct phx_node_topo *t)
{
	int wc = width(t->ngpus, gpu_cpus, t, 4);
	int wn = width(t->nnics, nic_name, t, 3);

	if (t->ngpus == 0) {
		printf("GPUs: none\n");
		return;
	}
	printf("%-4s %-13s %-10s %-5s %-*s %-*s %s\n", "GPU", "PCI", "ID", "NUMA", wc, "CPUS", wn,
	       "NIC", "PROXIMITY");
	for (size_t i = 0; i < t->ngpus; i++) {
		const struct phx_topo_gpu *g = &t->gpus[i];

		printf("%-4u %-13s %04x:%04x  ", g->index, g->pci, g->vendor_id, g->device_id);
		print_numa_index(g->numa, 5);
		printf(" %-*s %-*s ", wc, g->cpulist, wn, g->nic >= 0 ? t->nics[g->nic].name : "-");
		print_prox(g);
	}
}

static void print_ports(const struct phx_topo_nic *n)
{
	if (n->nports == 0)
		fputs("-", stdout);
	for (size_t i = 0; i < n->nports; i++) {
		const struct phx_topo_port *p = &n->ports[i];

		printf("%s%u:%s", i ? " " : "", p->num, phx_port_state_name(p->state));
		if (p->lid > 0 && p->lid < 0xffff)
			printf(",lid=0x%lx", (unsigned long)p->lid);
		if (p->link_layer[0])
			printf(",%s", p->link_layer);
	}
	putchar('\n');
}

static void print_gpu_list(const struct phx_node_topo *t, const struct phx_topo_nic *n)
{
	char buf[64] = "-";
	size_t len = 0;

	/* Long lists are cut; --json has them whole. */

	for (size_t i = 0; i < t->ngpus && len < sizeof(buf) - 8; i++) {
		if (t->gpus[i].nic == (int)n->index)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%u",
						len ? "," : "", t->gpus[i].index);
	}
	printf(" %-8s ", buf);
}

static void print_nics(const struct phx_node_topo *t)
{
	int wn = width(t->nnics, nic_name, t, 3);
	int wd = width(t->nnics, nic_netdev, t, 6);

	if (t->nnics == 0) {
		printf("NICs: none\n");
		return;
	}
	printf("%-*s %-4s %-13s %-5s %-*s %-8s %s\n", wn, "NIC", "KIND", "PCI", "NUMA", wd,
	       "NETDEV", "GPUS", "PORTS");
	for (size_t i = 0; i < t->nnics; i++) {
		const struct phx_topo_nic *n = &t->nics[i];

		printf("%-*s %-4s %-13s ", wn, n->name, phx_nic_kind_name(n->kind),
		       n->pci[0] ? n->pci : "-");
		print_numa_index(n->numa, 5);
		printf(" %-*s", wd, n->netdev[0] ? n->netdev : "-");
		print_gpu_list(t, n);
		print_ports(n);
	}
}

static void print_numas(const struct phx_node_topo *t)
{
	int wc = width(t->nnumas, numa_cpus, t, 4);

	printf("%-5s %-*s %s\n", "NUMA", wc, "CPUS", "MEMORY");
	for (size_t i = 0; i < t->nnumas; i++) {
		const struct phx_topo_numa *n = &t->numas[i];

		printf("%-5u %-*s %.1f GiB\n", n->os_index, wc, n->cpulist,
		       (double)n->memory / (1024.0 * 1024 * 1024));
	}
}

static void print_text(const struct phx_node_topo *t)
{
	size_t rdma = 0;

	for (size_t i = 0; i < t->nnics; i++)
		rdma += t->nics[i].rdma;
	printf("node %s: %u packages, %u PUs, %zu NUMA nodes, %zu GPUs, %zu RDMA NICs\n\n",
	       t->hostname[0] ? t->hostname : "(unnamed)", t->npackages, t->npus, t->nnumas,
	       t->ngpus, rdma);
	print_gpus(t);
	putchar('\n');
	print_nics(t);
	putchar('\n');
	print_numas(t);
}

static int print_json(const struct phx_node_topo *t)
{
	struct json_object *obj;

	if (phx_topo_to_json(t, &obj) < 0) {
		phx_error("out of memory writing the topology as JSON");
		return 1;
	}
	puts(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(obj);
	return 0;
}

int phx_cmd_topo(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "hwloc-xml", required_argument, NULL, 'x' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct phx_node_topo *topo;
	const char *xml = NULL;
	bool json = false;
	char err[1024];
	int c, ret;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'x':
			xml = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			printf("%s\nShows the GPUs, NICs and NUMA nodes of this node (or of an "
			       "hwloc "
			       "XML file)\nand the NIC each GPU uses. See phalanx-topo(1).\n",
			       USAGE);
			return 0;
		default:
			return phx_cli_option_error("topo", c, argv, USAGE);
		}
	}
	if (phx_cli_no_arguments("topo", argc, argv, USAGE))
		return 2;
	if (phx_topo_load(xml, &topo, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		return 1;
	}
	ret = 0;
	if (json)
		ret = print_json(topo);
	else
		print_text(topo);
	phx_topo_free(topo);
	return ret;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fabric descriptions (the 'fabric:' YAML and Slurm's topology.conf) are
 * read by the plugin, the launcher and the CLI: any bytes must give a fabric
 * or an error. The input is YAML, then a line "%%", then topology.conf;
 * without that line it is YAML if it mentions "fabric", else topology.conf.
 * A fabric that loads must be consistent, and a placement on its nodes must
 * put every rank once and cost no less than its lower bound.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/fabric.h"
#include "placement/layout.h"
#include "placement/placement.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "fabric";

#define MAX_PLACED_NODES 64

static void check_fabric(const struct phx_fabric *f)
{
	for (size_t i = 0; i < f->n_nodes; i++) {
		phx_fuzz_check(f->nodes[i].leaf < f->n_leaves, "leaf index");
		phx_fuzz_check(f->nodes[i].domain < (int)f->n_domains, "domain index");
		phx_fuzz_check(!i || phx_hostname_cmp(f->nodes[i - 1].name, f->nodes[i].name) < 0,
			       "nodes not sorted");
		phx_fuzz_check(phx_fabric_find(f, f->nodes[i].name) == (long)i, "find");
	}
	for (size_t l = 0; l < f->n_leaves; l++)
		phx_fuzz_check(f->leaf_spine[l] < f->n_spines, "spine index");
	for (int l = 1; l < PHX_LEVEL_COUNT; l++)
		phx_fuzz_check(f->bandwidth[l] <= f->bandwidth[l - 1], "bandwidth order");
}

static void place_on(const struct phx_fabric *f, const char *spec)
{
	size_t n = f->n_nodes;
	char **names = calloc(n, sizeof(*names)), err[1024];
	unsigned char *used = calloc(n * 2, 1);
	struct phx_layout l;
	struct phx_plan *plan = NULL;
	uint64_t bound;

	if (!names || !used)
		goto out;
	for (size_t i = 0; i < n; i++)
		names[n - 1 - i] = f->nodes[i].name;
	if (phx_layout_parse(spec, &l, err, sizeof(err)) < 0 ||
	    phx_layout_resolve(&l, n * 2, err, sizeof(err)) < 0)
		goto out;
	phx_fuzz_check(phx_place(&(struct phx_place_input){ .fabric = f,
							    .nodes = names,
							    .n_nodes = n,
							    .gpus_per_node = 2,
							    .slow = names,
							    .n_slow = 1,
							    .layout = &l },
				 &plan, err, sizeof(err)) == 0,
		       err);
	for (unsigned long r = 0; r < plan->world; r++) {
		size_t slot = plan->rank_node[r] * 2 + plan->rank_gpu[r];

		phx_fuzz_check(plan->rank_node[r] < n && plan->rank_gpu[r] < 2 && !used[slot],
			       "rank map");
		used[slot] = 1;
	}
	phx_fuzz_check(phx_plan_lower_bound(plan, &bound) == 0 && plan->cost.total >= bound,
		       "cost below the lower bound");
	phx_fuzz_check(plan->cost.step_ns <= plan->hostname.step_ns,
		       "step above host-name order's");
out:
	phx_plan_free(plan);
	free(names);
	free(used);
}

static void split(const char *text, size_t size, const char **yaml, size_t *yaml_len,
		  const char **topo, size_t *topo_len)
{
	const char *sep = size >= 3 && !memcmp(text, "%%\n", 3) ? text : NULL;

	for (size_t i = 0; !sep && i + 4 <= size; i++) {
		if (!memcmp(text + i, "\n%%\n", 4))
			sep = text + i + 1;
	}
	*yaml = *topo = NULL;
	*yaml_len = *topo_len = 0;
	if (sep) {
		*yaml = sep > text ? text : NULL;
		*yaml_len = (size_t)(sep - text);
		*topo = sep + 3;
		*topo_len = size - (size_t)(sep + 3 - text);
	} else if (memmem(text, size, "fabric", 6)) {
		*yaml = text;
		*yaml_len = size;
	} else {
		*topo = text;
		*topo_len = size;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), err[1024];
	const char *yaml, *topo;
	size_t yaml_len, topo_len;
	struct phx_fabric *f = NULL;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	split(text, size, &yaml, &yaml_len, &topo, &topo_len);
	if (phx_fabric_parse("fuzz.yaml", yaml, yaml_len, "fuzz.conf", topo, topo_len, &f, err,
			     sizeof(err)) == 0) {
		check_fabric(f);
		if (f->n_nodes >= 1 && f->n_nodes <= MAX_PLACED_NODES) {
			place_on(f, "tp=2,dp=*");
			if (f->n_nodes % 2 == 0)
				place_on(f, "tp=2,pp=2,dp=*");
		}
	} else {
		phx_fuzz_check(err[0] != '\0', "error without a message");
	}
	phx_fabric_free(f);
	free(text);
	return 0;
}

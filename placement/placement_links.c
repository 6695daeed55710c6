/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The link model: how long one step's communication takes, as the time of
 * its busiest link. The step is a set of flows moving at once: tp, cp and
 * dp groups are rings (each member sends its MiB to the next: what ring
 * reduce-scatter plus all-gather moves), ep groups all-to-all (each member
 * sends its MiB split over the others), each pipeline hop half its MiB
 * forward and half back. A flow inside an NVLink unit (node or domain)
 * takes the sender's and the receiver's NVLink ports, at the node
 * bandwidth per GPU; any other flow the two nodes' NICs, which NCCL's
 * channels use all of whichever GPU sends (the leaf bandwidth times the
 * GPUs of the node), and between leaves both leaves' uplinks, between
 * spines both spines' uplinks, at the spine or core bandwidth per GPU the
 * job holds under them (spare nodes too): the share each GPU has of an
 * oversubscribed uplink on a full cluster. No link can carry its load
 * faster, so this is a lower bound on the step's communication time; with
 * flows sharing links fairly it is also close to it
 * (tests/bench/placement_sim checks both with SimGrid), and unlike the
 * per-group cost it sees rings piling onto one uplink.
 */
#include "config.h"

#include <stdlib.h>

#include "placement/placement_int.h"

enum port { NVL_OUT, NVL_IN, PORTS };
enum nic { NIC_OUT, NIC_IN, NICS };

/* The two switch levels with uplinks: leaf and spine. */
#define UPLINK_LEVELS 2

struct loads {
	const struct pl_alloc *a;
	uint32_t *gpu; /* per rank: node * gpn + its place among the node's ranks */
	uint64_t *port[PORTS]; /* per GPU, KiB */
	uint64_t *nic[NICS]; /* per node, KiB */
	uint64_t *up[UPLINK_LEVELS], *down[UPLINK_LEVELS]; /* per leaf, per spine, KiB */
	uint32_t *gpus[UPLINK_LEVELS]; /* the allocation's GPUs under each leaf, spine */
};

static void add_flow(struct loads *l, uint32_t src, uint32_t dst, uint64_t kib)
{
	const uint32_t *u0 = l->a->unit[src / l->a->gpn], *u1 = l->a->unit[dst / l->a->gpn];

	if (u0[PHX_LEVEL_NVLINK] == u1[PHX_LEVEL_NVLINK]) {
		l->port[NVL_OUT][src] += kib;
		l->port[NVL_IN][dst] += kib;
		return;
	}
	l->nic[NIC_OUT][src / l->a->gpn] += kib;
	l->nic[NIC_IN][dst / l->a->gpn] += kib;
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		uint32_t from = u0[PHX_LEVEL_LEAF + v], to = u1[PHX_LEVEL_LEAF + v];

		if (from == to)
			break;
		l->up[v][from] += kib;
		l->down[v][to] += kib;
	}
}

static void add_group(struct loads *l, enum phx_dim d, unsigned long r0, unsigned long stride,
		      unsigned long size)
{
	uint64_t kib = l->a->traffic[d] * 1024;

	for (unsigned long i = 0; i < size; i++) {
		uint32_t src = l->gpu[r0 + i * stride];

		if (d != PHX_DIM_EP) {
			add_flow(l, src, l->gpu[r0 + (i + 1) % size * stride], kib);
			continue;
		}
		for (unsigned long j = 0; j < size; j++) {
			if (j != i)
				add_flow(l, src, l->gpu[r0 + j * stride], kib / (size - 1));
		}
	}
}

static void add_step(struct loads *l)
{
	const struct phx_layout *lay = l->a->layout;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long stride = phx_layout_stride(lay, (enum phx_dim)d), size = lay->size[d];

		if (size < 2 || !l->a->traffic[d])
			continue;
		for (unsigned long hi = 0; hi < l->a->world; hi += stride * size) {
			for (unsigned long lo = 0; lo < stride; lo++) {
				if (d != PHX_DIM_PP) {
					add_group(l, (enum phx_dim)d, hi + lo, stride, size);
					continue;
				}
				for (unsigned long s = 0; s + 1 < size; s++) {
					uint32_t g0 = l->gpu[hi + lo + s * stride];
					uint32_t g1 = l->gpu[hi + lo + (s + 1) * stride];
					uint64_t half = l->a->traffic[d] * 512;

					add_flow(l, g0, g1, half);
					add_flow(l, g1, g0, half);
				}
			}
		}
	}
}

static double busiest(const struct loads *l)
{
	const struct pl_alloc *a = l->a;
	size_t gpus = a->n_nodes * a->gpn;
	double worst = 0, t;

	for (size_t g = 0; g < gpus; g++) {
		for (int p = 0; p < PORTS; p++) {
			t = (double)l->port[p][g] * (double)a->weight[PHX_LEVEL_NODE];
			worst = t > worst ? t : worst;
		}
	}
	for (size_t n = 0; n < a->n_nodes; n++) {
		for (int p = 0; p < NICS; p++) {
			t = (double)l->nic[p][n] * (double)a->weight[PHX_LEVEL_LEAF] / a->gpn;
			worst = t > worst ? t : worst;
		}
	}
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		for (uint32_t u = 0; u < a->n_units[PHX_LEVEL_LEAF + v]; u++) {
			uint64_t most = l->up[v][u] > l->down[v][u] ? l->up[v][u] : l->down[v][u];

			if (!most)
				continue;
			t = (double)most * (double)a->weight[PHX_LEVEL_SPINE + v] /
			    (double)l->gpus[v][u];
			worst = t > worst ? t : worst;
		}
	}
	return worst / 1024; /* KiB x ns per MiB */
}

static void loads_free(struct loads *l)
{
	free(l->gpu);
	for (int p = 0; p < PORTS; p++)
		free(l->port[p]);
	for (int p = 0; p < NICS; p++)
		free(l->nic[p]);
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		free(l->up[v]);
		free(l->down[v]);
		free(l->gpus[v]);
	}
}

static int loads_init(struct loads *l, const struct pl_alloc *a, const uint32_t *rank_node)
{
	size_t gpus = a->n_nodes * a->gpn;
	uint32_t *taken;

	*l = (struct loads){ .a = a };
	l->gpu = malloc(a->world * sizeof(*l->gpu));
	taken = calloc(a->n_nodes, sizeof(*taken));
	for (int p = 0; p < PORTS; p++) {
		l->port[p] = calloc(gpus, sizeof(*l->port[p]));
		if (!l->port[p])
			goto fail;
	}
	for (int p = 0; p < NICS; p++) {
		l->nic[p] = calloc(a->n_nodes, sizeof(*l->nic[p]));
		if (!l->nic[p])
			goto fail;
	}
	for (unsigned v = 0; v < UPLINK_LEVELS; v++) {
		size_t n = a->n_units[PHX_LEVEL_LEAF + v];

		l->up[v] = calloc(n, sizeof(*l->up[v]));
		l->down[v] = calloc(n, sizeof(*l->down[v]));
		l->gpus[v] = calloc(n, sizeof(*l->gpus[v]));
		if (!l->up[v] || !l->down[v] || !l->gpus[v])
			goto fail;
	}
	if (!l->gpu || !taken)
		goto fail;
	for (unsigned long r = 0; r < a->world; r++)
		l->gpu[r] = rank_node[r] * a->gpn + taken[rank_node[r]]++;
	/* Every node of the allocation: a map may use spares (host-name order does). */
	for (size_t n = 0; n < a->n_nodes; n++) {
		for (unsigned v = 0; v < UPLINK_LEVELS; v++)
			l->gpus[v][a->unit[n][PHX_LEVEL_LEAF + v]] += a->gpn;
	}
	free(taken);
	return 0;
fail:
	free(taken);
	loads_free(l);
	return -1;
}

int phx_pl_step_time(const struct pl_alloc *a, const uint32_t *rank_node, uint64_t *ns)
{
	struct loads l;

	if (loads_init(&l, a, rank_node) < 0)
		return -1;
	add_step(&l);
	*ns = (uint64_t)busiest(&l);
	loads_free(&l);
	return 0;
}

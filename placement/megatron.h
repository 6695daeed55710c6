/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A resolved layout as Megatron-Core sees it: the arguments that make
 * Megatron-Core's process groups (parallel_state.initialize_model_parallel)
 * exactly the groups Phalanx placed, and those groups for any rank.
 *
 * Megatron-Core builds two grids over the same ranks, each from its sizes
 * and an order string (first name varies fastest): the dense grid
 * tp x cp x dp x pp, dp being world / (tp * cp * pp), and the expert grid
 * etp x ep x edp x pp, which has no cp. A group is the ranks that differ
 * only in its grid's named dimensions. Phalanx's ep is a dimension of its
 * own, so in Megatron-Core's terms:
 *
 *   tp, cp, pp   the same sizes
 *   ep           --expert-model-parallel-size ep
 *   dp           derived by Megatron-Core: ep x dp (experts are carved
 *                out of the data-parallel ranks)
 *   etp          tp x cp when ep > 1 (the expert grid has no cp, so the cp
 *                ranks below ep fall to expert tensor parallel), else tp
 *   edp          dp when ep > 1, else cp x dp
 *
 * Megatron-LM orders ranks tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with
 * --use-tp-pp-dp-mapping; a layout whose groups neither order forms is
 * refused, naming the nearest layout that maps. Not a check of every
 * layout: other frameworks take any order.
 */
#ifndef PHX_MEGATRON_H
#define PHX_MEGATRON_H

#include <stdbool.h>
#include <stddef.h>

#include "placement/layout.h"

/* Megatron-Core's process groups, by the name of its getter's group. */
enum phx_mg_group {
	PHX_MG_TP = 0, /* tensor model parallel */
	PHX_MG_CP, /* context parallel */
	PHX_MG_PP, /* pipeline model parallel */
	PHX_MG_DP, /* data parallel, without cp */
	PHX_MG_DP_CP, /* data parallel with cp: where dense gradients are reduced */
	PHX_MG_EP, /* expert model parallel */
	PHX_MG_ETP, /* expert tensor parallel */
	PHX_MG_EDP, /* expert data parallel */
	PHX_MG_COUNT,
};

struct phx_megatron {
	struct phx_layout layout; /* the resolved layout it maps */
	/* Megatron-Core's arguments; dp and edp are what it derives. */
	unsigned long tp, cp, pp, ep, etp, dp, edp;
	bool tp_pp_dp; /* order tp-cp-ep-pp-dp: --use-tp-pp-dp-mapping */
};

/* "tp", "cp", "pp", "dp", "dp-cp", "ep", "etp", "edp"; "?" when out of range. */
const char *phx_mg_group_name(enum phx_mg_group group);

/*
 * Maps a resolved layout. Returns 0, or -1 when Megatron-Core cannot form
 * the layout's groups, with the reason and the nearest layout it can in err.
 */
int phx_megatron_map(const struct phx_layout *layout, struct phx_megatron *mg, char *err,
		     size_t errlen);

/*
 * The global ranks of rank's group, in Megatron-Core's order (a rank's
 * index is its rank in the group), at most n of them into ranks. Returns
 * the size of the group.
 */
unsigned long phx_megatron_group(const struct phx_megatron *mg, enum phx_mg_group group,
				 unsigned long rank, unsigned long *ranks, size_t n);

/* Writes Megatron-LM's command line arguments; returns snprintf's value. */
int phx_megatron_args(const struct phx_megatron *mg, char *buf, size_t len);

#endif

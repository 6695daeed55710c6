/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parallelism layouts: "tp=8,cp=1,ep=1,pp=4,dp=*" with an optional
 * "order=tp-cp-ep-dp-pp" (Megatron's rank order: the first dimension varies
 * fastest). Global rank r has coordinates c[] with
 *   r = c[o0] + size[o0] * (c[o1] + size[o1] * (c[o2] + ...))
 * where o0, o1, ... is the order. A dimension left out of the spec is 1,
 * except dp, which is '*' when no other key is.
 */
#ifndef PHX_LAYOUT_H
#define PHX_LAYOUT_H

#include <stddef.h>

enum phx_dim {
	PHX_DIM_TP = 0, /* tensor parallel */
	PHX_DIM_CP, /* context parallel */
	PHX_DIM_EP, /* expert parallel */
	PHX_DIM_DP, /* data parallel */
	PHX_DIM_PP, /* pipeline parallel */
	PHX_DIM_COUNT,
};

/* One dimension larger than this is a typo, not a job. */
#define PHX_LAYOUT_MAX_SIZE (1ul << 20)
/* Ranks in one job; also bounds the product of the sizes. */
#define PHX_LAYOUT_MAX_WORLD (1ul << 22)
#define PHX_LAYOUT_DEFAULT_ORDER "tp-cp-ep-dp-pp"

struct phx_layout {
	unsigned long size[PHX_DIM_COUNT]; /* 0 for the '*' one until resolved */
	enum phx_dim order[PHX_DIM_COUNT]; /* fastest-varying first */
	int star; /* the '*' dimension, or -1 */
	unsigned long world; /* product of the sizes once resolved, else 0 */
};

/* "tp", "cp", "ep", "dp", "pp". */
const char *phx_dim_name(enum phx_dim dim);
/* Dimension by name, or -1. */
int phx_dim_parse(const char *name, size_t len);

/*
 * Parses a spec. Every error names the item and what to write instead.
 * Returns 0, or -1 with the reason in err.
 */
int phx_layout_parse(const char *spec, struct phx_layout *layout, char *err, size_t errlen);

/*
 * Solves the '*' dimension from world (ranks in the job), or checks that
 * the sizes multiply to world. Returns 0, or -1 with the reason in err.
 */
int phx_layout_resolve(struct phx_layout *layout, unsigned long world, char *err, size_t errlen);

/* Writes "tp=8,cp=1,ep=1,dp=16,pp=4,order=tp-cp-ep-dp-pp"; returns snprintf's value. */
int phx_layout_format(const struct phx_layout *layout, char *buf, size_t len);

/* Distance in ranks between neighbours along dim (resolved layouts). */
unsigned long phx_layout_stride(const struct phx_layout *layout, enum phx_dim dim);
void phx_layout_coords(const struct phx_layout *layout, unsigned long rank,
		       unsigned long coord[PHX_DIM_COUNT]);
unsigned long phx_layout_rank(const struct phx_layout *layout,
			      const unsigned long coord[PHX_DIM_COUNT]);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>

#include "placement/megatron.h"

/* Ends a list of dimensions. */
#define NO_DIM PHX_DIM_COUNT

static const char *const group_names[PHX_MG_COUNT] = {
	"tp", "cp", "pp", "dp", "dp-cp", "ep", "etp", "edp",
};

/*
 * The layout's dimensions that make up each group, fastest first. cp is in
 * both expert groups here; group_dims() keeps it in one.
 */
static const enum phx_dim group_table[PHX_MG_COUNT][4] = {
	[PHX_MG_TP] = { PHX_DIM_TP, NO_DIM },
	[PHX_MG_CP] = { PHX_DIM_CP, NO_DIM },
	[PHX_MG_PP] = { PHX_DIM_PP, NO_DIM },
	[PHX_MG_DP] = { PHX_DIM_EP, PHX_DIM_DP, NO_DIM },
	[PHX_MG_DP_CP] = { PHX_DIM_CP, PHX_DIM_EP, PHX_DIM_DP, NO_DIM },
	[PHX_MG_EP] = { PHX_DIM_EP, NO_DIM },
	[PHX_MG_ETP] = { PHX_DIM_TP, PHX_DIM_CP, NO_DIM },
	[PHX_MG_EDP] = { PHX_DIM_CP, PHX_DIM_DP, NO_DIM },
};

/* Megatron's grids, each as its four axes in the order tp, cp|ep, dp, pp. */
static const enum phx_mg_group dense_axes[4] = { PHX_MG_TP, PHX_MG_CP, PHX_MG_DP, PHX_MG_PP };
static const enum phx_mg_group expert_axes[4] = { PHX_MG_ETP, PHX_MG_EP, PHX_MG_EDP, PHX_MG_PP };

/* Megatron-LM's orders: its default, and with --use-tp-pp-dp-mapping. */
static const char *const order_names[2] = { "tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp" };
static const enum phx_dim orders[2][PHX_DIM_COUNT] = {
	{ PHX_DIM_TP, PHX_DIM_CP, PHX_DIM_EP, PHX_DIM_DP, PHX_DIM_PP },
	{ PHX_DIM_TP, PHX_DIM_CP, PHX_DIM_EP, PHX_DIM_PP, PHX_DIM_DP },
};

/* Where a layout and Megatron's grids part. */
struct mismatch {
	enum phx_dim dim;
	unsigned long want; /* Megatron's distance between neighbours */
	bool expert;
};

const char *phx_mg_group_name(enum phx_mg_group group)
{
	return (unsigned)group < PHX_MG_COUNT ? group_names[group] : "?";
}

/*
 * The expert grid has no cp: with experts spread (ep > 1) the cp ranks
 * below them shard the experts' tensors, so that the layout's ep groups
 * are Megatron's; with ep = 1 Megatron's default etp = tp holds and the
 * cp ranks are expert data parallel.
 */
static size_t group_dims(const struct phx_megatron *mg, enum phx_mg_group group,
			 enum phx_dim dims[4])
{
	enum phx_mg_group without_cp = mg->ep > 1 ? PHX_MG_EDP : PHX_MG_ETP;
	size_t n = 0;

	for (const enum phx_dim *d = group_table[group]; *d != NO_DIM; d++) {
		if (*d != PHX_DIM_CP || group != without_cp)
			dims[n++] = *d;
	}
	return n;
}

/*
 * Megatron-Core's rule (RankGenerator): global rank = sum of coordinate x
 * stride, the strides being the running product of the sizes in the order
 * string, first name fastest. Its orders keep tp first and cp (dense grid)
 * or ep (expert grid) next, ep = 1 in the dense grid and cp = 1 in the
 * expert one; only dp and pp trade places.
 */
static void grid_strides(const unsigned long size[4], bool pp_dp, unsigned long stride[4])
{
	stride[0] = 1;
	stride[1] = size[0];
	if (pp_dp) {
		stride[3] = size[0] * size[1];
		stride[2] = stride[3] * size[3];
	} else {
		stride[2] = size[0] * size[1];
		stride[3] = stride[2] * size[2];
	}
}

/* Does each axis of one grid step through the layout's ranks as the layout does? */
static int fit_grid(const struct phx_megatron *mg, const enum phx_mg_group axes[4],
		    const unsigned long size[4], bool pp_dp, struct mismatch *bad)
{
	const struct phx_layout *l = &mg->layout;
	unsigned long stride[4];
	enum phx_dim dims[4];

	grid_strides(size, pp_dp, stride);
	for (int a = 0; a < 4; a++) {
		unsigned long want = stride[a];
		size_t n = group_dims(mg, axes[a], dims);

		for (size_t i = 0; i < n; i++) {
			if (l->size[dims[i]] > 1 && phx_layout_stride(l, dims[i]) != want) {
				bad->dim = dims[i];
				bad->want = want;
				return -1;
			}
			want *= l->size[dims[i]];
		}
	}
	return 0;
}

/*
 * Both grids must fit: Megatron-Core also insists that they share their
 * pipeline groups, and with pp before dp that the two dp sizes agree;
 * fitting the layout's pp and dp in both grids covers both.
 */
static int fit(const struct phx_megatron *mg, bool pp_dp, struct mismatch *bad)
{
	const unsigned long dense[4] = { mg->tp, mg->cp, mg->dp, mg->pp };
	const unsigned long expert[4] = { mg->etp, mg->ep, mg->edp, mg->pp };

	bad->expert = false;
	if (fit_grid(mg, dense_axes, dense, pp_dp, bad) < 0)
		return -1;
	bad->expert = true;
	return fit_grid(mg, expert_axes, expert, pp_dp, bad);
}

static void arguments(const struct phx_layout *l, struct phx_megatron *mg)
{
	const unsigned long *s = l->size;

	mg->layout = *l;
	mg->tp = s[PHX_DIM_TP];
	mg->cp = s[PHX_DIM_CP];
	mg->pp = s[PHX_DIM_PP];
	mg->ep = s[PHX_DIM_EP];
	/* Megatron derives dp as world / (tp * cp * pp): ep x dp here. */
	mg->dp = s[PHX_DIM_EP] * s[PHX_DIM_DP];
	mg->etp = mg->ep > 1 ? mg->tp * mg->cp : mg->tp;
	/* world / (etp * ep * pp) */
	mg->edp = mg->ep > 1 ? s[PHX_DIM_DP] : mg->cp * s[PHX_DIM_DP];
	mg->tp_pp_dp = false;
}

/* The layout in one of Megatron's orders: does it map? 0 or -1. */
static int try_order(const struct phx_layout *l, bool pp_dp, struct phx_layout *out)
{
	struct phx_megatron mg;
	struct mismatch bad;

	*out = *l;
	for (int i = 0; i < PHX_DIM_COUNT; i++)
		out->order[i] = orders[pp_dp][i];
	arguments(out, &mg);
	return fit(&mg, pp_dp, &bad);
}

/*
 * The reason is where the layout parts from Megatron's order with dp and
 * pp as the layout has them; the nearest layout keeps the sizes and takes
 * that order where it maps, else Megatron's default, which always does.
 */
static void refuse(const struct phx_megatron *mg, char *err, size_t errlen)
{
	const struct phx_layout *l = &mg->layout;
	bool pp_dp = phx_layout_stride(l, PHX_DIM_PP) < phx_layout_stride(l, PHX_DIM_DP);
	char have[160], near[160];
	struct phx_layout best;
	struct mismatch bad;

	fit(mg, pp_dp, &bad);
	if (!pp_dp || try_order(l, true, &best) < 0)
		try_order(l, false, &best);
	phx_layout_format(l, have, sizeof(have));
	phx_layout_format(&best, near, sizeof(near));
	snprintf(err, errlen,
		 "%s: in the %sgroups Megatron-Core forms in order %s, %s neighbours differ by "
		 "%lu in rank, here by %lu (Megatron-LM orders ranks %s, or %s with "
		 "--use-tp-pp-dp-mapping); the nearest layout it can express is %s",
		 have, bad.expert ? "expert " : "", order_names[pp_dp], phx_dim_name(bad.dim),
		 bad.want, phx_layout_stride(l, bad.dim), order_names[0], order_names[1], near);
}

int phx_megatron_map(const struct phx_layout *l, struct phx_megatron *mg, char *err, size_t errlen)
{
	struct mismatch bad;

	if (l->star >= 0 || !l->world) {
		snprintf(err, errlen,
			 "the layout has a '*' left; resolve it against the world size first");
		return -1;
	}
	arguments(l, mg);
	if (fit(mg, false, &bad) == 0)
		return 0;
	if (fit(mg, true, &bad) == 0) {
		mg->tp_pp_dp = true;
		return 0;
	}
	refuse(mg, err, errlen);
	return -1;
}

unsigned long phx_megatron_group(const struct phx_megatron *mg, enum phx_mg_group group,
				 unsigned long rank, unsigned long *ranks, size_t n)
{
	const struct phx_layout *l = &mg->layout;
	unsigned long coord[PHX_DIM_COUNT], base = rank, count = 1;
	enum phx_dim dims[4];
	size_t nd;

	if ((unsigned)group >= PHX_MG_COUNT || rank >= l->world)
		return 0;
	nd = group_dims(mg, group, dims);
	phx_layout_coords(l, rank, coord);
	for (size_t i = 0; i < nd; i++) {
		base -= coord[dims[i]] * phx_layout_stride(l, dims[i]);
		count *= l->size[dims[i]];
	}
	/* Member k: k's digits over the group's dimensions, first fastest. */
	for (unsigned long k = 0; k < count && k < n; k++) {
		unsigned long r = base, q = k;

		for (size_t i = 0; i < nd; i++) {
			r += q % l->size[dims[i]] * phx_layout_stride(l, dims[i]);
			q /= l->size[dims[i]];
		}
		ranks[k] = r;
	}
	return count;
}

int phx_megatron_args(const struct phx_megatron *mg, char *buf, size_t len)
{
	char cp[64] = "", ep[64] = "", etp[64] = "";

	if (mg->cp > 1)
		snprintf(cp, sizeof(cp), " --context-parallel-size %lu", mg->cp);
	if (mg->ep > 1)
		snprintf(ep, sizeof(ep), " --expert-model-parallel-size %lu", mg->ep);
	if (mg->etp != mg->tp)
		snprintf(etp, sizeof(etp), " --expert-tensor-parallel-size %lu", mg->etp);
	return snprintf(
		buf, len,
		"--tensor-model-parallel-size %lu%s --pipeline-model-parallel-size %lu%s%s%s",
		mg->tp, cp, mg->pp, ep, etp, mg->tp_pp_dp ? " --use-tp-pp-dp-mapping" : "");
}

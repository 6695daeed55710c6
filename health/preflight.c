/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Preflight decisions: NCCL pairs for each round, the verdict of each node
 * from its measurements, and what the launcher and placement take from the
 * verdicts. Pure functions of the results: every node of a step computes
 * the same pairs without talking, and recorded results replay exactly.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/preflight.h"

static const char *const state_names[] = { "ok", "suspect", "slow", "failed" };
static const char *const link_names[] = { "ok", "timeout", "error" };

const char *phx_check_state_name(enum phx_check_state state)
{
	return state >= PHX_CHECK_OK && state <= PHX_CHECK_FAILED ? state_names[state] : "unknown";
}

const char *phx_link_status_name(enum phx_link_status status)
{
	return status >= PHX_LINK_OK && status <= PHX_LINK_ERROR ? link_names[status] : "unknown";
}

void phx_check_limits_from_conf(const struct phx_conf *conf, struct phx_check_limits *lim)
{
	lim->gemm_tflops_min = conf->check.gemm_tflops_min;
	lim->copy_gbps_min = conf->check.copy_gbps_min;
	lim->busbw_gbps_min = conf->check.busbw_gbps_min;
	lim->slow_fraction = conf->check.slow_percent / 100.0;
	lim->drain_slow = conf->check.drain_slow;
}

bool phx_check_node_usable(const struct phx_check_node *node)
{
	if (node->error[0] || !node->n_gpus)
		return false;
	for (size_t g = 0; g < node->n_gpus; g++) {
		if (node->gpus[g].error[0])
			return false;
	}
	return true;
}

static const struct phx_check_link *link_of(const struct phx_check_node *node, int round)
{
	for (size_t l = 0; l < node->n_links; l++) {
		if (node->links[l].round == round)
			return &node->links[l];
	}
	return NULL;
}

static long node_index(const struct phx_check_results *res, const char *name)
{
	for (size_t i = 0; i < res->n; i++) {
		if (!strcmp(res->nodes[i].name, name))
			return (long)i;
	}
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double phx_check_link_median(const struct phx_check_results *res)
{
	double *v = calloc(res->n + 1, sizeof(*v)), m;
	size_t n = 0;

	if (!v)
		return 0;
	for (size_t i = 0; i < res->n; i++) {
		const struct phx_check_link *l = link_of(&res->nodes[i], 1);

		if (l && l->status == PHX_LINK_OK)
			v[n++] = l->busbw_gbps;
	}
	m = median(v, n);
	free(v);
	return m;
}

/* The relative and absolute floor of a measurement; 0 when none applies. */
static double floor_of(double median_value, double abs_min, const struct phx_check_limits *lim)
{
	double rel = median_value * (1 - lim->slow_fraction);

	return rel > abs_min ? rel : abs_min;
}

bool phx_check_link_bad(const struct phx_check_link *link, const struct phx_check_limits *lim,
			double med)
{
	if (link->status != PHX_LINK_OK)
		return true;
	return link->busbw_gbps < floor_of(med, lim->busbw_gbps_min, lim);
}

/* A link counts as bad when either end saw it bad: both ends agree on pairs. */
static bool pair_bad(const struct phx_check_results *res, size_t i, int round,
		     const struct phx_check_limits *lim, double med)
{
	const struct phx_check_link *l = link_of(&res->nodes[i], round), *o;
	long j;

	if (!l)
		return false;
	if (phx_check_link_bad(l, lim, med))
		return true;
	j = node_index(res, l->peer);
	o = j >= 0 ? link_of(&res->nodes[j], round) : NULL;
	return o && !strcmp(o->peer, res->nodes[i].name) && phx_check_link_bad(o, lim, med);
}

static int pairs_round1(const struct phx_check_results *res, long *partner)
{
	long waiting = -1;
	int pairs = 0;

	for (size_t i = 0; i < res->n; i++) {
		if (!phx_check_node_usable(&res->nodes[i]))
			continue;
		if (waiting < 0) {
			waiting = (long)i;
			continue;
		}
		partner[waiting] = (long)i;
		partner[i] = waiting;
		waiting = -1;
		pairs++;
	}
	return pairs;
}

/* Each node without a fast round-1 pair meets a distinct node of a fast pair. */
static int pairs_round2(const struct phx_check_results *res, const struct phx_check_limits *lim,
			long *partner)
{
	double med = phx_check_link_median(res);
	size_t donor = 0;
	int pairs = 0;

	for (size_t i = 0; i < res->n; i++) {
		bool fast;

		if (!phx_check_node_usable(&res->nodes[i]))
			continue;
		fast = link_of(&res->nodes[i], 1) && !pair_bad(res, i, 1, lim, med);
		if (fast)
			continue;
		for (; donor < res->n; donor++) {
			if (phx_check_node_usable(&res->nodes[donor]) &&
			    link_of(&res->nodes[donor], 1) && !pair_bad(res, donor, 1, lim, med))
				break;
		}
		if (donor == res->n)
			break;
		partner[i] = (long)donor;
		partner[donor] = (long)i;
		donor++;
		pairs++;
	}
	return pairs;
}

int phx_check_pairs(const struct phx_check_results *res, int round,
		    const struct phx_check_limits *lim, long *partner)
{
	for (size_t i = 0; i < res->n; i++)
		partner[i] = -1;
	if (round == 1)
		return pairs_round1(res, partner);
	if (round == 2)
		return pairs_round2(res, lim, partner);
	return -1;
}

/* ------------------------------------------------------------ verdicts */

/* Cuts long text silently: reasons are for people and sinfo shows the start. */
__attribute__((format(printf, 3, 4))) static void text(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* Keeps the reason of the worst finding; the first one among equals. */
__attribute__((format(printf, 3, 4))) static void
find(struct phx_check_verdict *v, enum phx_check_state state, const char *fmt, ...)
{
	va_list ap;

	if (state <= v->state)
		return;
	v->state = state;
	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
}

struct medians {
	double gemm, h2d, d2h, link;
};

static void gpu_medians(const struct phx_check_results *res, struct medians *m)
{
	size_t total = 0, n = 0;
	double *gemm, *h2d, *d2h;

	for (size_t i = 0; i < res->n; i++)
		total += res->nodes[i].n_gpus;
	gemm = calloc(total + 1, sizeof(double));
	h2d = calloc(total + 1, sizeof(double));
	d2h = calloc(total + 1, sizeof(double));
	if (gemm && h2d && d2h) {
		for (size_t i = 0; i < res->n; i++) {
			const struct phx_check_node *node = &res->nodes[i];

			for (size_t g = 0; !node->error[0] && g < node->n_gpus; g++) {
				if (node->gpus[g].error[0] || !node->gpus[g].gemm_ok)
					continue;
				gemm[n] = node->gpus[g].gemm_tflops;
				h2d[n] = node->gpus[g].h2d_gbps;
				d2h[n++] = node->gpus[g].d2h_gbps;
			}
		}
	}
	m->gemm = median(gemm, n);
	m->h2d = median(h2d, n);
	m->d2h = median(d2h, n);
	free(gemm);
	free(h2d);
	free(d2h);
}

/* "below 80% of the median 990.0" or "below check.x_min 800". */
static void why_low(char *buf, size_t len, double med, double abs_min,
		    const struct phx_check_limits *lim, const char *key)
{
	if (med * (1 - lim->slow_fraction) >= abs_min)
		text(buf, len, "below %.0f%% of the median %.1f", (1 - lim->slow_fraction) * 100,
		     med);
	else
		text(buf, len, "below check.%s %.0f", key, abs_min);
}

static void judge_speed(struct phx_check_verdict *v, const struct phx_check_gpu *gpu,
			const char *what, double value, double med, double abs_min,
			const struct phx_check_limits *lim, const char *key, const char *unit)
{
	char why[96];

	if (value >= floor_of(med, abs_min, lim))
		return;
	why_low(why, sizeof(why), med, abs_min, lim, key);
	find(v, PHX_CHECK_SLOW, "GPU %d: %s %.1f %s, %s", gpu->index, what, value, unit, why);
}

static void judge_gpu(struct phx_check_verdict *v, const struct phx_check_gpu *gpu,
		      const struct medians *m, const struct phx_check_limits *lim)
{
	if (gpu->error[0]) {
		find(v, PHX_CHECK_FAILED, "GPU %d: %s", gpu->index, gpu->error);
		return;
	}
	if (!gpu->gemm_ok)
		find(v, PHX_CHECK_FAILED, "GPU %d: the matrix multiply gave a wrong result",
		     gpu->index);
	if (gpu->memtest_errors)
		find(v, PHX_CHECK_FAILED,
		     "GPU %d: %llu words of a %u MiB memory test read back wrong", gpu->index,
		     (unsigned long long)gpu->memtest_errors, gpu->memtest_mib);
	judge_speed(v, gpu, "GEMM", gpu->gemm_tflops, m->gemm, lim->gemm_tflops_min, lim,
		    "gemm_tflops_min", "TFLOP/s");
	judge_speed(v, gpu, "host-to-device copy", gpu->h2d_gbps, m->h2d, lim->copy_gbps_min, lim,
		    "copy_gbps_min", "GB/s");
	judge_speed(v, gpu, "device-to-host copy", gpu->d2h_gbps, m->d2h, lim->copy_gbps_min, lim,
		    "copy_gbps_min", "GB/s");
}

/* The first finding names its GPU; the count says whether it is the only one. */
static void judge_gpus(struct phx_check_verdict *v, const struct phx_check_node *node,
		       const struct medians *m, const struct phx_check_limits *lim)
{
	size_t flagged = 0, len;

	for (size_t g = 0; g < node->n_gpus; g++) {
		struct phx_check_verdict one = { .state = PHX_CHECK_OK };

		judge_gpu(&one, &node->gpus[g], m, lim);
		if (one.state == PHX_CHECK_OK)
			continue;
		flagged++;
		find(v, one.state, "%s", one.reason);
	}
	len = strlen(v->reason);
	if (flagged > 1 && len < sizeof(v->reason))
		text(v->reason + len, sizeof(v->reason) - len, " (%zu of %zu GPUs below)", flagged,
		     node->n_gpus);
}

static void describe_link(char *buf, size_t len, const struct phx_check_link *l)
{
	if (l->status == PHX_LINK_OK)
		text(buf, len, "%s %.1f GB/s", l->peer, l->busbw_gbps);
	else if (l->status == PHX_LINK_TIMEOUT)
		text(buf, len, "%s timeout", l->peer);
	else
		text(buf, len, "%s error%s%s", l->peer, l->error[0] ? ": " : "", l->error);
}

static void judge_links(const struct phx_check_results *res, size_t i, struct phx_check_verdict *v,
			const struct phx_check_limits *lim, double med)
{
	const struct phx_check_link *r1 = link_of(&res->nodes[i], 1);
	const struct phx_check_link *r2 = link_of(&res->nodes[i], 2);
	bool bad1 = r1 && pair_bad(res, i, 1, lim, med);
	char a[PHX_CHECK_TEXT / 2] = "", b[PHX_CHECK_TEXT / 2] = "", why[96];

	if (r1 && !bad1)
		return;
	if (!r1 && !r2) {
		if (phx_check_node_usable(&res->nodes[i]))
			text(v->note, sizeof(v->note), "no NCCL partner: links not measured");
		return;
	}
	if (r1)
		describe_link(a, sizeof(a), r1);
	if (!r2) {
		find(v, PHX_CHECK_SUSPECT,
		     "NCCL all-reduce with %s is bad and no fast node was left to re-pair with", a);
		return;
	}
	describe_link(b, sizeof(b), r2);
	if (!pair_bad(res, i, 2, lim, med)) {
		if (r1)
			text(v->note, sizeof(v->note), "all-reduce with %s was bad, with %s fine",
			     a, b);
		return;
	}
	why_low(why, sizeof(why), med, lim->busbw_gbps_min, lim, "busbw_gbps_min");
	if ((r1 && r1->status != PHX_LINK_OK) || r2->status != PHX_LINK_OK)
		find(v, PHX_CHECK_FAILED, "NCCL all-reduce failed with %s%s%s", r1 ? a : "",
		     r1 ? " and with " : "", b);
	else
		find(v, PHX_CHECK_SLOW, "NCCL all-reduce slow with %s%s%s (%s)", r1 ? a : "",
		     r1 ? " and with " : "", b, why);
}

/* A pair whose ends were both cleared in round 2: the link between them. */
static void note_link(const struct phx_check_results *res, size_t i,
		      struct phx_check_verdict *verdicts)
{
	const struct phx_check_link *r1 = link_of(&res->nodes[i], 1);
	long j = r1 ? node_index(res, r1->peer) : -1;

	if (j < 0 || verdicts[i].state != PHX_CHECK_OK || !verdicts[i].note[0] ||
	    verdicts[j].state != PHX_CHECK_OK || !verdicts[j].note[0])
		return;
	text(verdicts[i].note, sizeof(verdicts[i].note),
	     "the link to %s is bad (both ends are fine with other partners)", r1->peer);
	text(verdicts[i].bad_link, sizeof(verdicts[i].bad_link), "%s", r1->peer);
}

void phx_check_judge(const struct phx_check_results *res, const struct phx_check_limits *lim,
		     struct phx_check_verdict *verdicts)
{
	struct medians m;

	gpu_medians(res, &m);
	m.link = phx_check_link_median(res);
	for (size_t i = 0; i < res->n; i++) {
		const struct phx_check_node *node = &res->nodes[i];
		struct phx_check_verdict *v = &verdicts[i];

		memset(v, 0, sizeof(*v));
		text(v->node, sizeof(v->node), "%s", node->name);
		if (node->error[0]) {
			find(v, PHX_CHECK_FAILED, "%s", node->error);
			continue;
		}
		if (!node->n_gpus)
			find(v, PHX_CHECK_FAILED, "no GPU was tested");
		judge_gpus(v, node, &m, lim);
		judge_links(res, i, v, lim, m.link);
	}
	for (size_t i = 0; i < res->n; i++)
		note_link(res, i, verdicts);
}

enum phx_check_state phx_check_worst(const struct phx_check_verdict *v, size_t n)
{
	enum phx_check_state worst = PHX_CHECK_OK;

	for (size_t i = 0; i < n; i++)
		worst = v[i].state > worst ? v[i].state : worst;
	return worst;
}

int phx_check_decide(const struct phx_check_verdict *v, size_t n, struct phx_check_decision *d)
{
	memset(d, 0, sizeof(*d));
	d->exclude = calloc(n + 1, sizeof(*d->exclude));
	d->slow = calloc(n + 1, sizeof(*d->slow));
	if (!d->exclude || !d->slow) {
		phx_check_decision_free(d);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i].state == PHX_CHECK_FAILED)
			d->exclude[d->n_exclude++] = v[i].node;
		else if (v[i].state != PHX_CHECK_OK)
			d->slow[d->n_slow++] = v[i].node;
	}
	return 0;
}

void phx_check_decision_free(struct phx_check_decision *d)
{
	free(d->exclude);
	free(d->slow);
	memset(d, 0, sizeof(*d));
}

bool phx_check_should_drain(const struct phx_check_verdict *v, const struct phx_check_limits *lim)
{
	return v->state == PHX_CHECK_FAILED || (v->state == PHX_CHECK_SLOW && lim->drain_slow);
}

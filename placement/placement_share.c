/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared-link model: one step's communication time with the link
 * model's flows (placement_links.c) moving at once, every link shared
 * max-min fairly among the flows crossing it, and each flow ending when its
 * bytes are through, which frees its share for the others. This is the
 * fluid model of flow-level network simulators (SimGrid's, without
 * latency). The link model's time is a lower bound on it: a flow held back
 * by a busy link elsewhere leaves part of another link idle, so a map whose
 * flows cross several busy links takes longer than its busiest link's
 * load. Flows with the same route and size move alike and are counted as
 * one class.
 */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement_int.h"

struct share {
	const struct pl_alloc *a;
	size_t gpus;
	/* Where each kind of link starts in the one array of links. */
	size_t nvl_in, nic_out, nic_in, up[2], down[2], n_links;
	double *capacity; /* KiB per ns */
	struct pl_flow_class *cls;
	size_t n_cls;
	size_t *slot; /* open addressing: class index + 1, 0 free */
	size_t n_slots;
	size_t flows; /* counted before the classes are made */
};

static size_t route(const struct share *s, uint32_t src, uint32_t dst, uint32_t *hop)
{
	const struct pl_alloc *a = s->a;
	const uint32_t *u0 = a->unit[src / a->gpn], *u1 = a->unit[dst / a->gpn];
	size_t n = 0;

	if (u0[PHX_LEVEL_NVLINK] == u1[PHX_LEVEL_NVLINK]) {
		hop[0] = src;
		hop[1] = (uint32_t)(s->nvl_in + dst);
		return 2;
	}
	hop[n++] = (uint32_t)(s->nic_out + src / a->gpn);
	for (unsigned v = 0; v < 2; v++) {
		uint32_t from = u0[PHX_LEVEL_LEAF + v], to = u1[PHX_LEVEL_LEAF + v];

		if (from == to)
			break;
		hop[n++] = (uint32_t)(s->up[v] + from);
		hop[n++] = (uint32_t)(s->down[v] + to);
	}
	hop[n++] = (uint32_t)(s->nic_in + dst / a->gpn);
	return n;
}

static uint64_t class_hash(const uint32_t *hop, size_t n, uint64_t kib)
{
	uint64_t h = kib * 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ hop[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static void count_flow(void *ctx, uint32_t src, uint32_t dst, uint64_t kib)
{
	(void)src;
	(void)dst;
	(void)kib;
	((struct share *)ctx)->flows++;
}

static void add_class_flow(void *ctx, uint32_t src, uint32_t dst, uint64_t kib)
{
	struct share *s = ctx;
	uint32_t hop[PL_MAX_HOPS];
	size_t n = route(s, src, dst, hop), i;
	struct pl_flow_class *c;

	if (!kib)
		return;
	for (i = class_hash(hop, n, kib) & (s->n_slots - 1); s->slot[i];
	     i = (i + 1) & (s->n_slots - 1)) {
		c = &s->cls[s->slot[i] - 1];
		if (c->size == (double)kib && c->n_hops == n &&
		    !memcmp(c->hop, hop, n * sizeof(*hop))) {
			c->count++;
			return;
		}
	}
	/* Never full: there are at least twice as many slots as flows. */
	c = &s->cls[s->n_cls++];
	*c = (struct pl_flow_class){ .n_hops = (unsigned)n, .count = 1, .size = (double)kib };
	memcpy(c->hop, hop, n * sizeof(*hop));
	s->slot[i] = s->n_cls;
}

static int init_links(struct share *s)
{
	const struct pl_alloc *a = s->a;
	unsigned long *gpus[2] = { phx_pl_unit_gpus(a, PHX_LEVEL_LEAF),
				   phx_pl_unit_gpus(a, PHX_LEVEL_SPINE) };
	size_t at;

	s->gpus = a->n_nodes * a->gpn;
	s->nvl_in = s->gpus;
	s->nic_out = 2 * s->gpus;
	s->nic_in = s->nic_out + a->n_nodes;
	at = s->nic_in + a->n_nodes;
	for (unsigned v = 0; v < 2; v++) {
		s->up[v] = at;
		s->down[v] = at + a->n_units[PHX_LEVEL_LEAF + v];
		at = s->down[v] + a->n_units[PHX_LEVEL_LEAF + v];
	}
	s->n_links = at;
	s->capacity = calloc(s->n_links, sizeof(*s->capacity));
	if (!s->capacity || !gpus[0] || !gpus[1]) {
		free(gpus[0]);
		free(gpus[1]);
		return -1;
	}
	/* ns per MiB at each level is ns per KiB x 1024: 1024 / weight KiB per ns. */
	for (size_t g = 0; g < s->gpus; g++)
		s->capacity[g] = s->capacity[s->nvl_in + g] = 1024.0 / a->weight[PHX_LEVEL_NODE];
	for (size_t n = 0; n < a->n_nodes; n++)
		s->capacity[s->nic_out + n] = s->capacity[s->nic_in + n] =
			1024.0 * a->gpn / a->weight[PHX_LEVEL_LEAF];
	for (unsigned v = 0; v < 2; v++) {
		for (uint32_t u = 0; u < a->n_units[PHX_LEVEL_LEAF + v]; u++)
			s->capacity[s->up[v] + u] = s->capacity[s->down[v] + u] =
				1024.0 * gpus[v][u] / a->weight[PHX_LEVEL_SPINE + v];
	}
	free(gpus[0]);
	free(gpus[1]);
	return 0;
}

static int make_classes(struct share *s, const uint32_t *rank_node)
{
	const struct pl_alloc *a = s->a;
	uint32_t *gpu = malloc(a->world * sizeof(*gpu)),
		 *taken = calloc(a->n_nodes, sizeof(*taken));
	int rc = -1;

	if (!gpu || !taken)
		goto out;
	phx_pl_gpu_of_ranks(a, rank_node, taken, gpu);
	phx_pl_step_flows(a, gpu, &(struct pl_flow_sink){ .flow = count_flow, .ctx = s });
	for (s->n_slots = 16; s->n_slots < 2 * s->flows;)
		s->n_slots *= 2;
	s->slot = calloc(s->n_slots, sizeof(*s->slot));
	s->cls = malloc((s->flows + 1) * sizeof(*s->cls));
	if (!s->slot || !s->cls)
		goto out;
	phx_pl_step_flows(a, gpu, &(struct pl_flow_sink){ .flow = add_class_flow, .ctx = s });
	rc = 0;
out:
	free(gpu);
	free(taken);
	return rc;
}

/* ---------------------------------------------------------------- fair shares */

struct heap_item {
	double share;
	uint32_t link;
};

struct fluid {
	const double *capacity;
	size_t n_links;
	struct pl_flow_class *cls;
	size_t n_cls;
	size_t *moving, n_moving; /* the classes not yet through */
	double *left_cap; /* per link: capacity not yet given out */
	double *users; /* per link: flows crossing it not yet given a rate */
	/* The moving classes of link l: by_link[first[l] .. first[l + 1]], made again as they end.
	 */
	size_t *first, *by_link, listed;
	uint32_t *touched; /* links whose share changed while a link's flows got theirs */
	bool *is_touched;
	size_t n_touched;
	struct heap_item *heap;
	size_t n_heap;
};

static void heap_push(struct fluid *f, double share, uint32_t link)
{
	size_t i = f->n_heap++;

	while (i) {
		size_t up = (i - 1) / 2;

		if (f->heap[up].share <= share)
			break;
		f->heap[i] = f->heap[up];
		i = up;
	}
	f->heap[i] = (struct heap_item){ share, link };
}

static struct heap_item heap_pop(struct fluid *f)
{
	struct heap_item top = f->heap[0], last = f->heap[--f->n_heap];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= f->n_heap)
			break;
		if (c + 1 < f->n_heap && f->heap[c + 1].share < f->heap[c].share)
			c++;
		if (last.share <= f->heap[c].share)
			break;
		f->heap[i] = f->heap[c];
		i = c;
	}
	if (f->n_heap)
		f->heap[i] = last;
	return top;
}

static double fair_share(const struct fluid *f, uint32_t l)
{
	return f->left_cap[l] > 0 ? f->left_cap[l] / f->users[l] : 0;
}

/* The class's flows move at share each: their links have that much less to give. */
static void set_rate(struct fluid *f, struct pl_flow_class *c, double share)
{
	c->rate = share;
	for (unsigned h = 0; h < c->n_hops; h++) {
		uint32_t l = c->hop[h];

		f->left_cap[l] -= share * c->count;
		f->users[l] -= c->count;
		if (!f->is_touched[l]) {
			f->is_touched[l] = true;
			f->touched[f->n_touched++] = l;
		}
	}
}

/* Each link's moving classes, listed again; users[] is the count while filling. */
static void list_by_link(struct fluid *f)
{
	memset(f->first, 0, (f->n_links + 2) * sizeof(*f->first));
	memset(f->users, 0, f->n_links * sizeof(*f->users));
	for (size_t k = 0; k < f->n_moving; k++) {
		const struct pl_flow_class *c = &f->cls[f->moving[k]];

		for (unsigned h = 0; h < c->n_hops; h++)
			f->first[c->hop[h] + 1]++;
	}
	for (size_t l = 0; l < f->n_links; l++)
		f->first[l + 1] += f->first[l];
	for (size_t k = 0; k < f->n_moving; k++) {
		const struct pl_flow_class *c = &f->cls[f->moving[k]];

		for (unsigned h = 0; h < c->n_hops; h++)
			f->by_link[f->first[c->hop[h]] + (size_t)f->users[c->hop[h]]++] =
				f->moving[k];
	}
	f->listed = f->n_moving;
}

/*
 * Progressive filling: the link whose flows get the least if it is split
 * evenly gives them that; the others' capacities shrink by it, and so on.
 * Every class still moving gets its rate.
 */
static void fill(struct fluid *f)
{
	if (2 * f->n_moving < f->listed)
		list_by_link(f);
	for (size_t l = 0; l < f->n_links; l++) {
		f->left_cap[l] = f->capacity[l];
		f->users[l] = 0;
	}
	f->n_heap = 0;
	for (size_t k = 0; k < f->n_moving; k++) {
		struct pl_flow_class *c = &f->cls[f->moving[k]];

		c->rate = -1;
		for (unsigned h = 0; h < c->n_hops; h++)
			f->users[c->hop[h]] += c->count;
	}
	for (uint32_t l = 0; l < f->n_links; l++) {
		if (f->users[l] > 0.5)
			heap_push(f, fair_share(f, l), l);
	}
	while (f->n_heap) {
		struct heap_item top = heap_pop(f);

		/* Stale: the link's share has changed since, or all its flows have rates. */
		if (f->users[top.link] < 0.5 || top.share != fair_share(f, top.link))
			continue;
		for (size_t k = f->first[top.link]; k < f->first[top.link + 1]; k++) {
			struct pl_flow_class *c = &f->cls[f->by_link[k]];

			if (c->rate < 0 && c->left > 0)
				set_rate(f, c, top.share);
		}
		/* Each link touched once: its new share, if flows on it still wait for one. */
		for (size_t k = 0; k < f->n_touched; k++) {
			uint32_t l = f->touched[k];

			f->is_touched[l] = false;
			if (f->users[l] > 0.5)
				heap_push(f, fair_share(f, l), l);
		}
		f->n_touched = 0;
	}
}

static int fluid_open(struct fluid *f)
{
	size_t hops = 0;

	for (size_t i = 0; i < f->n_cls; i++)
		hops += f->cls[i].n_hops;
	f->moving = malloc((f->n_cls + 1) * sizeof(*f->moving));
	f->left_cap = malloc((f->n_links + 1) * sizeof(*f->left_cap));
	f->users = calloc(f->n_links + 1, sizeof(*f->users));
	f->first = calloc(f->n_links + 2, sizeof(*f->first));
	f->by_link = malloc((hops + 1) * sizeof(*f->by_link));
	f->touched = malloc((f->n_links + 1) * sizeof(*f->touched));
	f->is_touched = calloc(f->n_links + 1, sizeof(*f->is_touched));
	/* One entry per link at first, then at most one per hop of each class given a rate. */
	f->heap = malloc((f->n_links + hops + 1) * sizeof(*f->heap));
	if (!f->moving || !f->left_cap || !f->users || !f->first || !f->by_link || !f->touched ||
	    !f->is_touched || !f->heap)
		return -1;
	for (size_t i = 0; i < f->n_cls; i++) {
		f->cls[i].left = f->cls[i].size;
		if (f->cls[i].size > 0)
			f->moving[f->n_moving++] = i;
	}
	list_by_link(f);
	return 0;
}

static void fluid_close(struct fluid *f)
{
	free(f->moving);
	free(f->left_cap);
	free(f->users);
	free(f->first);
	free(f->by_link);
	free(f->touched);
	free(f->is_touched);
	free(f->heap);
}

/* Rates until the next flow ends, that long, again: the time the last one ends. */
static double run_flows(struct fluid *f)
{
	double t = 0;

	while (f->n_moving) {
		double dt = INFINITY;
		size_t kept = 0;

		fill(f);
		for (size_t k = 0; k < f->n_moving; k++) {
			const struct pl_flow_class *c = &f->cls[f->moving[k]];

			if (c->rate > 0 && c->left / c->rate < dt)
				dt = c->left / c->rate;
		}
		if (!isfinite(dt))
			return INFINITY; /* flows with no share: a link of no capacity */
		t += dt;
		for (size_t k = 0; k < f->n_moving; k++) {
			struct pl_flow_class *c = &f->cls[f->moving[k]];

			c->left -= c->rate * dt;
			/* Ends now, up to rounding. */
			if (c->left <= 1e-9 * c->size)
				c->left = 0;
			else
				f->moving[kept++] = f->moving[k];
		}
		f->n_moving = kept;
	}
	return t;
}

static double fluid_time(const double *capacity, size_t n_links, struct pl_flow_class *cls,
			 size_t n_cls)
{
	struct fluid f = { .capacity = capacity, .n_links = n_links, .cls = cls, .n_cls = n_cls };
	double t = -1;

	if (fluid_open(&f) == 0)
		t = run_flows(&f);
	fluid_close(&f);
	return t;
}

/* ---------------------------------------------------------------- apart */

static uint32_t find(uint32_t *parent, uint32_t l)
{
	while (parent[l] != l) {
		parent[l] = parent[parent[l]];
		l = parent[l];
	}
	return l;
}

/*
 * Flows that share no link, directly or through others, do not slow each
 * other: each such part (an NVLink domain's flows, the network's) runs on
 * its own, with as many rounds as its own flows end at different times.
 */
struct parts {
	uint32_t *parent; /* per link: union-find */
	uint32_t *local; /* per link: its index in the part being run, UINT32_MAX none */
	size_t *first; /* classes of part p: sorted[first[p] .. first[p + 1]] */
	struct pl_flow_class *sorted;
	double *capacity; /* the part's links' */
	uint32_t *links; /* the part's links, to clear local[] after */
};

static int parts_open(struct parts *p, size_t n_links, const struct pl_flow_class *cls,
		      size_t n_cls)
{
	size_t *placed;

	p->parent = malloc((n_links + 1) * sizeof(*p->parent));
	p->local = malloc((n_links + 1) * sizeof(*p->local));
	p->first = calloc(n_links + 2, sizeof(*p->first));
	p->sorted = malloc((n_cls + 1) * sizeof(*p->sorted));
	p->capacity = malloc((n_links + 1) * sizeof(*p->capacity));
	p->links = malloc((n_links + 1) * sizeof(*p->links));
	placed = calloc(n_links + 1, sizeof(*placed));
	if (!p->parent || !p->local || !p->first || !p->sorted || !p->capacity || !p->links ||
	    !placed) {
		free(placed);
		return -1;
	}
	for (uint32_t l = 0; l < n_links; l++) {
		p->parent[l] = l;
		p->local[l] = UINT32_MAX;
	}
	for (size_t i = 0; i < n_cls; i++) {
		for (unsigned h = 1; h < cls[i].n_hops; h++)
			p->parent[find(p->parent, cls[i].hop[h])] = find(p->parent, cls[i].hop[0]);
	}
	/* Classes by their part (the root link), in order. */
	for (size_t i = 0; i < n_cls; i++)
		p->first[find(p->parent, cls[i].hop[0]) + 1]++;
	for (size_t l = 0; l < n_links; l++)
		p->first[l + 1] += p->first[l];
	for (size_t i = 0; i < n_cls; i++) {
		uint32_t root = find(p->parent, cls[i].hop[0]);

		p->sorted[p->first[root] + placed[root]++] = cls[i];
	}
	free(placed);
	return 0;
}

static void parts_close(struct parts *p)
{
	free(p->parent);
	free(p->local);
	free(p->first);
	free(p->sorted);
	free(p->capacity);
	free(p->links);
}

/* One part's classes onto its own links, numbered from 0; its time. */
static double part_time(struct parts *p, const double *capacity, size_t from, size_t to)
{
	size_t n = 0;
	double t;

	for (size_t i = from; i < to; i++) {
		struct pl_flow_class *c = &p->sorted[i];

		for (unsigned h = 0; h < c->n_hops; h++) {
			uint32_t l = c->hop[h];

			if (p->local[l] == UINT32_MAX) {
				p->local[l] = (uint32_t)n;
				p->capacity[n] = capacity[l];
				p->links[n++] = l;
			}
			c->hop[h] = p->local[l];
		}
	}
	t = fluid_time(p->capacity, n, p->sorted + from, to - from);
	for (size_t k = 0; k < n; k++)
		p->local[p->links[k]] = UINT32_MAX;
	return t;
}

double phx_pl_fluid_time(const double *capacity, size_t n_links, struct pl_flow_class *cls,
			 size_t n_cls)
{
	struct parts p = { 0 };
	double t = 0;

	if (parts_open(&p, n_links, cls, n_cls) < 0)
		t = -1;
	for (size_t l = 0; t >= 0 && l < n_links; l++) {
		double part;

		if (p.first[l] == p.first[l + 1])
			continue;
		part = part_time(&p, capacity, p.first[l], p.first[l + 1]);
		t = part < 0 ? part : part > t ? part : t;
	}
	parts_close(&p);
	return t;
}

/* ---------------------------------------------------------------- the step */

int phx_pl_shared_time(const struct pl_alloc *a, const uint32_t *rank_node, uint64_t *ns)
{
	struct share s = { .a = a };
	double t = -1;

	if (init_links(&s) == 0 && make_classes(&s, rank_node) == 0)
		t = phx_pl_fluid_time(s.capacity, s.n_links, s.cls, s.n_cls);
	free(s.capacity);
	free(s.cls);
	free(s.slot);
	if (t < 0)
		return -1;
	*ns = isfinite(t) ? (uint64_t)llround(t) : UINT64_MAX;
	return 0;
}

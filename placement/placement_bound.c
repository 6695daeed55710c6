/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lower bound. The cost of a group is its cost at the core level minus
 * a saving (weight[l+1] - weight[l]) for each level l whose units hold the
 * group whole, so
 *   bound = core cost - sum over levels l of delta_l * S_l
 * where S_l is an upper bound on what the l-units can hold whole: per
 * member of each whole collective group (tp, cp, ep, dp) its traffic, and
 * per pipeline pair (a rank and its next stage) whole in a unit, pp's.
 * Every bound below holds for any set of ranks, so the bound holds for every
 * placement on any part of the allocation.
 *
 * Each collective is an item "lines of size s", pp is an item "hops along
 * lines of size P". For a unit of n ranks, Y_t counts its ranks credited
 * for item t (in a whole group, or with their next stage in the unit).
 *
 * Pairs. In a plane of two collectives (other coordinates fixed) x whole
 * lines one way and y the other need x*a + y*b - x*y ranks (their union)
 * and leave x*y ranks credited for both; in a plane of a collective and
 * pp, a whole group starts every pipeline row, so it holds at most m - s
 * hops. The best a unit can do for a pair is a knapsack over planes,
 * solved exactly up to a size and bounded by the best value per rank above.
 * For two collectives a plane with whole lines of both kinds is held by one
 * unit (such lines cross), so over a whole level only nearly whole planes
 * earn more than the larger traffic per rank.
 *
 * Bound A pairs the items every way, a pair bounded by its knapsack and a
 * single item by its whole groups, and keeps the smallest total.
 *
 * Bound B: each rank is credited for at most |T| - 1 items of a set T
 * unless it is credited for all of them, so Y(T) <= (|T|-1) n + E_T(n),
 * E_T(n) bounding the ranks credited for all of T. E for pairs comes from
 * the plane knapsacks; for more items a slab argument: the ranks credited
 * for all of T project on q positions outside one collective v; each of
 * v's s_v slices holds those q positions and at most E_{T-v} credited
 * ranks. The largest sum b_t Y_t under all these limits is a small linear
 * programme, solved exactly.
 *
 * Bound C, for units of up to LAYER_LIMIT ranks: cut the ranks along a
 * collective v into its s layers. Every other item lies inside one layer,
 * and a whole v-group has a rank in each, so a unit with n_t ranks in layer
 * t holds at most min n_t whole v-groups:
 *   F_T(n) <= max over n_1 + ... + n_s = n of
 *             b_v s min_t n_t + sum_t F_{T-v}(n_t),
 * with F of pp alone its hops and F of nothing 0. Each v is tried and the
 * smallest kept; the maximum is a max-plus convolution, computed exactly.
 *
 * The smallest of A, B and C is each unit's bound.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "placement/placement_int.h"

#define MAX_ITEMS PHX_DIM_COUNT
/* Knapsack work per table; beyond it the per-rank bound takes over. */
#define DP_BUDGET (1ul << 19)
/* Units up to this size get the slab bound for three items or more. */
#define SLAB_LIMIT 1024ul
#define MEMO_SIZE 1024
/* Units up to this size get the layer bound. */
#define LAYER_LIMIT 256ul

struct item {
	bool hop; /* pipeline neighbour pairs, else whole groups */
	uint64_t mib; /* per member, or per pair */
	unsigned long s; /* group size, or pipeline length */
};

/* Best total of n ranks: exact up to lim, per-rank density above. */
struct knap {
	uint64_t *v;
	unsigned long lim;
	uint64_t num, den;
};

struct pair_table {
	struct knap value; /* traffic held whole by both items */
	struct knap both; /* ranks credited for both */
	bool lines; /* two collectives: the level-wide plane bound applies */
	uint64_t b_max;
	struct knap gain; /* per unit: planes worth more than b_max per rank */
};

struct bounder {
	const struct pl_alloc *a;
	struct item it[MAX_ITEMS];
	unsigned n_items;
	struct pair_table pair[MAX_ITEMS][MAX_ITEMS];
	unsigned long n_max; /* largest unit that matters */
	uint32_t *all[1u << MAX_ITEMS]; /* E_T(m) for |T| >= 3, m <= slab_lim */
	unsigned long slab_lim;
	uint64_t *layer[1u << MAX_ITEMS]; /* F_T(m) for m <= layer_lim */
	unsigned long layer_lim;
	uint64_t *wide[MAX_ITEMS]; /* bound D: the bound without item v, m <= n_max */
	/* Units of every level share sizes: each size's bound is kept. */
	unsigned long memo_n[MEMO_SIZE];
	uint64_t memo_v[MEMO_SIZE];
};

static uint64_t umax(uint64_t x, uint64_t y)
{
	return x > y ? x : y;
}

static uint64_t umin(uint64_t x, uint64_t y)
{
	return x < y ? x : y;
}

/* ---------------------------------------------------------------- knapsacks */

/* g[1..m_max]: best value of one plane with that many ranks (made monotone). */
static int knap_build(struct knap *k, uint64_t *g, unsigned long m_max, unsigned long n_max)
{
	k->num = 0;
	k->den = 1;
	for (unsigned long m = 1; m <= m_max; m++) {
		g[m] = umax(g[m], g[m - 1]);
		if ((unsigned __int128)g[m] * k->den > (unsigned __int128)k->num * m) {
			k->num = g[m];
			k->den = m;
		}
	}
	k->lim = umin(DP_BUDGET / (m_max + 1), n_max);
	k->v = calloc(k->lim + 1, sizeof(*k->v));
	if (!k->v)
		return -1;
	for (unsigned long n = 1; n <= k->lim; n++) {
		uint64_t best = k->v[n - 1];

		for (unsigned long m = 1; m <= m_max && m <= n; m++)
			best = umax(best, g[m] + k->v[n - m]);
		k->v[n] = best;
	}
	return 0;
}

static uint64_t knap_get(const struct knap *k, unsigned long n)
{
	if (n <= k->lim)
		return k->v[n];
	return (uint64_t)((unsigned __int128)k->num * n / k->den);
}

/* ---------------------------------------------------------------- planes */

/* Two collectives, a <= b: y whole b-lines and x whole a-lines. */
static void plane_lines(const struct item *p, const struct item *q, uint64_t *value, uint64_t *both,
			unsigned long m_max)
{
	const struct item *ia = p->s <= q->s ? p : q, *ib = p->s <= q->s ? q : p;
	unsigned long a = ia->s, b = ib->s;

	for (unsigned long y = 0; y <= a && y * b <= m_max; y++) {
		if (y == a) {
			value[a * b] = umax(value[a * b], (ia->mib + ib->mib) * a * b);
			both[a * b] = a * b;
			break;
		}
		for (unsigned long x = 0; x <= b; x++) {
			unsigned long m = y * b + x * (a - y);

			if (m > m_max)
				break;
			value[m] = umax(value[m], ib->mib * b * y + ia->mib * a * x);
			both[m] = umax(both[m], x * y);
		}
	}
}

/* A collective of size s and a pipeline of length P, in an s x P plane. */
static void plane_hops(const struct item *line, const struct item *hop, uint64_t *value,
		       uint64_t *both, unsigned long m_max)
{
	unsigned long s = line->s, P = hop->s;

	for (unsigned long m = 1; m <= m_max; m++) {
		/* No whole group: at least ceil(m / P) rows are started. */
		uint64_t v = hop->mib * (m - (m + P - 1) / P);

		/* Whole groups start every one of the s rows. */
		if (m >= s) {
			unsigned long x = m / s < P ? m / s : P;

			v = umax(v, line->mib * s * x + hop->mib * (m - s));
			both[m] = umin(s * x, m - s);
		}
		value[m] = umax(value[m], v);
	}
}

/*
 * A plane with whole lines of both kinds sits in one unit, and its other
 * ranks earn nothing from the pair; with whole lines of one kind only it
 * earns at most b_max per rank. gain(m) is what one unit earns above that.
 */
static int build_gain(struct bounder *bd, struct pair_table *t, const struct item *p,
		      const struct item *q, const uint64_t *value, unsigned long m_max)
{
	uint64_t *g = calloc(m_max + 1, sizeof(*g)), plane_full;
	int rc;

	if (!g)
		return -1;
	t->lines = true;
	t->b_max = umax(p->mib, q->mib);
	plane_full = t->b_max * p->s * q->s;
	for (unsigned long m = 1; m <= m_max; m++)
		g[m] = value[m] > plane_full ? value[m] - plane_full : 0;
	rc = knap_build(&t->gain, g, m_max, bd->n_max);
	free(g);
	return rc;
}

static int fill_pair(struct bounder *bd, unsigned i, unsigned j)
{
	const struct item *p = &bd->it[i], *q = &bd->it[j];
	struct pair_table *t = &bd->pair[i][j];
	unsigned long m_max = umin(p->s * q->s, bd->n_max);
	uint64_t *value = calloc(m_max + 1, sizeof(*value));
	uint64_t *both = calloc(m_max + 1, sizeof(*both));
	int rc = -1;

	if (!value || !both)
		goto out;
	if (p->hop || q->hop)
		plane_hops(p->hop ? q : p, p->hop ? p : q, value, both, m_max);
	else
		plane_lines(p, q, value, both, m_max);
	if (knap_build(&t->value, value, m_max, bd->n_max) < 0 ||
	    knap_build(&t->both, both, m_max, bd->n_max) < 0)
		goto out;
	rc = p->hop || q->hop ? 0 : build_gain(bd, t, p, q, value, m_max);
out:
	free(value);
	free(both);
	return rc;
}

/* ---------------------------------------------------------------- bound A */

static uint64_t single_count(const struct item *it, unsigned long n)
{
	if (it->hop)
		return n ? n - (n + it->s - 1) / it->s : 0;
	return it->s * (n / it->s);
}

/*
 * Cheapest cover of the items not in used, each item alone (single[i]) or
 * with one partner (pair[i][j], j > i). At most MAX_ITEMS items: plain
 * recursion is fast enough.
 */
static uint64_t min_pairing(unsigned n_items, const uint64_t *single,
			    const uint64_t (*pair)[MAX_ITEMS], unsigned used)
{
	uint64_t best;
	unsigned i = 0;

	while (i < n_items && (used & (1u << i)))
		i++;
	if (i == n_items)
		return 0;
	used |= 1u << i;
	best = single[i] + min_pairing(n_items, single, pair, used);
	for (unsigned j = i + 1; j < n_items; j++) {
		if (!(used & (1u << j)))
			best = umin(best, pair[i][j] + min_pairing(n_items, single, pair,
								   used | (1u << j)));
	}
	return best;
}

/* Smallest total over the ways to pair up the items of set, for a unit of n ranks. */
static uint64_t pairings(const struct bounder *bd, unsigned set, unsigned long n)
{
	uint64_t single[MAX_ITEMS], pair[MAX_ITEMS][MAX_ITEMS];

	for (unsigned i = 0; i < bd->n_items; i++) {
		single[i] = bd->it[i].mib * single_count(&bd->it[i], n);
		for (unsigned j = i + 1; j < bd->n_items; j++)
			pair[i][j] = knap_get(&bd->pair[i][j].value, n);
	}
	return min_pairing(bd->n_items, single, (const uint64_t(*)[MAX_ITEMS])pair,
			   ~set & ((1u << bd->n_items) - 1));
}

/* ---------------------------------------------------------------- layers */

/* out[n] = max over i + j = n of x[i] + y[j], n <= len; out is apart from x and y. */
static void maxplus(uint64_t *out, const uint64_t *x, const uint64_t *y, unsigned long len)
{
	for (unsigned long n = 0; n <= len; n++) {
		/* A square is symmetric: half the pairs do. */
		unsigned long last = x == y ? n / 2 : n;
		uint64_t best = 0;

		for (unsigned long i = 0; i <= last; i++)
			best = umax(best, x[i] + y[n - i]);
		out[n] = best;
	}
}

/*
 * Bound C, cut along collective v: out[n] bounds what n ranks hold for the
 * items of set, from F of set without v in each of the s layers.
 */
static int layer_split(const struct bounder *bd, unsigned set, unsigned v, uint64_t *out)
{
	const uint64_t *f = bd->layer[set & ~(1u << v)];
	unsigned long s = bd->it[v].s, lim = bd->layer_lim;
	uint64_t *acc = calloc(3 * (lim + 1), sizeof(*acc)), *pw = acc + lim + 1,
		 *tmp = pw + lim + 1;

	if (!acc)
		return -1;
	memset(out, 0, (lim + 1) * sizeof(*out));
	for (unsigned long m = 0; m * s <= lim; m++) {
		unsigned long len = lim - m * s, e = s;
		bool have = false;

		/* s layers of m ranks or more: the s-fold max-plus power, by squaring. */
		memcpy(pw, f + m, (len + 1) * sizeof(*pw));
		for (;;) {
			if (e & 1) {
				if (have) {
					maxplus(tmp, acc, pw, len);
					memcpy(acc, tmp, (len + 1) * sizeof(*acc));
				} else {
					memcpy(acc, pw, (len + 1) * sizeof(*acc));
					have = true;
				}
			}
			if (!(e >>= 1))
				break;
			maxplus(tmp, pw, pw, len);
			memcpy(pw, tmp, (len + 1) * sizeof(*pw));
		}
		for (unsigned long r = 0; r <= len; r++)
			out[m * s + r] = umax(out[m * s + r], acc[r] + bd->it[v].mib * s * m);
	}
	free(acc);
	return 0;
}

static int build_layers(struct bounder *bd)
{
	unsigned long lim = bd->layer_lim;
	uint64_t *cut;

	if (!lim)
		return 0;
	cut = calloc(lim + 1, sizeof(*cut));
	if (!cut)
		return -1;
	/* Numeric order: a set's subsets come first. */
	for (unsigned set = 0; set < (1u << bd->n_items); set++) {
		uint64_t *f = calloc(lim + 1, sizeof(*f));
		bool cuts = false;

		if (!(bd->layer[set] = f)) {
			free(cut);
			return -1;
		}
		for (unsigned v = 0; v < bd->n_items; v++) {
			if (!(set >> v & 1) || bd->it[v].hop)
				continue;
			if (layer_split(bd, set, v, cut) < 0) {
				free(cut);
				return -1;
			}
			for (unsigned long n = 0; n <= lim; n++)
				f[n] = cuts ? umin(f[n], cut[n]) : cut[n];
			cuts = true;
		}
		/* No collective: nothing, or pp alone. */
		for (unsigned long n = 0; !cuts && set && n <= lim; n++)
			f[n] = bd->it[__builtin_ctz(set)].mib *
			       single_count(&bd->it[__builtin_ctz(set)], n);
	}
	free(cut);
	return 0;
}

/* ---------------------------------------------------------------- bound B */

static unsigned popcount(unsigned x)
{
	return (unsigned)__builtin_popcount(x);
}

/* Ranks of n credited for every item of set (a bit mask). */
static uint64_t all_of(const struct bounder *bd, unsigned set, unsigned long n)
{
	uint64_t best = n;
	unsigned i, j;

	if (popcount(set) == 1)
		return single_count(&bd->it[__builtin_ctz(set)], n);
	if (popcount(set) >= 3 && n <= bd->slab_lim && bd->all[set])
		return bd->all[set][n];
	for (i = 0; i < bd->n_items; i++) {
		for (j = i + 1; j < bd->n_items; j++) {
			if ((set >> i & 1) && (set >> j & 1))
				best = umin(best, knap_get(&bd->pair[i][j].both, n));
		}
	}
	return best;
}

/*
 * Slab bound for E_set with collective v: the ranks credited for all of set
 * project on q positions outside v; each of v's s slices holds those q
 * positions and at most min(q, E_rest(x)) credited ranks with x ranks.
 * Over s slices sharing m ranks that is at most s * h(m / s), h the
 * concave envelope of min(q, E_rest(x)) for x >= q.
 */
struct hull_pt {
	uint64_t x, y;
};

static size_t upper_hull(const uint64_t *e, unsigned long q, unsigned long end, struct hull_pt *h)
{
	size_t n = 0;

	for (unsigned long x = q; x <= end; x++) {
		struct hull_pt p = { x, umin(q, e[x]) };

		/* Drop the last point while it lies on or below the new chord. */
		while (n >= 2 && (h[n - 1].y - h[n - 2].y) * (p.x - h[n - 2].x) <=
					 (p.y - h[n - 2].y) * (h[n - 1].x - h[n - 2].x))
			n--;
		h[n++] = p;
	}
	return n;
}

static void slab(const struct bounder *bd, unsigned set, unsigned v, uint32_t *out)
{
	unsigned rest = set & ~(1u << v);
	unsigned long s = bd->it[v].s, lim = bd->slab_lim, end = 0;
	struct hull_pt *h = calloc(lim + 2, sizeof(*h));
	uint64_t *best = calloc(lim + 1, sizeof(*best));
	uint64_t *e = calloc(lim + 1, sizeof(*e));

	if (!h || !best || !e)
		goto out; /* out[] keeps the pair bounds */
	for (unsigned long x = 0; x <= lim; x++)
		e[x] = all_of(bd, rest, x);
	for (unsigned long q = 1; q <= lim / s; q++) {
		size_t n, i = 0;

		/* Past the first x holding q credited ranks, min(q, E) is flat. */
		while (end < q || (end < lim && e[end] < q))
			end++;
		n = upper_hull(e, q, end, h);
		for (unsigned long m = s * q; m <= lim; m++) {
			uint64_t val;

			while (i + 1 < n && s * h[i + 1].x <= m)
				i++;
			if (i + 1 == n)
				val = s * h[i].y;
			else
				val = s * h[i].y + (h[i + 1].y - h[i].y) * (m - s * h[i].x) /
							   (h[i + 1].x - h[i].x);
			best[m] = umax(best[m], val);
		}
	}
	for (unsigned long m = 1; m <= lim; m++) {
		if (best[m] < out[m])
			out[m] = (uint32_t)best[m];
	}
out:
	free(h);
	free(best);
	free(e);
}

/* E_set(m) for every m: no more than any subset's, then each slab's. */
static uint32_t *build_set(const struct bounder *bd, unsigned set)
{
	uint32_t *e = calloc(bd->slab_lim + 1, sizeof(*e));

	if (!e)
		return NULL;
	for (unsigned long m = 0; m <= bd->slab_lim; m++) {
		uint64_t best = m;

		for (unsigned i = 0; i < bd->n_items; i++) {
			if (set >> i & 1)
				best = umin(best, all_of(bd, set & ~(1u << i), m));
		}
		e[m] = (uint32_t)best;
	}
	for (unsigned v = 0; v < bd->n_items; v++) {
		if ((set >> v & 1) && !bd->it[v].hop)
			slab(bd, set, v, e);
	}
	return e;
}

static int build_slabs(struct bounder *bd)
{
	bd->slab_lim = umin(bd->n_max, SLAB_LIMIT);
	/* Smaller sets first: a set's slab uses its subsets. */
	for (unsigned size = 3; size <= bd->n_items; size++) {
		for (unsigned set = 1; set < (1u << bd->n_items); set++) {
			if (popcount(set) == size && !(bd->all[set] = build_set(bd, set)))
				return -1;
		}
	}
	return 0;
}

/* Y(set) <= (|set| - 1) n + E_set(n); a single item by its whole groups. */
static uint64_t set_cap(const struct bounder *bd, unsigned set, unsigned long n)
{
	if (popcount(set) == 1)
		return single_count(&bd->it[__builtin_ctz(set)], n);
	return (uint64_t)(popcount(set) - 1) * n + all_of(bd, set, n);
}

/*
 * max sum b_t Y_t subject to Y(T) <= set_cap(T) for every set T, Y >= 0,
 * by the simplex method on integers (each pivot divides exactly by the
 * previous one, Bland's rule against cycling). The matrix is 0/1 with at
 * most 5 columns, so every entry is a small minor: 128-bit products do.
 * Returns the floor of the optimum, a bound on any whole-rank solution.
 */
#define LP_ROWS ((1u << MAX_ITEMS) - 1)
#define LP_COLS (MAX_ITEMS + LP_ROWS + 1)

static uint64_t lp_bound(const struct bounder *bd, unsigned set, unsigned long n)
{
	__int128 t[LP_ROWS + 1][LP_COLS], d = 1;
	unsigned k = 0, idx[MAX_ITEMS], m, rhs, basis[LP_ROWS];

	for (unsigned i = 0; i < bd->n_items; i++) {
		if (set >> i & 1)
			idx[k++] = i;
	}
	m = (1u << k) - 1;
	rhs = k + m;
	/* Only the part in use: this runs for every unit size. */
	for (unsigned r = 0; r <= m; r++)
		memset(t[r], 0, (rhs + 1) * sizeof(t[r][0]));
	for (unsigned r = 0; r < m; r++) {
		unsigned orig = 0;

		for (unsigned c = 0; c < k; c++) {
			t[r][c] = ((r + 1) >> c) & 1;
			orig |= (((r + 1) >> c) & 1u) << idx[c];
		}
		t[r][k + r] = 1;
		t[r][rhs] = (__int128)set_cap(bd, orig, n);
		basis[r] = k + r;
	}
	for (unsigned c = 0; c < k; c++)
		t[m][c] = -(__int128)bd->it[idx[c]].mib;
	for (;;) {
		unsigned q = 0, p = m;

		while (q < rhs && t[m][q] >= 0)
			q++;
		if (q == rhs)
			break;
		for (unsigned r = 0; r < m; r++) {
			if (t[r][q] <= 0)
				continue;
			if (p == m || t[r][rhs] * t[p][q] < t[p][rhs] * t[r][q] ||
			    (t[r][rhs] * t[p][q] == t[p][rhs] * t[r][q] && basis[r] < basis[p]))
				p = r;
		}
		if (p == m)
			return UINT64_MAX; /* unbounded: cannot happen with caps */
		for (unsigned r = 0; r <= m; r++) {
			if (r == p)
				continue;
			for (unsigned c = 0; c <= rhs; c++) {
				if (c != q)
					t[r][c] = (t[r][c] * t[p][q] - t[r][q] * t[p][c]) / d;
			}
			t[r][q] = 0;
		}
		d = t[p][q];
		basis[p] = q;
	}
	return (uint64_t)(t[m][rhs] / d);
}

/* ---------------------------------------------------------------- levels */

/* The best bound on what n ranks hold for the items of set: A, then C or B. */
static uint64_t set_bound(const struct bounder *bd, unsigned set, unsigned long n)
{
	uint64_t v;

	if (!set)
		return 0;
	v = pairings(bd, set, n);
	/* Where the layer tables reach, B was never below C in any case measured. */
	if (n <= bd->layer_lim && bd->layer[set])
		return umin(v, bd->layer[set][n]);
	return umin(v, lp_bound(bd, set, n));
}

/* Whether q lies on or below the chord from p to r (p.x < q.x < r.x, or reversed). */
static bool under(const struct hull_pt *p, const struct hull_pt *q, const struct hull_pt *r)
{
	__int128 lhs = ((__int128)q->y - (__int128)p->y) * ((__int128)r->x - (__int128)p->x);
	__int128 rhs = ((__int128)r->y - (__int128)p->y) * ((__int128)q->x - (__int128)p->x);

	/* Both x differences have the same sign: compare without dividing. */
	return r->x > p->x ? lhs <= rhs : lhs >= rhs;
}

/*
 * s * h(n / s) rounded down, h the concave envelope of f over x .. n as
 * stacked in hull (x descending from the bottom): by Jensen's inequality
 * no s values of f with arguments in x .. n summing to n add up to more.
 */
static uint64_t envelope_at(const struct hull_pt *h, size_t k, unsigned long s, unsigned long n)
{
	size_t lo = 0, hi = k - 1; /* h[lo].x >= n / s >= h[hi].x */
	__int128 num;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (s * h[mid].x >= n)
			lo = mid;
		else
			hi = mid;
	}
	if (s * h[hi].x == n || lo == hi)
		return s * h[hi].y;
	if (s * h[lo].x == n)
		return s * h[lo].y;
	num = ((__int128)h[lo].y - (__int128)h[hi].y) * (__int128)(n - s * h[hi].x);
	return (uint64_t)((__int128)(s * h[hi].y) + num / (__int128)(h[lo].x - h[hi].x));
}

/*
 * Bound D, for units too large for the tables of bound C: the same cut
 * along a collective v, with the other items bounded in each layer by
 * A, B or C. Holding m whole v-groups puts at least m ranks in each of
 * the s layers, so with n_t ranks in layer t
 *   F(n) <= max(G(n), max over m >= 1 of b_v s m + sum_t G(n_t)),
 * G the bound without v, and the sum is at most s times G's concave
 * envelope over m .. n at n / s. The envelope is built from n down, one
 * point per m, so each cut costs O(n log n).
 */
static uint64_t wide_cut(struct bounder *bd, unsigned v, unsigned long n, struct hull_pt *h)
{
	unsigned long s = bd->it[v].s;
	const uint64_t *f = bd->wide[v];
	uint64_t val = f[n];
	size_t k = 0;

	for (unsigned long x = n; x >= 1; x--) {
		struct hull_pt p = { x, f[x] };

		while (k >= 2 && under(&h[k - 2], &h[k - 1], &p))
			k--;
		h[k++] = p;
		if (x * s <= n)
			val = umax(val, bd->it[v].mib * s * x + envelope_at(h, k, s, n));
	}
	return val;
}

/*
 * G(x) for x <= n_max: the bound for the items of set. Up to the layer
 * tables' size bounds A and C; above, A and B, with B's linear programme
 * solved every WIDE_STEP ranks only, at the step's end: what x ranks hold,
 * x + k ranks hold too, so its value there bounds x as well.
 */
#define WIDE_STEP 8ul

static uint64_t *without(const struct bounder *bd, unsigned set)
{
	uint64_t *f = calloc(bd->n_max + 1, sizeof(*f)), lp = 0;

	if (!f)
		return NULL;
	for (unsigned long x = 1; set && x <= bd->n_max; x++) {
		f[x] = pairings(bd, set, x);
		if (x <= bd->layer_lim && bd->layer[set]) {
			f[x] = umin(f[x], bd->layer[set][x]);
			continue;
		}
		if ((x - bd->layer_lim - 1) % WIDE_STEP == 0)
			lp = lp_bound(bd, set, umin(x + WIDE_STEP - 1, bd->n_max));
		f[x] = umin(f[x], lp);
	}
	return f;
}

static uint64_t wide_layers(struct bounder *bd, unsigned long n)
{
	unsigned full = (1u << bd->n_items) - 1;
	uint64_t best = UINT64_MAX;
	struct hull_pt *h;

	if (n > bd->n_max || !(h = calloc(n + 2, sizeof(*h))))
		return UINT64_MAX;
	for (unsigned v = 0; v < bd->n_items; v++) {
		if (bd->it[v].hop)
			continue;
		if (!bd->wide[v] && !(bd->wide[v] = without(bd, full & ~(1u << v))))
			break;
		best = umin(best, wide_cut(bd, v, n, h));
	}
	free(h);
	return best;
}

static uint64_t unit_bound(struct bounder *bd, unsigned long n)
{
	unsigned slot = (unsigned)(n % MEMO_SIZE);

	if (bd->memo_n[slot] != n) {
		bd->memo_n[slot] = n;
		bd->memo_v[slot] = set_bound(bd, (1u << bd->n_items) - 1, n);
		if (n > bd->layer_lim)
			bd->memo_v[slot] = umin(bd->memo_v[slot], wide_layers(bd, n));
	}
	return bd->memo_v[slot];
}

struct totals {
	uint64_t single[MAX_ITEMS];
	uint64_t pair[MAX_ITEMS][MAX_ITEMS];
	uint64_t gain[MAX_ITEMS][MAX_ITEMS];
};

static void add_unit(const struct bounder *bd, struct totals *tt, unsigned long n)
{
	for (unsigned i = 0; i < bd->n_items; i++) {
		uint64_t one = bd->it[i].mib * single_count(&bd->it[i], n);

		tt->single[i] = phx_sat_add(tt->single[i], one);
		for (unsigned j = i + 1; j < bd->n_items; j++) {
			const struct pair_table *t = &bd->pair[i][j];

			tt->pair[i][j] = phx_sat_add(tt->pair[i][j], knap_get(&t->value, n));
			if (t->lines)
				tt->gain[i][j] = phx_sat_add(tt->gain[i][j], knap_get(&t->gain, n));
		}
	}
}

static int cmp_ul(const void *x, const void *y)
{
	unsigned long a = *(const unsigned long *)x, b = *(const unsigned long *)y;

	return a < b ? -1 : a > b;
}

/*
 * The level's saving: per unit the smaller of bounds A and B, summed; or
 * bound A on level totals, where two collectives also have the plane
 * bound. Both hold; the smaller is kept.
 */
static int level_saving(struct bounder *bd, unsigned level, uint64_t *out)
{
	const struct pl_alloc *a = bd->a;
	unsigned long *cap = phx_pl_unit_gpus(a, level);
	struct totals *tt = calloc(1, sizeof(*tt));
	uint64_t sum = 0, last = 0;

	if (!cap || !tt) {
		free(cap);
		free(tt);
		return -1;
	}
	qsort(cap, a->n_units[level], sizeof(*cap), cmp_ul);
	for (uint32_t u = 0; u < a->n_units[level]; u++) {
		unsigned long n = umin(cap[u], a->world);

		if (!n)
			continue;
		if (!u || cap[u] != cap[u - 1])
			last = unit_bound(bd, n);
		sum = phx_sat_add(sum, last);
		add_unit(bd, tt, n);
	}
	for (unsigned i = 0; i < bd->n_items; i++) {
		for (unsigned j = i + 1; j < bd->n_items; j++) {
			const struct pair_table *t = &bd->pair[i][j];

			if (t->lines)
				tt->pair[i][j] = umin(tt->pair[i][j],
						      phx_sat_add(phx_sat_mul(t->b_max, a->world),
								  tt->gain[i][j]));
		}
	}
	*out = umin(sum, min_pairing(bd->n_items, tt->single,
				     (const uint64_t(*)[MAX_ITEMS])tt->pair, 0));
	free(cap);
	free(tt);
	return 0;
}

/* ---------------------------------------------------------------- setup */

static void collect_items(struct bounder *bd)
{
	const struct pl_alloc *a = bd->a;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		unsigned long s = a->layout->size[d];

		if (s < 2 || !a->traffic[d])
			continue;
		bd->it[bd->n_items].hop = d == PHX_DIM_PP;
		bd->it[bd->n_items].mib = a->traffic[d];
		bd->it[bd->n_items].s = s;
		bd->n_items++;
	}
}

static void largest_unit(struct bounder *bd)
{
	const struct pl_alloc *a = bd->a;

	for (unsigned l = 0; l < PL_SUB_LEVELS; l++) {
		unsigned long *cap;

		if (a->weight[l + 1] == a->weight[l])
			continue;
		cap = phx_pl_unit_gpus(a, l);
		if (!cap) {
			bd->n_max = a->world; /* only costs time */
			return;
		}
		for (uint32_t u = 0; u < a->n_units[l]; u++) {
			unsigned long n = umin(cap[u], a->world);

			bd->n_max = umax(bd->n_max, cap[u]);

			if (n <= LAYER_LIMIT)
				bd->layer_lim = umax(bd->layer_lim, n);
		}
		free(cap);
	}
	bd->n_max = umin(bd->n_max, a->world);
}

static void free_bounder(struct bounder *bd)
{
	for (unsigned i = 0; i < MAX_ITEMS; i++) {
		for (unsigned j = 0; j < MAX_ITEMS; j++) {
			free(bd->pair[i][j].value.v);
			free(bd->pair[i][j].both.v);
			free(bd->pair[i][j].gain.v);
		}
	}
	for (unsigned s = 0; s < (1u << MAX_ITEMS); s++) {
		free(bd->all[s]);
		free(bd->layer[s]);
	}
	for (unsigned i = 0; i < MAX_ITEMS; i++)
		free(bd->wide[i]);
}

int phx_pl_lower_bound(const struct pl_alloc *a, uint64_t *bound)
{
	struct bounder bd = { .a = a };
	uint64_t full = 0, base, saved = 0;
	int rc = -1;

	collect_items(&bd);
	largest_unit(&bd);
	for (unsigned i = 0; i < bd.n_items; i++) {
		unsigned long held =
			bd.it[i].hop ? a->world / bd.it[i].s * (bd.it[i].s - 1) : a->world;

		for (unsigned j = i + 1; j < bd.n_items; j++) {
			if (fill_pair(&bd, i, j) < 0)
				goto out;
		}
		full = phx_sat_add(full, bd.it[i].mib * held);
	}
	if (build_slabs(&bd) < 0 || build_layers(&bd) < 0)
		goto out;
	base = phx_sat_mul(full, a->weight[PHX_LEVEL_CORE]);
	for (unsigned l = 0; l < PL_SUB_LEVELS; l++) {
		uint64_t delta = a->weight[l + 1] - a->weight[l], s;

		if (!delta)
			continue;
		if (level_saving(&bd, l, &s) < 0)
			goto out;
		/* No level can save more than all the traffic there is. */
		saved = phx_sat_add(saved, phx_sat_mul(umin(s, full), delta));
	}
	*bound = saved < base ? base - saved : 0;
	rc = 0;
out:
	free_bounder(&bd);
	return rc;
}

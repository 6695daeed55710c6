/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/fabric.h"
#include "placement/fabric_int.h"
#include "common/hostlist.h"

static const char *const level_names[PHX_LEVEL_COUNT] = {
	"node", "nvlink", "leaf", "spine", "core",
};

static const unsigned long default_bw[PHX_LEVEL_COUNT] = {
	PHX_BW_NODE_DEFAULT,  PHX_BW_NVLINK_DEFAULT, PHX_BW_LEAF_DEFAULT,
	PHX_BW_SPINE_DEFAULT, PHX_BW_CORE_DEFAULT,
};

const unsigned long *phx_fabric_default_bandwidth(void)
{
	return default_bw;
}

const char *phx_level_name(enum phx_level level)
{
	return (unsigned)level < PHX_LEVEL_COUNT ? level_names[level] : "?";
}

static size_t digits_from(const char *s, size_t len)
{
	while (len && s[len - 1] >= '0' && s[len - 1] <= '9')
		len--;
	return len;
}

void phx_hostname_key(const char *name, struct phx_hostname_key *k)
{
	k->name = name;
	k->len = strlen(name);
	k->digits = digits_from(name, k->len);
	for (k->number = k->digits; k->number < k->len && name[k->number] == '0'; k->number++)
		;
}

int phx_hostname_key_cmp(const struct phx_hostname_key *a, const struct phx_hostname_key *b)
{
	size_t na = a->len - a->number, nb = b->len - b->number;
	int c = memcmp(a->name, b->name, a->digits < b->digits ? a->digits : b->digits);

	if (c)
		return c < 0 ? -1 : 1;
	if (a->digits != b->digits)
		return a->digits < b->digits ? -1 : 1;
	/* Same prefix: compare the trailing numbers by value. */
	if (na != nb)
		return na < nb ? -1 : 1;
	c = memcmp(a->name + a->number, b->name + b->number, na);
	if (c)
		return c < 0 ? -1 : 1;
	/* "n01" and "n1": any fixed order will do. */
	c = strcmp(a->name, b->name);
	return c < 0 ? -1 : c > 0;
}

int phx_hostname_cmp(const char *a, const char *b)
{
	struct phx_hostname_key x, y;

	phx_hostname_key(a, &x);
	phx_hostname_key(b, &y);
	return phx_hostname_key_cmp(&x, &y);
}

/* ---------------------------------------------------------------- builder */

void phx_fab_builder_init(struct fab_builder *b)
{
	memset(b, 0, sizeof(*b));
	memcpy(b->bandwidth, default_bw, sizeof(default_bw));
}

void phx_fab_builder_free(struct fab_builder *b)
{
	for (size_t i = 0; i < b->n_decls; i++) {
		free(b->decls[i].name);
		free(b->decls[i].members);
		free(b->decls[i].spine);
		free(b->decls[i].where);
	}
	free(b->decls);
	for (int l = 0; l < PHX_LEVEL_COUNT; l++)
		free(b->bw_where[l]);
	free(b->domain_size_where);
	free(b->switches_from);
	free(b->domains_from);
	free(b->source);
	memset(b, 0, sizeof(*b));
}

int phx_fab_builder_add(struct fab_builder *b, enum fab_decl_kind kind, const char *name,
			const char *members, const char *spine, const char *where)
{
	struct fab_decl *d;

	if (b->n_decls == b->cap_decls) {
		size_t cap = b->cap_decls ? 2 * b->cap_decls : 64;
		struct fab_decl *grown = realloc(b->decls, cap * sizeof(*grown));

		if (!grown)
			return -1;
		b->decls = grown;
		b->cap_decls = cap;
	}
	d = &b->decls[b->n_decls];
	memset(d, 0, sizeof(*d));
	d->kind = kind;
	d->name = strdup(name);
	d->members = strdup(members);
	d->spine = spine ? strdup(spine) : NULL;
	d->where = strdup(where);
	if (!d->name || !d->members || (spine && !d->spine) || !d->where) {
		free(d->name);
		free(d->members);
		free(d->spine);
		free(d->where);
		return -1;
	}
	b->n_decls++;
	return 0;
}

int phx_fab_builder_claim(struct fab_builder *b, bool switches, const char *file, char *err,
			  size_t errlen)
{
	char **from = switches ? &b->switches_from : &b->domains_from;

	if (*from && strcmp(*from, file)) {
		snprintf(err, errlen, "%s: %s already come from %s; describe them in one place",
			 file, switches ? "the switches" : "the NVLink domains", *from);
		return -1;
	}
	if (!*from && !(*from = strdup(file))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int phx_fab_builder_add_source(struct fab_builder *b, const char *name)
{
	size_t old = b->source ? strlen(b->source) : 0, len = old + strlen(name) + 3;
	char *grown = realloc(b->source, len);

	if (!grown)
		return -1;
	b->source = grown;
	snprintf(grown + old, len - old, "%s%s", old ? ", " : "", name);
	return 0;
}

/* ---------------------------------------------------------------- building */

struct build {
	struct fab_builder *b;
	struct phx_fabric *f;
	struct fab_decl **sw; /* leaves and switches, by name */
	size_t n_sw;
	long *parent; /* per sw[] entry, -1 at the top */
	char *err;
	size_t errlen;
};

static int decl_cmp(const void *a, const void *b)
{
	const struct fab_decl *const *x = a, *const *y = b;

	return phx_hostname_cmp((*x)->name, (*y)->name);
}

static int str_cmp(const void *a, const void *b)
{
	return phx_hostname_cmp(*(char *const *)a, *(char *const *)b);
}

static int node_cmp(const void *a, const void *b)
{
	return phx_hostname_cmp(((const struct phx_fabric_node *)a)->name,
				((const struct phx_fabric_node *)b)->name);
}

static int oom(struct build *w)
{
	snprintf(w->err, w->errlen, "out of memory building the fabric");
	return -1;
}

static int expand(struct build *w, const struct fab_decl *d, struct phx_hostnames *hosts)
{
	char herr[256];

	if (phx_hostlist_expand(d->members, hosts, herr, sizeof(herr)) == 0)
		return 0;
	snprintf(w->err, w->errlen, "%s: %s", d->where, herr);
	return -1;
}

static const char *switch_name(const void *ctx, size_t i)
{
	return ((const struct build *)ctx)->sw[i]->name;
}

static long find_switch(const struct build *w, const char *name)
{
	return phx_hostname_search(name, w->n_sw, switch_name, w);
}

static int collect_switches(struct build *w)
{
	struct fab_builder *b = w->b;

	w->sw = calloc(b->n_decls + 1, sizeof(*w->sw));
	w->parent = calloc(b->n_decls + 1, sizeof(*w->parent));
	if (!w->sw || !w->parent)
		return oom(w);
	for (size_t i = 0; i < b->n_decls; i++) {
		if (b->decls[i].kind != FAB_DOMAIN)
			w->sw[w->n_sw++] = &b->decls[i];
	}
	if (w->n_sw > PHX_FABRIC_MAX_SWITCHES) {
		snprintf(w->err, w->errlen, "%s: more than %u switches", w->sw[0]->where,
			 PHX_FABRIC_MAX_SWITCHES);
		return -1;
	}
	qsort(w->sw, w->n_sw, sizeof(*w->sw), decl_cmp);
	for (size_t i = 0; i < w->n_sw; i++) {
		w->parent[i] = -1;
		if (i && !strcmp(w->sw[i - 1]->name, w->sw[i]->name)) {
			snprintf(w->err, w->errlen, "%s: switch '%s' is already defined at %s",
				 w->sw[i]->where, w->sw[i]->name, w->sw[i - 1]->where);
			return -1;
		}
	}
	return 0;
}

static int link_child(struct build *w, size_t up, const char *name)
{
	long c = find_switch(w, name);

	if (c < 0) {
		snprintf(w->err, w->errlen,
			 "%s: switch '%s' lists '%s' under it, which is not a switch defined "
			 "anywhere",
			 w->sw[up]->where, w->sw[up]->name, name);
		return -1;
	}
	if ((size_t)c == up) {
		snprintf(w->err, w->errlen, "%s: switch '%s' lists itself under it",
			 w->sw[up]->where, name);
		return -1;
	}
	if (w->parent[c] >= 0) {
		snprintf(w->err, w->errlen,
			 "%s: switch '%s' is already under '%s' (%s); a switch has one parent",
			 w->sw[up]->where, name, w->sw[w->parent[c]]->name,
			 w->sw[w->parent[c]]->where);
		return -1;
	}
	w->parent[c] = (long)up;
	return 0;
}

static int link_parents(struct build *w)
{
	for (size_t i = 0; i < w->n_sw; i++) {
		struct phx_hostnames kids;
		int rc = 0;

		if (w->sw[i]->kind != FAB_SWITCH)
			continue;
		if (expand(w, w->sw[i], &kids) < 0)
			return -1;
		for (size_t k = 0; k < kids.count && rc == 0; k++)
			rc = link_child(w, i, kids.names[k]);
		phx_hostnames_free(&kids);
		if (rc)
			return -1;
	}
	/* A loop never reaches the top within n_sw steps. */
	for (size_t i = 0; i < w->n_sw; i++) {
		long up = w->parent[i];

		for (size_t steps = 0; up >= 0; steps++, up = w->parent[up]) {
			if (steps > w->n_sw) {
				snprintf(w->err, w->errlen, "%s: switches form a loop through '%s'",
					 w->sw[i]->where, w->sw[i]->name);
				return -1;
			}
		}
	}
	return 0;
}

static const char *spine_of(const struct build *w, size_t i)
{
	if (w->sw[i]->spine)
		return w->sw[i]->spine;
	return w->parent[i] >= 0 ? w->sw[w->parent[i]]->name : "";
}

static const char *str_at(const void *ctx, size_t i)
{
	return ((char *const *)ctx)[i];
}

static long find_str(char *const *arr, size_t n, const char *name)
{
	return phx_hostname_search(name, n, str_at, arr);
}

static int make_spines(struct build *w, size_t *leaf_sw)
{
	struct phx_fabric *f = w->f;
	size_t n = 0;

	f->spines = calloc(f->n_leaves + 1, sizeof(*f->spines));
	f->leaf_spine = calloc(f->n_leaves + 1, sizeof(*f->leaf_spine));
	if (!f->spines || !f->leaf_spine)
		return oom(w);
	for (size_t i = 0; i < f->n_leaves; i++) {
		if (!(f->spines[n++] = strdup(spine_of(w, leaf_sw[i]))))
			return oom(w);
	}
	qsort(f->spines, n, sizeof(*f->spines), str_cmp);
	f->n_spines = 0;
	for (size_t i = 0; i < n; i++) {
		if (f->n_spines && !strcmp(f->spines[f->n_spines - 1], f->spines[i]))
			free(f->spines[i]);
		else
			f->spines[f->n_spines++] = f->spines[i];
	}
	for (size_t i = 0; i < f->n_leaves; i++)
		f->leaf_spine[i] =
			(unsigned)find_str(f->spines, f->n_spines, spine_of(w, leaf_sw[i]));
	return 0;
}

static int add_nodes(struct build *w, struct phx_hostnames *hosts, unsigned leaf, size_t *cap)
{
	struct phx_fabric *f = w->f;

	if (f->n_nodes + hosts->count > PHX_FABRIC_MAX_NODES) {
		snprintf(w->err, w->errlen, "the fabric names more than %u nodes",
			 PHX_FABRIC_MAX_NODES);
		return -1;
	}
	if (f->n_nodes + hosts->count > *cap) {
		size_t want = 2 * (f->n_nodes + hosts->count);
		struct phx_fabric_node *grown = realloc(f->nodes, want * sizeof(*grown));

		if (!grown)
			return oom(w);
		f->nodes = grown;
		*cap = want;
	}
	/* The names change hands: the fabric frees them. */
	for (size_t i = 0; i < hosts->count; i++) {
		f->nodes[f->n_nodes].name = hosts->names[i];
		f->nodes[f->n_nodes].leaf = leaf;
		f->nodes[f->n_nodes].domain = -1;
		f->n_nodes++;
		hosts->names[i] = NULL;
	}
	return 0;
}

static int make_leaves(struct build *w)
{
	struct phx_fabric *f = w->f;
	size_t *leaf_sw = calloc(w->n_sw + 1, sizeof(*leaf_sw));
	size_t cap = 0;
	int rc = -1;

	if (!leaf_sw)
		return oom(w);
	for (size_t i = 0; i < w->n_sw; i++) {
		if (w->sw[i]->kind == FAB_LEAF)
			leaf_sw[f->n_leaves++] = i;
	}
	f->has_switches = f->n_leaves > 0;
	if (!f->has_switches) {
		/* No switches: one nameless leaf under one nameless spine. */
		f->n_leaves = 1;
		f->leaves = calloc(1, sizeof(*f->leaves));
		f->n_spines = 1;
		f->spines = calloc(1, sizeof(*f->spines));
		f->leaf_spine = calloc(1, sizeof(*f->leaf_spine));
		if (!f->leaves || !f->spines || !f->leaf_spine || !(f->leaves[0] = strdup("")) ||
		    !(f->spines[0] = strdup("")))
			goto out_oom;
		rc = 0;
		goto out;
	}
	f->leaves = calloc(f->n_leaves, sizeof(*f->leaves));
	if (!f->leaves)
		goto out_oom;
	for (size_t i = 0; i < f->n_leaves; i++) {
		struct phx_hostnames hosts;

		if (!(f->leaves[i] = strdup(w->sw[leaf_sw[i]]->name)))
			goto out_oom;
		if (expand(w, w->sw[leaf_sw[i]], &hosts) < 0) {
			rc = -1;
			goto out;
		}
		rc = add_nodes(w, &hosts, (unsigned)i, &cap);
		phx_hostnames_free(&hosts);
		if (rc < 0)
			goto out;
	}
	rc = make_spines(w, leaf_sw);
out:
	free(leaf_sw);
	return rc;
out_oom:
	free(leaf_sw);
	return oom(w);
}

static int sort_nodes(struct build *w)
{
	struct phx_fabric *f = w->f;

	if (f->n_nodes > 1) /* nodes is NULL when there are none */
		qsort(f->nodes, f->n_nodes, sizeof(*f->nodes), node_cmp);
	for (size_t i = 1; i < f->n_nodes; i++) {
		if (strcmp(f->nodes[i - 1].name, f->nodes[i].name))
			continue;
		snprintf(w->err, w->errlen,
			 "node '%s' is under two leaf switches, '%s' and '%s'; a node has one leaf",
			 f->nodes[i].name, f->leaves[f->nodes[i - 1].leaf],
			 f->leaves[f->nodes[i].leaf]);
		return -1;
	}
	return 0;
}

/* Without switches the NVLink domains are the only list of nodes. */
static int nodes_from_domains(struct build *w, struct fab_decl **dom, size_t n_dom)
{
	struct phx_fabric *f = w->f;
	size_t cap = 0, kept = 0;

	for (size_t i = 0; i < n_dom; i++) {
		struct phx_hostnames hosts;
		int rc;

		if (expand(w, dom[i], &hosts) < 0)
			return -1;
		rc = add_nodes(w, &hosts, 0, &cap);
		phx_hostnames_free(&hosts);
		if (rc < 0)
			return -1;
	}
	if (f->n_nodes > 1)
		qsort(f->nodes, f->n_nodes, sizeof(*f->nodes), node_cmp);
	/* A node in two domains is reported when the domains are assigned. */
	for (size_t i = 0; i < f->n_nodes; i++) {
		if (kept && !strcmp(f->nodes[kept - 1].name, f->nodes[i].name))
			free(f->nodes[i].name);
		else
			f->nodes[kept++] = f->nodes[i];
	}
	f->n_nodes = kept;
	return 0;
}

static int join_domain(struct build *w, const struct fab_decl *d, unsigned di, const char *node,
		       long *leaf)
{
	struct phx_fabric *f = w->f;
	long n = phx_fabric_find(f, node);

	if (n < 0) {
		snprintf(w->err, w->errlen,
			 "%s: NVLink domain '%s' lists node '%s', which is under no leaf switch",
			 d->where, d->name, node);
		return -1;
	}
	if (f->nodes[n].domain >= 0) {
		snprintf(w->err, w->errlen,
			 "%s: node '%s' is already in NVLink domain '%s'; a node has one domain",
			 d->where, node, f->domains[f->nodes[n].domain]);
		return -1;
	}
	if (*leaf >= 0 && (unsigned)*leaf != f->nodes[n].leaf) {
		snprintf(w->err, w->errlen,
			 "%s: NVLink domain '%s' spans leaf switches '%s' and '%s'; a domain must "
			 "sit under one leaf",
			 d->where, d->name, f->leaves[*leaf], f->leaves[f->nodes[n].leaf]);
		return -1;
	}
	*leaf = f->nodes[n].leaf;
	f->nodes[n].domain = (int)di;
	return 0;
}

static int add_domain(struct build *w, const struct fab_decl *d, unsigned di)
{
	struct phx_hostnames hosts;
	long leaf = -1;
	int rc = 0;

	if (!(w->f->domains[di] = strdup(d->name)))
		return oom(w);
	if (expand(w, d, &hosts) < 0)
		return -1;
	if (hosts.count > PHX_FABRIC_MAX_DOMAIN_NODES) {
		snprintf(w->err, w->errlen,
			 "%s: NVLink domain '%s' has %zu nodes; at most %u are accepted", d->where,
			 d->name, hosts.count, PHX_FABRIC_MAX_DOMAIN_NODES);
		rc = -1;
	}
	for (size_t i = 0; i < hosts.count && rc == 0; i++)
		rc = join_domain(w, d, di, hosts.names[i], &leaf);
	phx_hostnames_free(&hosts);
	return rc;
}

static int listed_domains(struct build *w)
{
	struct fab_builder *b = w->b;
	struct fab_decl **dom = calloc(b->n_decls + 1, sizeof(*dom));
	size_t n = 0;
	int rc = -1;

	if (!dom)
		return oom(w);
	for (size_t i = 0; i < b->n_decls; i++) {
		if (b->decls[i].kind == FAB_DOMAIN)
			dom[n++] = &b->decls[i];
	}
	qsort(dom, n, sizeof(*dom), decl_cmp);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(dom[i - 1]->name, dom[i]->name)) {
			snprintf(w->err, w->errlen,
				 "%s: NVLink domain '%s' is already defined at %s", dom[i]->where,
				 dom[i]->name, dom[i - 1]->where);
			goto out;
		}
	}
	if (!w->f->has_switches && nodes_from_domains(w, dom, n) < 0)
		goto out;
	w->f->domains = calloc(n + 1, sizeof(*w->f->domains));
	if (!w->f->domains) {
		rc = oom(w);
		goto out;
	}
	for (w->f->n_domains = 0; w->f->n_domains < n; w->f->n_domains++) {
		if (add_domain(w, dom[w->f->n_domains], (unsigned)w->f->n_domains) < 0) {
			w->f->n_domains++; /* its name is set: freed with the fabric */
			goto out;
		}
	}
	rc = 0;
out:
	free(dom);
	return rc;
}

/* nvlink_domain_size: runs of that many nodes of each leaf, in name order. */
static int sized_domains(struct build *w)
{
	struct phx_fabric *f = w->f;
	unsigned size = w->b->domain_size;
	size_t cap = f->n_nodes / size + f->n_leaves + 1;

	if (!f->has_switches) {
		snprintf(w->err, w->errlen,
			 "%s: nvlink_domain_size needs the switch tree (fabric.leaves or a "
			 "topology.conf) to know which nodes share a rack",
			 w->b->domain_size_where);
		return -1;
	}
	f->domains = calloc(cap, sizeof(*f->domains));
	if (!f->domains)
		return oom(w);
	for (size_t leaf = 0; leaf < f->n_leaves; leaf++) {
		size_t in_leaf = 0;

		for (size_t i = 0; i < f->n_nodes; i++) {
			char name[300];

			if (f->nodes[i].leaf != leaf)
				continue;
			if (in_leaf % size == 0) {
				snprintf(name, sizeof(name), "%.256s%snvl%zu", f->leaves[leaf],
					 f->leaves[leaf][0] ? "/" : "", in_leaf / size);
				if (!(f->domains[f->n_domains++] = strdup(name)))
					return oom(w);
			}
			f->nodes[i].domain = (int)f->n_domains - 1;
			in_leaf++;
		}
	}
	return 0;
}

static int check_bandwidth(struct build *w)
{
	const unsigned long *bw = w->b->bandwidth;

	for (int l = 1; l < PHX_LEVEL_COUNT; l++) {
		const char *where = w->b->bw_where[l] ? w->b->bw_where[l] : w->b->bw_where[l - 1];

		if (bw[l] <= bw[l - 1])
			continue;
		snprintf(w->err, w->errlen,
			 "%s%sbandwidth.%s (%lu MB/s%s) is above bandwidth.%s (%lu MB/s%s); each "
			 "level must be no faster than the one inside it",
			 where ? where : "", where ? ": " : "", level_names[l], bw[l],
			 w->b->bw_where[l] ? "" : ", the default", level_names[l - 1], bw[l - 1],
			 w->b->bw_where[l - 1] ? "" : ", the default");
		return -1;
	}
	memcpy(w->f->bandwidth, bw, sizeof(w->f->bandwidth));
	return 0;
}

int phx_fab_build(struct fab_builder *b, struct phx_fabric **out, char *err, size_t errlen)
{
	struct build w = { .b = b, .err = err, .errlen = errlen };
	int rc = -1;

	*out = NULL;
	w.f = calloc(1, sizeof(*w.f));
	if (!w.f)
		return oom(&w);
	if (check_bandwidth(&w) < 0 || collect_switches(&w) < 0 || link_parents(&w) < 0 ||
	    make_leaves(&w) < 0 || sort_nodes(&w) < 0)
		goto out;
	if (b->domain_size ? sized_domains(&w) < 0 : listed_domains(&w) < 0)
		goto out;
	if (!(w.f->source = strdup(b->source ? b->source : "built-in defaults"))) {
		oom(&w);
		goto out;
	}
	*out = w.f;
	w.f = NULL;
	rc = 0;
out:
	phx_fabric_free(w.f);
	free(w.sw);
	free(w.parent);
	return rc;
}

/* ---------------------------------------------------------------- public */

void phx_fabric_free(struct phx_fabric *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_nodes; i++)
		free(f->nodes[i].name);
	for (size_t i = 0; f->leaves && i < f->n_leaves; i++)
		free(f->leaves[i]);
	for (size_t i = 0; f->spines && i < f->n_spines; i++)
		free(f->spines[i]);
	for (size_t i = 0; f->domains && i < f->n_domains; i++)
		free(f->domains[i]);
	free(f->nodes);
	free(f->leaves);
	free(f->leaf_spine);
	free(f->spines);
	free(f->domains);
	free(f->source);
	free(f);
}

static const char *node_name(const void *ctx, size_t i)
{
	return ((const struct phx_fabric *)ctx)->nodes[i].name;
}

long phx_fabric_find(const struct phx_fabric *f, const char *name)
{
	return phx_hostname_search(name, f->n_nodes, node_name, f);
}

long phx_hostname_search(const char *name, size_t n,
			 const char *(*name_at)(const void *ctx, size_t i), const void *ctx)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = phx_hostname_cmp(name, name_at(ctx, mid));

		if (c == 0)
			return (long)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

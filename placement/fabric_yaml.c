/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The 'fabric:' section of phalanx.yaml or of a fabric file:
 *
 *   fabric:
 *     topology_conf: topology.conf   # switch tree from Slurm (or 'leaves')
 *     bandwidth: { node: 450, nvlink: 900, leaf: 50, spine: 25, core: 12.5 }
 *     leaves:
 *       - { name: s0, spine: spine0, nodes: "node[001-032]" }
 *     nvlink_domains:                # or: nvlink_domain_size: 18
 *       - { name: rack0, nodes: "gb[001-018]" }
 *
 * Bandwidths are GB/s per GPU in one direction. Other top-level keys of the
 * file belong to phalanx.yaml and are checked by its own loader.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/fabric_int.h"
#include "common/yaml.h"

#define WHERE_LEN 600

static const char *const fabric_keys[] = {
	"topology_conf", "bandwidth", "leaves", "nvlink_domains", "nvlink_domain_size",
};
static const char *const leaf_keys[] = { "name", "nodes", "spine" };
static const char *const domain_keys[] = { "name", "nodes" };

struct yread {
	struct fab_builder *b;
	const struct phx_ydoc *doc;
	char *err;
	size_t errlen;
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static int oom(struct yread *r)
{
	snprintf(r->err, r->errlen, "out of memory reading %s", r->doc->name);
	return -1;
}

static void where_of(const struct yread *r, const struct phx_ynode *node, char *out, size_t len)
{
	char path[400];

	phx_ynode_path(node, path, sizeof(path));
	snprintf(out, len, "%s:%u:%u: key '%s'", r->doc->name, node->line, node->column, path);
}

static int want_type(struct yread *r, const struct phx_ynode *node, enum phx_ynode_type type)
{
	if (node->type == type)
		return 0;
	return phx_ynode_error(r->doc, node, r->err, r->errlen, "expected a %s, got a %s",
			       phx_ynode_type_name(type), phx_ynode_type_name(node->type));
}

/* Refuses keys that are not in keys[], with the list and a near miss. */
static int check_keys(struct yread *r, const struct phx_ynode *map, const char *const *keys,
		      size_t n)
{
	for (size_t i = 0; i < map->n_items; i++) {
		const struct phx_ynode *kid = map->items[i];
		char list[256] = "", hint[96] = "", path[400];
		const char *near;
		size_t used = 0;
		bool known = false;

		for (size_t k = 0; k < n; k++)
			known |= !strcmp(kid->key, keys[k]);
		if (known)
			continue;
		for (size_t k = 0; k < n; k++)
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
						 k ? ", " : "", keys[k]);
		near = phx_yaml_suggest(kid->key, keys, n);
		if (near)
			snprintf(hint, sizeof(hint), "; did you mean '%s'?", near);
		phx_ynode_path(map, path, sizeof(path));
		return phx_ynode_key_error(r->doc, kid, r->err, r->errlen,
					   "unknown key '%.128s'; known keys in '%s': %s%s",
					   kid->key, path, list, hint);
	}
	return 0;
}

static int get_string(struct yread *r, const struct phx_ynode *map, const char *key, bool required,
		      const char **out)
{
	const struct phx_ynode *node = phx_ynode_get(map, key);

	*out = NULL;
	if (!node) {
		if (!required)
			return 0;
		return phx_ynode_error(r->doc, map, r->err, r->errlen, "'%s' is missing", key);
	}
	if (phx_ynode_string(r->doc, node, out, r->err, r->errlen) < 0)
		return -1;
	if (!**out)
		return phx_ynode_error(r->doc, node, r->err, r->errlen, "must not be empty");
	return 0;
}

static int read_bandwidth(struct yread *r, const struct phx_ynode *map)
{
	if (want_type(r, map, PHX_YMAP) < 0)
		return -1;
	for (size_t i = 0; i < map->n_items; i++) {
		const struct phx_ynode *v = map->items[i];
		char where[WHERE_LEN];
		unsigned long mbs;
		double gbs;
		int l;

		for (l = 0; l < PHX_LEVEL_COUNT && strcmp(v->key, phx_level_name(l)); l++)
			;
		if (l == PHX_LEVEL_COUNT) {
			static const char *const names[PHX_LEVEL_COUNT] = {
				"node", "nvlink", "leaf", "spine", "core",
			};

			return check_keys(r, map, names, PHX_LEVEL_COUNT);
		}
		if (phx_ynode_double(r->doc, v, PHX_BW_MIN / 1000.0, PHX_BW_MAX / 1000.0, &gbs,
				     r->err, r->errlen) < 0)
			return -1;
		/* One rounding step, the same on every machine. */
		gbs *= 1000.0;
		mbs = (unsigned long)gbs;
		if (gbs - (double)mbs >= 0.5)
			mbs++;
		r->b->bandwidth[l] = mbs;
		where_of(r, v, where, sizeof(where));
		free(r->b->bw_where[l]);
		if (!(r->b->bw_where[l] = strdup(where)))
			return oom(r);
	}
	return 0;
}

/* leaves: and nvlink_domains: are lists of { name, nodes[, spine] }. */
static int read_list(struct yread *r, const struct phx_ynode *seq, enum fab_decl_kind kind)
{
	bool leaves = kind == FAB_LEAF;

	if (want_type(r, seq, PHX_YSEQ) < 0)
		return -1;
	if (seq->n_items == 0)
		return phx_ynode_error(r->doc, seq, r->err, r->errlen, "the list is empty");
	if (phx_fab_builder_claim(r->b, leaves, r->doc->name, r->err, r->errlen) < 0)
		return -1;
	for (size_t i = 0; i < seq->n_items; i++) {
		const struct phx_ynode *item = seq->items[i];
		const char *name, *nodes, *spine = NULL;
		char where[WHERE_LEN];

		if (want_type(r, item, PHX_YMAP) < 0 ||
		    check_keys(r, item, leaves ? leaf_keys : domain_keys,
			       leaves ? N(leaf_keys) : N(domain_keys)) < 0 ||
		    get_string(r, item, "name", true, &name) < 0 ||
		    get_string(r, item, "nodes", true, &nodes) < 0 ||
		    (leaves && get_string(r, item, "spine", false, &spine) < 0))
			return -1;
		where_of(r, phx_ynode_get(item, "nodes"), where, sizeof(where));
		if (phx_fab_builder_add(r->b, kind, name, nodes, spine, where) < 0)
			return oom(r);
	}
	return 0;
}

static int read_domain_size(struct yread *r, const struct phx_ynode *node)
{
	char where[WHERE_LEN];
	long long size;

	if (phx_ynode_int(r->doc, node, 1, PHX_FABRIC_MAX_DOMAIN_NODES, &size, r->err, r->errlen) <
		    0 ||
	    phx_fab_builder_claim(r->b, false, r->doc->name, r->err, r->errlen) < 0)
		return -1;
	r->b->domain_size = (unsigned)size;
	where_of(r, node, where, sizeof(where));
	if (!(r->b->domain_size_where = strdup(where)))
		return oom(r);
	return 0;
}

static int read_topology_conf(struct yread *r, const struct phx_ynode *node, char **topo_path)
{
	const char *path, *slash;
	size_t dir;

	if (phx_ynode_string(r->doc, node, &path, r->err, r->errlen) < 0)
		return -1;
	if (!*path)
		return phx_ynode_error(r->doc, node, r->err, r->errlen, "must not be empty");
	slash = strrchr(r->doc->name, '/');
	dir = path[0] != '/' && slash ? (size_t)(slash - r->doc->name) + 1 : 0;
	*topo_path = malloc(dir + strlen(path) + 1);
	if (!*topo_path)
		return oom(r);
	memcpy(*topo_path, r->doc->name, dir);
	strcpy(*topo_path + dir, path);
	return 0;
}

static int read_fabric(struct yread *r, const struct phx_ynode *fab, char **topo_path)
{
	const struct phx_ynode *v;

	if (want_type(r, fab, PHX_YMAP) < 0 || check_keys(r, fab, fabric_keys, N(fabric_keys)) < 0)
		return -1;
	if (phx_ynode_get(fab, "nvlink_domains") && (v = phx_ynode_get(fab, "nvlink_domain_size")))
		return phx_ynode_error(r->doc, v, r->err, r->errlen,
				       "give nvlink_domains or nvlink_domain_size, not both");
	if (phx_ynode_get(fab, "leaves") && (v = phx_ynode_get(fab, "topology_conf")))
		return phx_ynode_error(r->doc, v, r->err, r->errlen,
				       "give leaves or topology_conf, not both");
	if ((v = phx_ynode_get(fab, "bandwidth")) && read_bandwidth(r, v) < 0)
		return -1;
	if ((v = phx_ynode_get(fab, "leaves")) && read_list(r, v, FAB_LEAF) < 0)
		return -1;
	if ((v = phx_ynode_get(fab, "nvlink_domains")) && read_list(r, v, FAB_DOMAIN) < 0)
		return -1;
	if ((v = phx_ynode_get(fab, "nvlink_domain_size")) && read_domain_size(r, v) < 0)
		return -1;
	if ((v = phx_ynode_get(fab, "topology_conf")) && read_topology_conf(r, v, topo_path) < 0)
		return -1;
	return 0;
}

int phx_fab_parse_yaml(struct fab_builder *b, const char *name, const char *buf, size_t len,
		       char **topo_path, char *err, size_t errlen)
{
	struct phx_ydoc *doc;
	struct yread r = { .b = b, .err = err, .errlen = errlen };
	const struct phx_ynode *fab;
	int rc = -1;

	*topo_path = NULL;
	if (phx_ydoc_load_buffer(name, buf, len, &doc, err, errlen) < 0)
		return -1;
	r.doc = doc;
	if (phx_fab_builder_add_source(b, name) < 0) {
		oom(&r);
		goto out;
	}
	if (!doc->root || doc->root->type != PHX_YMAP) {
		snprintf(err, errlen, "%s: expected a mapping with a 'fabric:' key", name);
		goto out;
	}
	fab = phx_ynode_get(doc->root, "fabric");
	if (!fab) {
		snprintf(err, errlen,
			 "%s: no 'fabric:' section; see phalanx-plan(1) for the format", name);
		goto out;
	}
	rc = read_fabric(&r, fab, topo_path);
	if (rc < 0) {
		free(*topo_path);
		*topo_path = NULL;
	}
out:
	phx_ydoc_free(doc);
	return rc;
}

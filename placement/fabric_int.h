/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the fabric reader: topology.conf and YAML both add declarations to
 * a builder; phx_fab_build() then turns them into the sorted, checked
 * struct phx_fabric. Each declaration keeps a "where" prefix so errors found
 * while building still point at the line that caused them.
 *
 * The calls go one way: fabric_load.c calls the parsers and the builder,
 * the parsers (fabric_tconf.c, fabric_yaml.c) call the builder, and the
 * builder (fabric.c) calls neither.
 */
#ifndef PHX_FABRIC_INT_H
#define PHX_FABRIC_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "placement/fabric.h"

enum fab_decl_kind {
	FAB_LEAF, /* a switch with nodes below it */
	FAB_SWITCH, /* a switch with switches below it */
	FAB_DOMAIN, /* an NVLink domain */
};

struct fab_decl {
	enum fab_decl_kind kind;
	char *name;
	char *members; /* host list expression of nodes or switches */
	char *spine; /* YAML leaves only: the spine's name, or NULL */
	char *where; /* "FILE:LINE" or "FILE:LINE:COL: key 'fabric.leaves[2].nodes'" */
};

struct fab_builder {
	struct fab_decl *decls;
	size_t n_decls, cap_decls;
	unsigned long bandwidth[PHX_LEVEL_COUNT];
	char *bw_where[PHX_LEVEL_COUNT]; /* where each was set, NULL for a default */
	unsigned domain_size; /* nvlink_domain_size, 0 when not set */
	char *domain_size_where;
	char *switches_from; /* the first file that declared switches */
	char *domains_from; /* the first file that declared NVLink domains */
	char *source;
};

void phx_fab_builder_init(struct fab_builder *b);
void phx_fab_builder_free(struct fab_builder *b);
/* Takes copies of its strings; spine may be NULL. Returns 0 or -1 (memory). */
int phx_fab_builder_add(struct fab_builder *b, enum fab_decl_kind kind, const char *name,
			const char *members, const char *spine, const char *where);
/* Notes that file declared switches or domains; refuses a second file doing so. */
int phx_fab_builder_claim(struct fab_builder *b, bool switches, const char *file, char *err,
			  size_t errlen);
int phx_fab_builder_add_source(struct fab_builder *b, const char *name);
int phx_fab_build(struct fab_builder *b, struct phx_fabric **out, char *err, size_t errlen);

/* The parsers, in fabric_tconf.c and fabric_yaml.c. */
int phx_fab_parse_tconf(struct fab_builder *b, const char *name, const char *buf, size_t len,
			char *err, size_t errlen);
/*
 * Reads the 'fabric:' section. *topo_path gets the topology_conf it names
 * (malloc'd, relative paths joined to the YAML's folder), or NULL.
 */
int phx_fab_parse_yaml(struct fab_builder *b, const char *name, const char *buf, size_t len,
		       char **topo_path, char *err, size_t errlen);

#endif

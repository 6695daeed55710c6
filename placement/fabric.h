/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster fabric as placement sees it: nodes under leaf switches under
 * spine switches, optional NVLink domains spanning several nodes of one
 * leaf, and the bandwidth of each level. It comes from Slurm's topology.conf
 * (topology/tree "SwitchName=" lines; topology/block "BlockName=" lines are
 * read as NVLink domains), from the 'fabric:' section of phalanx.yaml or a
 * fabric file of the same shape, or both (the YAML then adds bandwidths and
 * NVLink domains to the switch tree of topology.conf). The format is in
 * phalanx-plan(1).
 *
 * Switches above the spines are not told apart: two leaves under different
 * spines talk at the "core" level. Names are sorted as Slurm sorts host
 * names, so the same files give the same fabric whatever their line order.
 */
#ifndef PHX_FABRIC_H
#define PHX_FABRIC_H

#include <stdbool.h>
#include <stddef.h>

struct phx_ydoc;
struct phx_ynode;

/* The narrowest unit two GPUs share; lower is closer and faster. */
enum phx_level {
	PHX_LEVEL_NODE = 0, /* the same node */
	PHX_LEVEL_NVLINK, /* the same multi-node NVLink domain */
	PHX_LEVEL_LEAF, /* the same leaf switch */
	PHX_LEVEL_SPINE, /* leaves under the same spine switch */
	PHX_LEVEL_CORE, /* anything wider */
	PHX_LEVEL_COUNT,
};

/* Defaults, MB/s per GPU in one direction; documented in phalanx-plan(1). */
#define PHX_BW_NODE_DEFAULT 450000ul /* NVLink 4 through NVSwitch */
#define PHX_BW_NVLINK_DEFAULT 450000ul /* multi-node NVLink */
#define PHX_BW_LEAF_DEFAULT 50000ul /* one 400 Gb/s NIC per GPU */
#define PHX_BW_SPINE_DEFAULT 25000ul /* leaf uplinks 2:1 oversubscribed */
#define PHX_BW_CORE_DEFAULT 12500ul /* and 2:1 again above the spines */
#define PHX_BW_MIN 1000ul /* 1 GB/s */
#define PHX_BW_MAX 100000000ul /* 100 TB/s */

/* Bounds on what a fabric description may hold. */
#define PHX_FABRIC_MAX_NODES (1u << 20)
#define PHX_FABRIC_MAX_SWITCHES (1u << 18)
#define PHX_FABRIC_MAX_DOMAIN_NODES 4096u

struct phx_fabric_node {
	char *name;
	unsigned leaf; /* index in leaves[] */
	int domain; /* index in domains[], -1 when in none */
};

struct phx_fabric {
	char *source; /* the files it came from, for messages */
	struct phx_fabric_node *nodes; /* sorted by phx_hostname_cmp() */
	size_t n_nodes;
	char **leaves; /* sorted; "" for the leaf of a fabric with no switches */
	unsigned *leaf_spine; /* index in spines[] for each leaf */
	size_t n_leaves;
	char **spines; /* sorted; "" collects leaves that have no parent switch */
	size_t n_spines;
	char **domains; /* NVLink domains, sorted */
	size_t n_domains;
	/* MB/s per GPU; node >= nvlink >= leaf >= spine >= core. */
	unsigned long bandwidth[PHX_LEVEL_COUNT];
	/* false when no switch was described: every node is on one leaf. */
	bool has_switches;
};

/* "node", "nvlink", "leaf", "spine", "core". */
const char *phx_level_name(enum phx_level level);
/* PHX_BW_*_DEFAULT, by level. */
const unsigned long *phx_fabric_default_bandwidth(void);

/*
 * Orders host names as Slurm's hostlist sorts them: the part before the
 * trailing digits as text, then the trailing number as a number.
 */
int phx_hostname_cmp(const char *a, const char *b);

/* A host name taken apart once: sorting many compares each name often. */
struct phx_hostname_key {
	const char *name;
	size_t len;
	size_t digits; /* where its trailing digits start */
	size_t number; /* where they start past leading zeros */
};

void phx_hostname_key(const char *name, struct phx_hostname_key *k);
/* phx_hostname_cmp() of the two names. */
int phx_hostname_key_cmp(const struct phx_hostname_key *a, const struct phx_hostname_key *b);

/*
 * Binary search for name among n entries sorted by phx_hostname_cmp();
 * name_at(ctx, i) gives the name of entry i. Its index, or -1.
 */
long phx_hostname_search(const char *name, size_t n,
			 const char *(*name_at)(const void *ctx, size_t i), const void *ctx);

/*
 * Reads a fabric from a YAML file (its 'fabric:' section; other top-level
 * keys are left to their own readers, so phalanx.yaml itself can be given)
 * and/or a Slurm topology.conf; either may be NULL, both NULL gives the
 * default fabric (no switches, default bandwidths). A topology_conf path
 * inside the YAML is relative to the YAML file's folder. Returns 0 with
 * *out set (free with phx_fabric_free), or -1 with "FILE:LINE[:COL]: ..."
 * in err.
 */
int phx_fabric_load(const char *yaml_path, const char *topology_conf, struct phx_fabric **out,
		    char *err, size_t errlen);

/* The same from memory; names are used in messages. Either text may be NULL. */
int phx_fabric_parse(const char *yaml_name, const char *yaml, size_t yaml_len,
		     const char *topo_name, const char *topo, size_t topo_len,
		     struct phx_fabric **out, char *err, size_t errlen);

void phx_fabric_free(struct phx_fabric *fabric);

/* Index of the node in fabric->nodes, or -1. */
long phx_fabric_find(const struct phx_fabric *fabric, const char *name);

#endif

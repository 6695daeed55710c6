/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx config check|show [--effective] [FILE]. check also loads what
 * the plugin and the launcher load besides the file: the fabric (its
 * 'fabric:' section and Slurm's topology.conf), the cluster key, and this
 * node's hwloc XML, and fails where they would. show --effective layers
 * the user's own file over the site's, as phalanx-launch does.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/token.h"
#include "health/health.h"
#include "placement/fabric.h"
#include "placement/topo.h"
#include "cli/commands.h"

const char phx_config_usage[] = "usage: phalanx config check|show [--effective] [FILE] (default "
				"FILE: " PHX_CONF_DEFAULT_PATH ")\n";

/*
 * The fabric the plugin places ranks on and the agents choose partners on
 * (phx_rankmap_place(), the partner copies): 0, or 1 when it is refused.
 */
static int check_fabric(const struct phx_conf *conf)
{
	struct phx_fabric *fabric = NULL;
	char buf[4096], err[1024];
	const char *topo_conf = phx_conf_topology_conf(conf, buf, sizeof(buf));

	if (phx_fabric_load(conf->has_fabric ? conf->source : NULL, topo_conf, &fabric, err,
			    sizeof(err)) < 0) {
		phx_error("the fabric is refused, and with it every step placed by topology: %s",
			  err);
		return 1;
	}
	if (fabric->has_switches || conf->has_fabric)
		printf("phalanx: fabric: %zu nodes, %zu leaf switches, %zu spines, %zu NVLink "
		       "domains (%s)\n",
		       fabric->n_nodes, fabric->n_leaves, fabric->n_spines, fabric->n_domains,
		       fabric->source ? fabric->source : "built-in");
	phx_fabric_free(fabric);
	return 0;
}

/* The cluster key as the plugin loads it (spank/job_token.c): 0, or 1 when it refuses it. */
static int check_key(const struct phx_conf *conf)
{
	struct phx_key key;
	char err[1024];

	if (access(conf->key_file, F_OK) < 0 && errno == ENOENT) {
		phx_warn("no cluster key at %s: jobs get no token, so no checkpoint service; "
			 "create it with 'phalanx keygen' on every node and the daemon's host",
			 conf->key_file);
		return 0;
	}
	if (access(conf->key_file, R_OK) < 0 && geteuid() != 0) {
		phx_warn("cannot read the cluster key %s as this user; run 'phalanx config check' "
			 "as root to check it",
			 conf->key_file);
		return 0;
	}
	if (phx_key_load(conf->key_file, 0, &key, err, sizeof(err)) < 0) {
		phx_error("the plugin refuses the cluster key, and jobs run without a token: %s",
			  err);
		return 1;
	}
	memset(&key, 0, sizeof(key));
	return 0;
}

/* This node's hwloc XML, when placement.hwloc_xml names one: a warning, as in the plugin. */
static void check_hwloc_xml(const struct phx_conf *conf)
{
	char node[256] = "", path[4096], err[1024];
	struct phx_health_ctx ctx = { .node = node };
	struct phx_node_topo *topo = NULL;

	if (!conf->placement.hwloc_xml || !*conf->placement.hwloc_xml)
		return;
	gethostname(node, sizeof(node) - 1);
	if (phx_health_expand(conf->placement.hwloc_xml, &ctx, path, sizeof(path)) < 0) {
		phx_warn("placement.hwloc_xml '%s' does not expand for node %s; GPUs are not bound",
			 conf->placement.hwloc_xml, node);
		return;
	}
	if (phx_topo_load(path, &topo, err, sizeof(err)) < 0) {
		phx_warn("placement.hwloc_xml for this node (%s) does not load, so its GPUs are "
			 "not bound: %s",
			 path, err);
		return;
	}
	phx_topo_free(topo);
}

/* The user's own file over the site's, as phalanx-launch reads them: 0, or 1 when refused. */
static int layer_user(struct phx_conf *conf)
{
	char user[4096], err[1024];

	if (phx_conf_user_path(user, sizeof(user)) < 0 ||
	    phx_conf_load_user(conf, user, err, sizeof(err)) == 0)
		return 0;
	phx_error("%s; phalanx-launch refuses it the same way", err);
	return 1;
}

int phx_cmd_config(int argc, char **argv)
{
	const char *path = PHX_CONF_DEFAULT_PATH;
	bool effective = argc > 2 && !strcmp(argv[2], "--effective");
	struct phx_conf conf;
	char err[512];
	int bad, first = effective ? 3 : 2;

	if (argc < 2 || argc > first + 1 || (strcmp(argv[1], "check") && strcmp(argv[1], "show")) ||
	    (effective && strcmp(argv[1], "show"))) {
		phx_error("%s", phx_config_usage);
		return 2;
	}
	if (argc == first + 1)
		path = argv[first];
	if (phx_conf_load_file(path, &conf, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		phx_conf_free(&conf);
		return 1;
	}
	if (!strcmp(argv[1], "show")) {
		bad = effective ? layer_user(&conf) : 0;
		if (!bad)
			phx_conf_dump(&conf, stdout);
		phx_conf_free(&conf);
		return bad;
	}
	bad = check_fabric(&conf);
	bad |= check_key(&conf);
	check_hwloc_xml(&conf);
	if (!bad)
		printf("phalanx: %s: ok\n", path);
	phx_conf_free(&conf);
	return bad;
}

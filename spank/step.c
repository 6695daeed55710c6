/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "placement/fabric.h"
#include "health/health.h"
#include "common/hostlist.h"
#include "common/log.h"
#include "spank/step.h"

unsigned phx_uniform_tasks_per_node(const char *spec)
{
	unsigned count = 0;
	const char *p = spec;

	while (p && *p) {
		char *end;
		unsigned long n = strtoul(p, &end, 10);

		if (end == p || n == 0 || n > 65535 || (count && n != count))
			return 0;
		count = (unsigned)n;
		p = end;
		if (*p == '(') { /* "(xM)" repeats the same count */
			p = strchr(p, ')');
			if (!p)
				return 0;
			p++;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return 0;
	}
	return count;
}

static void step_fail(struct phx_step *step, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void step_fail(struct phx_step *step, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(step->error, sizeof(step->error), fmt, ap);
	va_end(ap);
}

static int job_env(spank_t sp, const char *name, char *buf, int len)
{
	return spank_getenv(sp, name, buf, len) == ESPANK_SUCCESS ? 0 : -1;
}

int phx_step_node_name(spank_t sp, char *buf, size_t len)
{
	struct phx_hostnames nodes;
	char list[8192], err[256];
	uint32_t node_id;
	int rc = -1;

	/*
	 * Not SLURMD_NODENAME: in a step started from a batch script the job's
	 * environment still holds the batch host's name at this point.
	 */
	if (spank_get_item(sp, S_JOB_NODEID, &node_id) == ESPANK_SUCCESS &&
	    job_env(sp, "SLURM_STEP_NODELIST", list, sizeof(list)) == 0 &&
	    phx_hostlist_expand(list, &nodes, err, sizeof(err)) == 0) {
		if (node_id < nodes.count && strlen(nodes.names[node_id]) < len) {
			strcpy(buf, nodes.names[node_id]);
			rc = 0;
		}
		phx_hostnames_free(&nodes);
	}
	if (rc < 0)
		rc = gethostname(buf, len);
	return rc;
}

static int read_ids(spank_t sp, struct phx_step *step)
{
	if (spank_get_item(sp, S_JOB_ID, &step->job_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step->step_id) != ESPANK_SUCCESS)
		return -1;
	return phx_step_node_name(sp, step->node, sizeof(step->node));
}

static int place_topo(const struct phx_conf *conf, const struct phx_layout *layout,
		      struct phx_hostnames *nodes, unsigned tpn, struct phx_step *step)
{
	char err[1024];
	int rc;

	rc = phx_rankmap_place(conf, layout, nodes->names, nodes->count, tpn, step->node,
			       &step->map, &step->plan, err, sizeof(err));
	for (size_t i = 0; step->plan && i < step->plan->n_warnings; i++)
		phx_warn("%s", step->plan->warnings[i]);
	if (rc < 0)
		step_fail(step, "%s; fix it or use --phx-place=block", err);
	return rc;
}

static int build_map(spank_t sp, const struct phx_conf *conf, const struct phx_job_opts *opts,
		     struct phx_step *step)
{
	struct phx_hostnames nodes = { 0 };
	struct phx_layout layout;
	char buf[8192], err[1024];
	uint32_t world = 0;
	unsigned tpn;
	int rc = -1;

	if (phx_layout_parse(opts->layout, &layout, err, sizeof(err)) < 0) {
		step_fail(step, "--phx-layout: %s", err);
		return -1;
	}
	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &world) != ESPANK_SUCCESS ||
	    phx_layout_resolve(&layout, world, err, sizeof(err)) < 0) {
		step_fail(step, "--phx-layout does not fit the step's %u tasks: %s", world, err);
		return -1;
	}
	if (job_env(sp, "SLURM_STEP_TASKS_PER_NODE", buf, sizeof(buf)) < 0 ||
	    !(tpn = phx_uniform_tasks_per_node(buf))) {
		step_fail(step, "--phx-layout needs the same number of tasks on every node; "
				"use --ntasks-per-node");
		return -1;
	}
	if (job_env(sp, "SLURM_STEP_NODELIST", buf, sizeof(buf)) < 0 ||
	    phx_hostlist_expand(buf, &nodes, err, sizeof(err)) < 0) {
		step_fail(step, "cannot read the step's node list: %s", err);
		return -1;
	}
	if (opts->place == PHX_PLACE_TOPO)
		rc = place_topo(conf, &layout, &nodes, tpn, step);
	else if (phx_rankmap_block(&layout, nodes.names, nodes.count, tpn, step->node, &step->map,
				   err, sizeof(err)) == 0)
		rc = 0;
	else
		step_fail(step, "%s", err);
	phx_hostnames_free(&nodes);
	return rc;
}

/* Binding is best effort: without a topology the ranks still run. */
static void load_topology(const struct phx_conf *conf, struct phx_step *step)
{
	struct phx_health_ctx ctx = { .node = step->node };
	const char *xml = NULL;
	char path[4096], err[1024];

	if (conf->placement.hwloc_xml && *conf->placement.hwloc_xml) {
		if (phx_health_expand(conf->placement.hwloc_xml, &ctx, path, sizeof(path)) < 0) {
			phx_warn("placement.hwloc_xml '%s' does not expand for node %s; "
				 "GPUs are not bound",
				 conf->placement.hwloc_xml, step->node);
			return;
		}
		xml = path;
	}
	if (phx_topo_load(xml, &step->topo, err, sizeof(err)) < 0)
		phx_warn("no node topology, GPUs are not bound to CPUs and NICs: %s", err);
}

void phx_step_prepare(spank_t sp, const struct phx_conf *conf, const struct phx_job_opts *opts,
		      struct phx_step *step)
{
	memset(step, 0, sizeof(*step));
	if (!opts->layout || opts->place == PHX_PLACE_OFF)
		return;
	if (read_ids(sp, step) < 0) {
		step_fail(step, "cannot read the job and step ids from Slurm");
		step->active = true;
		return;
	}
	/* The batch script and the extern step are not ranks of the layout. */
	if (step->step_id == SLURM_BATCH_SCRIPT || step->step_id == SLURM_EXTERN_CONT ||
	    step->step_id == SLURM_INTERACTIVE_STEP)
		return;
	step->active = true;
	step->master_port = phx_master_port(step->job_id, step->step_id);
	if (build_map(sp, conf, opts, step) < 0)
		return;
	load_topology(conf, step);
}

void phx_step_free(struct phx_step *step)
{
	phx_rankmap_free(&step->map);
	phx_plan_free(step->plan);
	phx_topo_free(step->topo);
	memset(step, 0, sizeof(*step));
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/hostlist.h"
#include "common/log.h"
#include "common/requeue.h"

/* Reasons longer than a report holds are cut: the numbers come first. */
__attribute__((format(printf, 2, 3))) static void say(struct phx_requeue_plan *plan,
						      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(plan->why, sizeof(plan->why), fmt, ap);
	va_end(ap);
}

void phx_requeue_plan(const struct phx_requeue_node *nodes, size_t n, size_t need,
		      enum phx_too_few policy, bool *exclude, struct phx_requeue_plan *plan)
{
	size_t usable = 0, capacity = 0, held = 0;

	memset(plan, 0, sizeof(*plan));
	plan->need = need;
	for (size_t i = 0; i < n; i++) {
		exclude[i] = nodes[i].bad;
		usable += nodes[i].usable && !nodes[i].bad;
		held += nodes[i].bad && !nodes[i].usable;
		capacity += !nodes[i].bad;
	}
	plan->usable = usable;
	plan->capacity = capacity;
	if (usable >= need) {
		plan->verdict = PHX_REQUEUE_OK;
		say(plan, "%zu usable node(s) outside the excluded ones, %zu needed", usable, need);
		return;
	}
	/* Slurm keeps the job off its DOWN and drained nodes itself, until they return. */
	if (policy == PHX_TOO_FEW_WAIT && capacity + held >= need) {
		for (size_t i = 0; i < n; i++)
			exclude[i] = nodes[i].bad && nodes[i].usable;
		plan->verdict = PHX_REQUEUE_WAIT;
		plan->capacity = capacity + held;
		say(plan,
		    "%zu usable node(s) left without the bad ones, %zu needed: requeued leaving "
		    "the %zu DOWN or drained one(s) to Slurm; the job waits until enough are back",
		    usable, need, held);
		return;
	}
	plan->verdict = PHX_REQUEUE_DEAD_END;
	say(plan,
	    "without its bad nodes the partition has %zu usable node(s) (%zu once DOWN and "
	    "drained ones return), %zu needed: a requeue could never run. Repair or resume "
	    "nodes, or use fewer nodes or --spares%s",
	    usable, capacity + held, need,
	    policy == PHX_TOO_FEW_STOP && capacity + held >= need
		    ? ", or recovery.too_few_nodes: wait"
		    : "");
}

/* ------------------------------------------------------------------ Slurm's view */

static bool usable_state(uint32_t st)
{
	uint32_t base = st & NODE_STATE_BASE;

	return base != NODE_STATE_DOWN && base != NODE_STATE_FUTURE &&
	       !(st & (NODE_STATE_DRAIN | NODE_STATE_FAIL));
}

static bool listed(const struct phx_hostnames *h, const char *name)
{
	for (size_t i = 0; i < h->count; i++)
		if (!strcmp(h->names[i], name))
			return true;
	return false;
}

static bool in_partitions(const char *parts, const char *name)
{
	size_t k = strlen(name);

	for (const char *p = parts; (p = strstr(p, name)); p += k)
		if ((p == parts || p[-1] == ',') && (p[k] == ',' || !p[k]))
			return true;
	return false;
}

/* The names of every partition of the job's list, without repeats. */
static int partition_nodes(const char *job_parts, struct phx_hostnames *out, char *err,
			   size_t errlen)
{
	partition_info_msg_t *pm = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (slurm_load_partitions(0, &pm, SHOW_ALL) != SLURM_SUCCESS)
		return phx_errf(err, errlen, "slurm_load_partitions: %s", slurm_strerror(errno));
	for (uint32_t p = 0; p < pm->record_count && !rc; p++) {
		partition_info_t *pi = &pm->partition_array[p];
		struct phx_hostnames h;

		if (!pi->name || !pi->nodes || !in_partitions(job_parts, pi->name))
			continue;
		if (phx_hostlist_expand(pi->nodes, &h, err, errlen) < 0) {
			rc = -1;
			break;
		}
		for (size_t i = 0; i < h.count && !rc; i++) {
			char **v;

			if (listed(out, h.names[i]))
				continue;
			v = realloc(out->names, (out->count + 1) * sizeof(*v));
			if (!v || !(v[out->count] = strdup(h.names[i]))) {
				if (v)
					out->names = v;
				rc = phx_errf(err, errlen, "out of memory");
				break;
			}
			out->names = v;
			out->count++;
		}
		phx_hostnames_free(&h);
	}
	slurm_free_partition_info_msg(pm);
	return rc;
}

static int mark_nodes(const struct phx_hostnames *all, const struct phx_hostnames *bad,
		      struct phx_requeue_node *v, char *err, size_t errlen)
{
	node_info_msg_t *nm = NULL;

	if (slurm_load_node(0, &nm, SHOW_ALL) != SLURM_SUCCESS)
		return phx_errf(err, errlen, "slurm_load_node: %s", slurm_strerror(errno));
	for (size_t i = 0; i < all->count; i++) {
		v[i].name = all->names[i];
		v[i].bad = listed(bad, all->names[i]);
		v[i].usable = false;
		for (uint32_t k = 0; k < nm->record_count; k++) {
			node_info_t *ni = &nm->node_array[k];

			if (ni->name && !strcmp(ni->name, all->names[i]))
				v[i].usable = usable_state(ni->node_state);
		}
	}
	slurm_free_node_info_msg(nm);
	return 0;
}

static char *exclude_list(const struct phx_requeue_node *v, const bool *ex, size_t n, char *err,
			  size_t errlen)
{
	char **names = calloc(n ? n : 1, sizeof(*names)), *list = NULL;
	size_t k = 0;

	if (!names)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (ex[i])
			names[k++] = (char *)v[i].name;
	if (k)
		list = phx_hostlist_compress(names, k, err, errlen);
	free(names);
	return list;
}

/* The bad nodes given and those the job excludes already, as one list of names. */
static int bad_names(const char *bad, const char *job_exc, struct phx_hostnames *out, char *err,
		     size_t errlen)
{
	size_t lb = bad ? strlen(bad) : 0, le = job_exc ? strlen(job_exc) : 0;
	char *both = malloc(lb + le + 2);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!both)
		return phx_errf(err, errlen, "out of memory");
	snprintf(both, lb + le + 2, "%s%s%s", lb ? bad : "", lb && le ? "," : "",
		 le ? job_exc : "");
	rc = *both ? phx_hostlist_expand(both, out, err, errlen) : 0;
	free(both);
	return rc;
}

int phx_requeue_check(uint32_t job_id, const char *bad, enum phx_too_few policy,
		      struct phx_requeue_plan *plan, char **exclude, char *err, size_t errlen)
{
	struct phx_hostnames all = { 0 }, badn = { 0 };
	struct phx_requeue_node *v = NULL;
	job_info_msg_t *jm = NULL;
	bool *ex = NULL;
	size_t need;
	int rc = -1;

	*exclude = NULL;
	if (slurm_load_job(&jm, job_id, SHOW_ALL) != SLURM_SUCCESS || !jm->record_count) {
		phx_errf(err, errlen, "slurm_load_job %u: %s", job_id,
			 jm ? "no such job" : slurm_strerror(errno));
		goto out;
	}
	need = jm->job_array[0].num_nodes ? jm->job_array[0].num_nodes : 1;
	if (bad_names(bad, jm->job_array[0].exc_nodes, &badn, err, errlen) < 0 ||
	    partition_nodes(jm->job_array[0].partition ? jm->job_array[0].partition : "", &all, err,
			    errlen) < 0)
		goto out;
	v = calloc(all.count ? all.count : 1, sizeof(*v));
	ex = calloc(all.count ? all.count : 1, sizeof(*ex));
	if (!v || !ex) {
		phx_errf(err, errlen, "out of memory");
		goto out;
	}
	if (mark_nodes(&all, &badn, v, err, errlen) < 0)
		goto out;
	phx_requeue_plan(v, all.count, need, policy, ex, plan);
	*exclude = exclude_list(v, ex, all.count, err, errlen);
	rc = 0;
out:
	free(v);
	free(ex);
	phx_hostnames_free(&all);
	phx_hostnames_free(&badn);
	slurm_free_job_info_msg(jm);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

bool phx_requeue_listed(const char *list, const char *name)
{
	size_t k = strlen(name);

	if (!k)
		return false;
	for (const char *p = list; (p = strstr(p, name)); p += k)
		if ((p == list || p[-1] == ',') && (p[k] == ',' || !p[k]))
			return true;
	return false;
}

/* Slurm's node table, searchable by name: a cluster has 100k nodes. */
struct node_table {
	node_info_msg_t *msg;
	node_info_t **by_name;
	size_t n;
	bool *in_part, *bad;
};

static int by_name(const void *a, const void *b)
{
	return strcmp((*(node_info_t *const *)a)->name, (*(node_info_t *const *)b)->name);
}

static long find_node(const struct node_table *t, const char *name)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(t->by_name[mid]->name, name);

		if (!c)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int table_load(struct node_table *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	if (slurm_load_node(0, &t->msg, SHOW_ALL) != SLURM_SUCCESS)
		return phx_errf(err, errlen, "slurm_load_node: %s", slurm_strerror(errno));
	t->by_name = calloc(t->msg->record_count + 1, sizeof(*t->by_name));
	t->in_part = calloc(t->msg->record_count + 1, sizeof(*t->in_part));
	t->bad = calloc(t->msg->record_count + 1, sizeof(*t->bad));
	if (!t->by_name || !t->in_part || !t->bad)
		return phx_errf(err, errlen, "out of memory");
	for (uint32_t i = 0; i < t->msg->record_count; i++)
		if (t->msg->node_array[i].name)
			t->by_name[t->n++] = &t->msg->node_array[i];
	qsort(t->by_name, t->n, sizeof(*t->by_name), by_name);
	return 0;
}

static void table_free(struct node_table *t)
{
	free(t->by_name);
	free(t->in_part);
	free(t->bad);
	slurm_free_node_info_msg(t->msg);
}

/* Sets flag[] for every node of the host list expr that Slurm knows. */
static int mark(struct node_table *t, const char *expr, bool *flag, char *err, size_t errlen)
{
	struct phx_hostnames h;

	if (!expr || !*expr)
		return 0;
	if (phx_hostlist_expand(expr, &h, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < h.count; i++) {
		long k = find_node(t, h.names[i]);

		if (k >= 0)
			flag[k] = true;
	}
	phx_hostnames_free(&h);
	return 0;
}

/* The nodes of the job's partitions (job_parts: "a,b") in the table. */
static int mark_partitions(struct node_table *t, const char *job_parts, char *err, size_t errlen)
{
	partition_info_msg_t *pm = NULL;
	int rc = 0;

	if (slurm_load_partitions(0, &pm, SHOW_ALL) != SLURM_SUCCESS)
		return phx_errf(err, errlen, "slurm_load_partitions: %s", slurm_strerror(errno));
	for (uint32_t p = 0; p < pm->record_count && !rc; p++) {
		partition_info_t *pi = &pm->partition_array[p];

		if (pi->name && phx_requeue_listed(job_parts, pi->name))
			rc = mark(t, pi->nodes, t->in_part, err, errlen);
	}
	slurm_free_partition_info_msg(pm);
	return rc;
}

/*
 * The nodes the job asked for. A running job's num_nodes is what it holds
 * now: with --no-kill Slurm removes a failed node from the job, but a
 * requeue asks for the request again (its TRES "node=N").
 */
static size_t requested_nodes(const job_info_t *ji)
{
	const char *t = ji->tres_req_str ? strstr(ji->tres_req_str, "node=") : NULL;
	unsigned long n = 0;

	if (t && (t == ji->tres_req_str || t[-1] == ','))
		n = strtoul(t + 5, NULL, 10);
	if (n < ji->num_nodes)
		n = ji->num_nodes;
	return n ? n : 1;
}

/* Plans over the table's partition nodes; *exclude gets the list to exclude. */
static int plan_table(const struct node_table *t, size_t need, enum phx_too_few policy,
		      struct phx_requeue_plan *plan, char **exclude, char *err, size_t errlen)
{
	struct phx_requeue_node *v = calloc(t->n + 1, sizeof(*v));
	bool *ex = calloc(t->n + 1, sizeof(*ex));
	char **names = calloc(t->n + 1, sizeof(*names));
	size_t n = 0, k = 0;
	int rc = -1;

	if (!v || !ex || !names) {
		phx_errf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < t->n; i++) {
		if (!t->in_part[i])
			continue;
		v[n].name = t->by_name[i]->name;
		v[n].usable = usable_state(t->by_name[i]->node_state);
		v[n++].bad = t->bad[i];
	}
	phx_requeue_plan(v, n, need, policy, ex, plan);
	for (size_t i = 0; i < n; i++)
		if (ex[i])
			names[k++] = (char *)v[i].name;
	rc = 0;
	if (k && !(*exclude = phx_hostlist_compress(names, k, err, errlen)))
		rc = -1;
out:
	free(v);
	free(ex);
	free(names);
	return rc;
}

int phx_requeue_check(uint32_t job_id, const char *bad, size_t need_nodes, enum phx_too_few policy,
		      struct phx_requeue_plan *plan, char **exclude, char *err, size_t errlen)
{
	struct node_table t = { 0 };
	job_info_msg_t *jm = NULL;
	job_info_t *ji;
	int rc = -1;

	*exclude = NULL;
	if (slurm_load_job(&jm, job_id, SHOW_ALL) != SLURM_SUCCESS || !jm->record_count) {
		phx_errf(err, errlen, "slurm_load_job %u: %s", job_id,
			 jm ? "no such job" : slurm_strerror(errno));
		goto out;
	}
	ji = &jm->job_array[0];
	if (table_load(&t, err, errlen) < 0 ||
	    mark_partitions(&t, ji->partition ? ji->partition : "", err, errlen) < 0 ||
	    mark(&t, bad, t.bad, err, errlen) < 0 ||
	    mark(&t, ji->exc_nodes, t.bad, err, errlen) < 0)
		goto out;
	rc = plan_table(&t, need_nodes ? need_nodes : requested_nodes(ji), policy, plan, exclude,
			err, errlen);
out:
	table_free(&t);
	slurm_free_job_info_msg(jm);
	return rc;
}

time_t phx_requeue_begin_time(void)
{
	return time(NULL) + 1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Slurm calls of recovery: the job's state, its nodes' states, drain,
 * down, resume, requeue, and the fix that makes a requeued job eligible at
 * once on other nodes. Slurm holds a requeued job for about two minutes
 * (its begin time is set 121 s ahead) and refuses an exclusion list while
 * the job runs, so the exclusion and a begin time of now are set once the
 * job is pending again and done completing: the end of the requeue sets
 * the begin time once more.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "checkpoint/ckptd/ckptd_slurm.h"
#include "checkpoint/ckptd/recovery_policy.h"
#include "common/log.h"
#include "common/requeue.h"
#include "common/slurm_compat.h"

static int fail(char *err, size_t errlen, const char *what)
{
	return phx_errf(err, errlen, "%s: %s", what, slurm_strerror(errno));
}

/* The job's record (freed with *resp), or NULL with the reason. */
static job_info_t *load_job(uint32_t id, job_info_msg_t **resp, char *err, size_t errlen)
{
	if (slurm_load_job(resp, id, SHOW_ALL) != SLURM_SUCCESS) {
		fail(err, errlen, "slurm_load_job");
		return NULL;
	}
	if (!(*resp)->record_count) {
		slurm_free_job_info_msg(*resp);
		phx_errf(err, errlen, "Slurm does not know job %u", id);
		return NULL;
	}
	return &(*resp)->job_array[0];
}

int ckptd_slurm_job(uint32_t id, struct ckptd_sjob *out, char *err, size_t errlen)
{
	job_info_msg_t *resp = NULL;
	job_info_t *ji;

	memset(out, 0, sizeof(*out));
	ji = load_job(id, &resp, err, errlen);
	if (!ji)
		return -1;
	out->state = (int)(ji->job_state & JOB_STATE_BASE);
	out->completing = !!(ji->job_state & JOB_COMPLETING);
	out->restarts = ji->restart_cnt;
	out->start = (double)ji->start_time;
	out->eligible = (double)ji->eligible_time;
	snprintf(out->nodes, sizeof(out->nodes), "%s", ji->nodes ? ji->nodes : "");
	slurm_free_job_info_msg(resp);
	return 0;
}

int ckptd_slurm_here(void)
{
	const char *conf = getenv("SLURM_CONF");

	if (access(conf && *conf ? conf : "/etc/slurm/slurm.conf", R_OK) < 0)
		return 0;
	phx_slurm_init();
	return 1;
}

int ckptd_slurm_alloc(uint32_t id, uint32_t *uid, int *running, uint32_t *num_nodes, char **nodes,
		      char *err, size_t errlen)
{
	job_info_msg_t *resp = NULL;
	job_info_t *ji;

	*nodes = NULL;
	ji = load_job(id, &resp, err, errlen);
	if (!ji)
		return -1;
	*uid = ji->user_id;
	*running = (ji->job_state & JOB_STATE_BASE) == JOB_RUNNING;
	*num_nodes = ji->num_nodes;
	*nodes = strdup(ji->nodes ? ji->nodes : "");
	slurm_free_job_info_msg(resp);
	if (!*nodes)
		return phx_errf(err, errlen, "out of memory");
	return 0;
}

int ckptd_slurm_listed(const char *hostlist, const char *node)
{
	phx_slurm_hostlist_t hl;
	int found;

	if (!*hostlist)
		return 0;
	hl = slurm_hostlist_create(hostlist);
	if (!hl)
		return 0;
	found = slurm_hostlist_find(hl, node) >= 0;
	slurm_hostlist_destroy(hl);
	return found;
}

int ckptd_slurm_bad_nodes(const char *hostlist, void (*fn)(void *arg, const char *node), void *arg,
			  char *err, size_t errlen)
{
	node_info_msg_t *resp = NULL;
	phx_slurm_hostlist_t hl;

	if (!*hostlist)
		return 0;
	hl = slurm_hostlist_create(hostlist);
	if (!hl)
		return phx_errf(err, errlen, "Slurm cannot read the node list \"%s\"", hostlist);
	if (slurm_load_node(0, &resp, SHOW_ALL) != SLURM_SUCCESS) {
		slurm_hostlist_destroy(hl);
		return fail(err, errlen, "slurm_load_node");
	}
	for (uint32_t i = 0; i < resp->record_count; i++) {
		node_info_t *n = &resp->node_array[i];
		uint32_t st = n->node_state;

		if (!n->name || slurm_hostlist_find(hl, n->name) < 0)
			continue;
		/* A drain alone lets the job finish: an administrator's intent, not a fault. */
		if ((st & NODE_STATE_BASE) == NODE_STATE_DOWN || (st & NODE_STATE_FAIL))
			fn(arg, n->name);
	}
	slurm_free_node_info_msg(resp);
	slurm_hostlist_destroy(hl);
	return 0;
}

static int update_node(const char *node, uint32_t state, const char *reason, char *err,
		       size_t errlen)
{
	update_node_msg_t msg;

	slurm_init_update_node_msg(&msg);
	msg.node_names = (char *)node;
	msg.node_state = state;
	msg.reason = (char *)reason;
	if (slurm_update_node(&msg) != SLURM_SUCCESS)
		return fail(err, errlen, "slurm_update_node");
	return 0;
}

int ckptd_slurm_node_down(const char *node, const char *reason, char *err, size_t errlen)
{
	return update_node(node, NODE_STATE_DOWN, reason, err, errlen);
}

int ckptd_slurm_node_resume(const char *node, char *err, size_t errlen)
{
	return update_node(node, NODE_RESUME, NULL, err, errlen);
}

int ckptd_slurm_node_reason(const char *node, char *out, size_t len, char *err, size_t errlen)
{
	node_info_msg_t *resp = NULL;

	out[0] = '\0';
	if (slurm_load_node_single(&resp, (char *)node, SHOW_ALL) != SLURM_SUCCESS)
		return fail(err, errlen, "slurm_load_node_single");
	if (resp->record_count && resp->node_array[0].reason)
		snprintf(out, len, "%s", resp->node_array[0].reason);
	slurm_free_node_info_msg(resp);
	return 0;
}

int ckptd_slurm_requeue(uint32_t id, char *err, size_t errlen)
{
	if (slurm_requeue(id, 0) != SLURM_SUCCESS)
		return fail(err, errlen, "slurm_requeue");
	return 0;
}

int ckptd_slurm_fix(uint32_t id, const char *exclude, char *err, size_t errlen)
{
	job_desc_msg_t desc;

	slurm_init_job_desc_msg(&desc);
	desc.job_id = id;
	desc.begin_time = phx_requeue_begin_time();
	if (exclude && *exclude)
		desc.exc_nodes = (char *)exclude;
	if (slurm_update_job(&desc) != SLURM_SUCCESS)
		return fail(err, errlen, "slurm_update_job");
	return 0;
}

int ckptd_slurm_comment(uint32_t id, const char *reason, char *err, size_t errlen)
{
	job_desc_msg_t desc;
	char text[PHX_RECOVERY_REASON_MAX + 16];

	slurm_init_job_desc_msg(&desc);
	desc.job_id = id;
	snprintf(text, sizeof(text), "phalanx: %s", reason);
	desc.admin_comment = text;
	if (slurm_update_job(&desc) != SLURM_SUCCESS)
		return fail(err, errlen, "slurm_update_job");
	return 0;
}

int ckptd_slurm_cancel(uint32_t id, char *err, size_t errlen)
{
	if (slurm_kill_job(id, SIGKILL, 0) != SLURM_SUCCESS)
		return fail(err, errlen, "slurm_kill_job");
	return 0;
}

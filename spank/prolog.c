/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The job prolog runs in "slurmstepd spank prolog" (S_CTX_JOB_SCRIPT), as
 * root, before the first step of a job starts on the node. A node that
 * fails a health check fails the prolog: Slurm then drains it and requeues
 * the job onto other nodes. Before that, the drain reason is set to
 * Phalanx's own, so that 'sinfo -R' tells the admin what is broken rather
 * than Slurm's generic prolog error.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/spank.h>

#include "common/drain.h"
#include "health/health.h"
#include "common/log.h"
#include "spank/prolog.h"

#define REASON_MAX PHX_DRAIN_REASON_MAX

/*
 * The prolog's environment is this process's own (spank_getenv answers
 * only in slurmstepd's remote context), and slurmd, not the user, set it.
 */
static const char *prolog_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static void job_ctx(spank_t sp, struct phx_health_ctx *ctx, char *host, size_t hostlen)
{
	uint32_t job = 0;
	uid_t uid = 0;

	memset(ctx, 0, sizeof(*ctx));
	if (spank_get_item(sp, S_JOB_ID, &job) == ESPANK_SUCCESS)
		ctx->job_id = job;
	if (spank_get_item(sp, S_JOB_UID, &uid) == ESPANK_SUCCESS) {
		ctx->uid = uid;
		ctx->have_uid = true;
	}
	ctx->job_gpus = prolog_env("SLURM_JOB_GPUS");
	ctx->node = prolog_env("SLURMD_NODENAME");
	if (!ctx->node && gethostname(host, hostlen) == 0) {
		host[hostlen - 1] = '\0';
		host[strcspn(host, ".")] = '\0';
		ctx->node = host;
	}
}

static void log_report(const struct phx_health_report *rep, const struct phx_health_ctx *ctx)
{
	for (size_t i = 0; i < rep->n; i++) {
		const struct phx_health_result *r = &rep->results[i];

		/* The format admins grep for; slurm_error adds "error: " only. */
		if (r->status == PHX_HEALTH_FAIL)
			slurm_error("phalanx: health: %s: %s; %s", r->name, r->reason, r->hint);
		else
			phx_debug("health: %s: %s%s", r->name,
				  r->status == PHX_HEALTH_SKIP ? "skipped: " : "", r->reason);
	}
	if (!rep->failed)
		phx_debug("health: job %u on %s: all checks passed", (unsigned)ctx->job_id,
			  ctx->node ? ctx->node : "this node");
}

/* Slurm drains the node anyway when the prolog fails; this sets the reason. */
static void set_drain_reason(const char *node, const char *reason)
{
	char err[256];

	if (phx_slurm_drain(node, reason, err, sizeof(err)) < 0)
		phx_warn("health: setting the drain reason of %s failed: %s; Slurm drains the "
			 "node with its own reason",
			 node, err);
	else
		phx_info("health: drained %s: %s", node, reason);
}

int phx_prolog_bad_config(void)
{
	const char *node = prolog_env("SLURMD_NODENAME");

	if (node)
		set_drain_reason(node, "phalanx: health: phalanx.yaml or the plugstack.conf "
				       "arguments do not load; see the slurmd log");
	return -1;
}

int phx_prolog_run(spank_t sp, const struct phx_conf *conf)
{
	struct phx_health_report rep;
	struct phx_health_ctx ctx;
	char host[256], reason[REASON_MAX];
	const struct phx_health_result *first = NULL;

	if (!conf->health.enabled) {
		phx_debug("health: checks are off (health.enabled: false)");
		return 0;
	}
	job_ctx(sp, &ctx, host, sizeof(host));
	phx_health_run(conf, &ctx, &rep);
	log_report(&rep, &ctx);
	if (!rep.failed)
		return 0;
	for (size_t i = 0; i < rep.n && !first; i++)
		first = rep.results[i].status == PHX_HEALTH_FAIL ? &rep.results[i] : NULL;
	if (snprintf(reason, sizeof(reason), "phalanx: health: %s: %s%s", first->name,
		     first->reason,
		     rep.failed > 1 ? " (and more in the slurmd log)" : "") >= (int)sizeof(reason))
		phx_debug("health: the drain reason is cut to %zu bytes", sizeof(reason) - 1);
	if (conf->health.drain_on_failure && ctx.node)
		set_drain_reason(ctx.node, reason);
	return -1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's decisions, free of system state: which nodes a step runs
 * on, whether a failure is the same one again, and what to do after a
 * step ended. Node failures relaunch (on spares first, then shrinking dp
 * with --elastic, else requeue); worker failures relaunch on the same
 * nodes until the same failure came K times in a row.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "placement/layout.h"
#include "common/log.h"
#include "launcher/launch.h"
#include "launcher/result.h"
#include "launcher/driver/driver_plan.h"

size_t phx_drv_pick(const bool *bad, size_t n, unsigned want, size_t *idx)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < want; i++) {
		if (!bad[i])
			idx[k++] = i;
	}
	return k;
}

size_t phx_drv_healthy(const bool *bad, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += !bad[i];
	return k;
}

void phx_drv_signature(const struct phx_result *r, char *buf, size_t len)
{
	/* Where the step is unknown (no heartbeats), the message alone decides. */
	snprintf(buf, len, "%s @ step %" PRIu64, r->msg[0] ? r->msg : "(no message)", r->step);
}

unsigned phx_drv_elastic(const char *layout, unsigned healthy, unsigned nproc, char *buf,
			 size_t len, char *err, size_t errlen)
{
	struct phx_layout base;

	if (phx_layout_parse(layout ? layout : "dp=*", &base, err, errlen) < 0)
		return 0;
	if (base.star >= 0 && base.star != PHX_DIM_DP) {
		phx_errf(err, errlen, "the layout '%s' solves %s from the node count, not dp",
			 layout, phx_dim_name((enum phx_dim)base.star));
		return 0;
	}
	base.size[PHX_DIM_DP] = 0;
	base.star = PHX_DIM_DP;
	for (unsigned m = healthy; m >= 1; m--) {
		struct phx_layout l = base;
		char e[256];

		if (phx_layout_resolve(&l, (unsigned long)m * nproc, e, sizeof(e)) < 0)
			continue;
		phx_layout_format(&l, buf, len);
		return m;
	}
	phx_errf(err, errlen,
		 "no data-parallel degree fits the layout '%s' on %u node(s) of %u worker(s)",
		 layout ? layout : "dp=*", healthy, nproc);
	return 0;
}

/* A node went bad: relaunch on healthy nodes, shrink, or requeue. */
void phx_drv_fit(struct phx_drv_state *s, struct phx_drv_decision *d)
{
	size_t healthy = phx_drv_healthy(s->bad, s->nalloc);
	char spec[256], err[256];
	unsigned m;

	if (healthy >= s->want) {
		d->action = PHX_DRV_RELAUNCH;
		snprintf(d->why, sizeof(d->why), "%zu healthy node(s) left, %u needed", healthy,
			 s->want);
		return;
	}
	if (!s->elastic) {
		d->action = PHX_DRV_REQUEUE;
		d->exit_code = PHX_EXIT_REQUEUE;
		snprintf(d->why, sizeof(d->why),
			 "only %zu healthy node(s) left of %zu, %u needed, and no --elastic",
			 healthy, s->nalloc, s->want);
		return;
	}
	m = phx_drv_elastic(s->layout, (unsigned)healthy, s->nproc, spec, sizeof(spec), err,
			    sizeof(err));
	if (!m) {
		d->action = PHX_DRV_REQUEUE;
		d->exit_code = PHX_EXIT_REQUEUE;
		snprintf(d->why, sizeof(d->why), "only %zu healthy node(s) left and %s", healthy,
			 err);
		return;
	}
	d->action = PHX_DRV_RELAUNCH;
	snprintf(d->why, sizeof(d->why), "--elastic: %u node(s) instead of %u, layout %s", m,
		 s->want, spec);
	s->want = m;
	snprintf(s->layout_now, sizeof(s->layout_now), "%s", spec);
}

/* Workers gave up: again on the same nodes, unless it is the same failure K times. */
static void after_worker_failure(struct phx_drv_state *s, const struct phx_result *r,
				 struct phx_drv_decision *d)
{
	char sig[PHX_DRV_SIG_MAX];

	phx_drv_signature(r, sig, sizeof(sig));
	if (s->same_count && !strcmp(sig, s->last_sig)) {
		s->same_count++;
	} else {
		snprintf(s->last_sig, sizeof(s->last_sig), "%s", sig);
		s->same_count = 1;
	}
	if (s->same_count >= s->same_limit) {
		d->action = PHX_DRV_REPEATED;
		d->exit_code = PHX_EXIT_REPEATED;
		snprintf(d->why, sizeof(d->why),
			 "the same failure %u time(s) in a row (rank %ld on %.100s: %.300s): a "
			 "deterministic error, not retried",
			 s->same_count, r->rank, r->node, sig);
		return;
	}
	d->action = PHX_DRV_RELAUNCH;
	snprintf(d->why, sizeof(d->why), "workers failed (rank %ld on %.100s: %.300s), %u of %u",
		 r->rank, r->node, sig, s->same_count, s->same_limit);
}

void phx_drv_decide(struct phx_drv_state *s, const struct phx_drv_outcome *o,
		    struct phx_drv_decision *d)
{
	memset(d, 0, sizeof(*d));
	d->exit_code = o->status;
	if (o->status == 0) {
		d->action = PHX_DRV_DONE;
		snprintf(d->why, sizeof(d->why), "the step succeeded");
		return;
	}
	if (o->stopped) {
		d->action = PHX_DRV_STOP;
		snprintf(d->why, sizeof(d->why), "stopped by a signal");
		return;
	}
	if (o->new_bad) {
		phx_drv_fit(s, d);
	} else if (o->result) {
		after_worker_failure(s, o->result, d);
	} else if (o->status == 2) {
		/* The agents refused their options or phalanx.yaml: it would again. */
		d->action = PHX_DRV_STOP;
		snprintf(d->why, sizeof(d->why), "the agents refused their options (exit 2)");
		return;
	} else {
		d->action = PHX_DRV_RELAUNCH;
		snprintf(d->why, sizeof(d->why),
			 "the step failed (exit %d) without a node or "
			 "worker cause",
			 o->status);
	}
	if (d->action != PHX_DRV_RELAUNCH)
		return;
	if (s->relaunches >= s->max_relaunches) {
		d->action = PHX_DRV_STOP;
		d->exit_code = o->status ? o->status : 1;
		snprintf(d->why, sizeof(d->why), "%u relaunch(es) made, --max-relaunches %u",
			 s->relaunches, s->max_relaunches);
		return;
	}
	s->relaunches++;
	d->nodes = s->want;
}

bool phx_drv_preempted(bool signalled, int status)
{
	return signalled && status == PHX_EXIT_REQUEUE;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's decisions (driver_plan.c), free of system state so they
 * are unit tested: which nodes a step runs on, whether a failure is the
 * same one again, what to do after a step ended.
 */
#ifndef PHX_LAUNCHER_DRIVER_DRIVER_PLAN_H
#define PHX_LAUNCHER_DRIVER_DRIVER_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/result.h"

enum phx_drv_action {
	PHX_DRV_DONE = 0, /* the step succeeded */
	PHX_DRV_RELAUNCH, /* run the step again on d->nodes nodes */
	PHX_DRV_REPEATED, /* the same failure K times: stop */
	PHX_DRV_REQUEUE, /* too few healthy nodes */
	PHX_DRV_STOP, /* give up with the step's exit code */
};

#define PHX_DRV_SIG_MAX (PHX_RESULT_MSG_MAX + 64)

/* What the driver carries from one attempt to the next. */
struct phx_drv_state {
	size_t nalloc; /* nodes of the allocation */
	bool *bad; /* [nalloc]: excluded for the rest of the job */
	unsigned want; /* nodes a step runs on */
	unsigned nproc; /* workers per node, for --elastic */
	const char *layout; /* the user's layout spec; NULL: dp=* */
	char layout_now[256]; /* the spec the agents get now; "" = the user's */
	bool elastic;
	unsigned relaunches, max_relaunches;
	unsigned same_limit; /* K */
	char last_sig[PHX_DRV_SIG_MAX];
	unsigned same_count;
};

/* How one step ended, as seen by the driver. */
struct phx_drv_outcome {
	int status; /* srun's exit code; 128+N when killed by signal N */
	unsigned new_bad; /* nodes marked bad in state.bad during this step */
	bool stopped; /* the driver was told to stop (TERM, INT) */
	const struct phx_result *result; /* the agents' result line, NULL */
};

struct phx_drv_decision {
	enum phx_drv_action action;
	int exit_code; /* for REPEATED, REQUEUE, STOP */
	unsigned nodes; /* for RELAUNCH: nodes of the next step */
	char why[1024];
};

/*
 * The first `want` nodes of the allocation that are not bad, in
 * allocation order, their indices in idx[]. Returns how many there were
 * (less than want when too few are healthy).
 */
size_t phx_drv_pick(const bool *bad, size_t n, unsigned want, size_t *idx);
size_t phx_drv_healthy(const bool *bad, size_t n);

/* "MESSAGE @ step S": what makes two failures the same. */
void phx_drv_signature(const struct phx_result *r, char *buf, size_t len);

/*
 * The largest node count m <= healthy for which the layout resolves with
 * m * nproc ranks when only dp changes; its spec into buf. 0: none does
 * (or the layout's '*' is not dp), err says why.
 */
unsigned phx_drv_elastic(const char *layout, unsigned healthy, unsigned nproc, char *buf,
			 size_t len, char *err, size_t errlen);

/* Whether a step on the healthy nodes can start (RELAUNCH) or the job must shrink or requeue. */
void phx_drv_fit(struct phx_drv_state *s, struct phx_drv_decision *d);

/* What to do after a step ended; updates s (counters, want, layout_now). */
void phx_drv_decide(struct phx_drv_state *s, const struct phx_drv_outcome *o,
		    struct phx_drv_decision *d);

/*
 * The preemption signal reached the driver: whether the step ended
 * because the agents were preempted (they exit PHX_EXIT_REQUEUE), so the
 * job is requeued rather than relaunched.
 */
bool phx_drv_preempted(bool signalled, int status);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The preemption signal (--preempt-signal, as sbatch --signal=USR1@120
 * sends it before the end of a job's time): the workers are asked to save
 * now through the heartbeat page's save_request counter, which
 * phx_should_save() compares with the value it saw last, and get
 * --preempt-grace seconds to save and exit. Then they are stopped, and
 * once every node's workers are gone every agent exits with
 * PHX_EXIT_REQUEUE, for the job to be requeued. Restarts are off
 * meanwhile: a worker that exits after saving has not failed.
 */
#include "config.h"

#include <signal.h>
#include <stdatomic.h>

#include "checkpoint/proto/heartbeat.h"
#include "common/clock.h"
#include "common/log.h"
#include "launcher/options.h"
#include "launcher/restart.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_preempt.h"
#include "launcher/agent/agent_workers.h"

void phx_agent_preempt(struct phx_agent *a, bool by_signal)
{
	struct phx_hb_header *h = a->hb;
	uint64_t n;

	a->preempting = true;
	n = atomic_fetch_add_explicit(&h->save_request, 1, memory_order_release) + 1;
	/* Another agent got the signal: these workers see it the same way. */
	if (!by_signal && a->o->preempt_sig)
		phx_agent_forward(a, a->o->preempt_sig);
	a->preempt_deadline =
		phx_now_ns(CLOCK_MONOTONIC) + (uint64_t)a->o->preempt_grace_s * 1000000000ull;
	a->local.state = PHX_NODE_PREEMPTING;
	phx_warn("preemption%s: asked the %u workers on %s to save now (save request %llu); "
		 "they are stopped in %d s (--preempt-grace) unless they exit first",
		 by_signal ? " signal" : " signal on another node", phx_agent_running(a), a->node,
		 (unsigned long long)n, a->o->preempt_grace_s);
}

void phx_agent_preempt_check(struct phx_agent *a)
{
	if (a->local.state != PHX_NODE_PREEMPTING)
		return;
	if (phx_agent_running(a) && phx_now_ns(CLOCK_MONOTONIC) >= a->preempt_deadline) {
		phx_warn("%u workers on %s still run %d s after the preemption signal; stopping "
			 "them (raise --preempt-grace if saving takes longer)",
			 phx_agent_running(a), a->node, a->o->preempt_grace_s);
		phx_agent_stop_all(a);
	}
	if (!phx_agent_running(a)) {
		phx_info("the workers on %s have stopped after the preemption signal", a->node);
		a->local.state = PHX_NODE_PREEMPTED;
	}
}

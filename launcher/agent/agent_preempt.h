/* SPDX-License-Identifier: Apache-2.0 */
/* The preemption signal (--preempt-signal) in the agent (agent_preempt.c). */
#ifndef PHX_LAUNCHER_AGENT_AGENT_PREEMPT_H
#define PHX_LAUNCHER_AGENT_AGENT_PREEMPT_H

#include <stdbool.h>

struct phx_agent;

/*
 * Preemption: asks this node's workers to save (the heartbeat page's
 * save_request, and the signal when it did not come to this agent
 * itself), then gives them --preempt-grace seconds to exit.
 */
void phx_agent_preempt(struct phx_agent *a, bool by_signal);
/* Stops the workers after the grace; the node is PREEMPTED once they are gone. */
void phx_agent_preempt_check(struct phx_agent *a);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The workers as processes (agent_spawn.c): started each in its own
 * process group, their output forwarded, stopped with whatever they left
 * behind; and the evidence of a hung one (agent_evidence.c).
 */
#ifndef PHX_LAUNCHER_AGENT_AGENT_WORKERS_H
#define PHX_LAUNCHER_AGENT_AGENT_WORKERS_H

#include <stdbool.h>

struct phx_agent;
struct phx_worker;

int phx_agent_spawn_all(struct phx_agent *a);
/* TERM (and CONT) to every worker's group, --term-timeout, KILL; reaps all, orphans too. */
void phx_agent_stop_all(struct phx_agent *a);
unsigned phx_agent_running(const struct phx_agent *a);
void phx_agent_close_outputs(struct phx_agent *a);
void phx_agent_forward(struct phx_agent *a, int sig);

/* One worker's start in its slot, with the role's command and environment. */
int phx_agent_spawn_one(struct phx_agent *a, struct phx_worker *w);
/* TERM, --term-timeout, KILL to one worker's process group; reaps it. */
void phx_agent_stop_one(struct phx_agent *a, struct phx_worker *w);
/* Recomputes the local report from the workers' states. */
void phx_agent_update_report(struct phx_agent *a);

/* Hang evidence of a worker, printed before it is killed. */
void phx_agent_evidence(struct phx_agent *a, const struct phx_worker *w);

#endif

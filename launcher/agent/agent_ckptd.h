/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's link to phalanx-ckptd (agent_ckptd.c): one client per
 * agent, driven from its main loop, registered with the job; heartbeats
 * with the node's newest step and recovery reports. Nothing here blocks:
 * while the daemon is away training goes on and reports wait in the
 * client's queue. Without a daemon address or a job token it does nothing.
 */
#ifndef PHX_LAUNCH_AGENT_CKPTD_H
#define PHX_LAUNCH_AGENT_CKPTD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct phx_agent;
struct phx_report;

/*
 * 0; a daemon that cannot be reached is not an error. The link registers
 * with the agent's main loop (phx_agent_pump_add), which then drives it.
 */
int phx_agent_ckptd_setup(struct phx_agent *a);
void phx_agent_ckptd_fini(struct phx_agent *a);
/* Report kind ("crash", "hang", "straggler", "restart", "done"); reason may be NULL. */
void phx_agent_ckptd_report(struct phx_agent *a, const char *kind, uint64_t value,
			    const char *reason);
/* A generation committed by the agents in tier t (agent_ckpt.c): prepared once. */
struct ck_gen;
void phx_agent_ckptd_ckpt_commit(struct phx_agent *a, const struct ck_gen *g, int t);
/*
 * The root-cause failure r, found on this agent: "crash" (its signature,
 * phx_crash_signature) or "hang", then "restart" when the job restarts.
 */
void phx_agent_ckptd_report_failure(struct phx_agent *a, const struct phx_report *r,
				    bool restarting);
/* A fatal Xid on this node (agent_xid.c), as the node's fault. */
void phx_agent_ckptd_xid(struct phx_agent *a, unsigned code, const char *reason);
/* A straggler on node (the agent of node 0 reports it): the time its peers lost. */
void phx_agent_ckptd_straggler(struct phx_agent *a, const char *node, uint64_t lost_us,
			       const char *reason);
/*
 * Microseconds a straggler's peers waited on it in its window: its extra
 * time per step over the median, times its steps; 0 when not slower. Pure.
 */
uint64_t phx_straggler_lost_us(uint64_t step_ns, uint64_t median_ns, uint64_t steps);
/* The newest step any worker of this node reported on the heartbeat page. */
uint64_t phx_agent_ckptd_newest_step(const struct phx_agent *a);

/*
 * The signature of a crash, the same for the same failure: the exception's
 * name when the message starts with one ("ValueError: ..."), else the
 * message's first line with digits folded, else how the worker ended
 * ("exit 3", "signal 9"), then "@step N". Pure; buf is always terminated.
 */
void phx_crash_signature(const char *msg, const char *how, uint64_t step, char *buf, size_t len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The restart protocol (restart.c): each agent's report in an agreement
 * round, and the decision every agent takes from all of them. Pure.
 */
#ifndef PHX_LAUNCHER_RESTART_H
#define PHX_LAUNCHER_RESTART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/role.h"

enum phx_node_state {
	PHX_NODE_RUNNING = 0,
	PHX_NODE_DONE, /* every local worker exited 0 */
	PHX_NODE_FAILED, /* a local worker failed or hung */
	PHX_NODE_SHUTDOWN, /* the agent was told to stop (TERM, INT) */
	PHX_NODE_PREEMPTING, /* asked to save (the preemption signal); workers still run */
	PHX_NODE_PREEMPTED, /* after the preemption signal its workers are gone */
};

enum phx_fail_kind { PHX_FAIL_NONE = 0, PHX_FAIL_EXIT, PHX_FAIL_SIGNAL, PHX_FAIL_HANG };

/* One agent's state in one agreement round. */
struct phx_report {
	unsigned role; /* index of the role the agent runs */
	/* group roles: restart count of the role; self roles: of the failed worker */
	unsigned epoch;
	enum phx_node_state state;
	uint64_t fail_ns; /* CLOCK_REALTIME of its first failure (hang: the last beat) */
	long fail_rank; /* global rank, -1 */
	enum phx_fail_kind kind;
	int code; /* exit status or signal */
	/*
	 * A hang of a worker that sleeps, likely waiting in a collective for
	 * the real culprit: ordered after every other failure.
	 */
	bool waiting;
	/* Offset of the step rates in the parsed string (phx_rates_parse), 0: none. */
	size_t rates_at;
};

enum phx_action {
	PHX_ACT_CONTINUE = 0,
	PHX_ACT_RESTART,
	PHX_ACT_GIVE_UP,
	PHX_ACT_SUCCESS,
	PHX_ACT_SHUTDOWN,
	PHX_ACT_PREEMPTED, /* every node's workers are gone after the preemption signal */
};

/* What every agent knows of a role: the same on all agents. */
struct phx_role_state {
	enum phx_restart_policy policy;
	unsigned epoch; /* group roles: restarts so far */
	unsigned max_restarts;
};

struct phx_decision {
	enum phx_action action;
	long first; /* index of the report with the root cause, -1 */
	/* Per role: CONTINUE, RESTART or GIVE_UP, and the report of its first failure. */
	enum phx_action role_action[PHX_ROLE_MAX];
	long role_first[PHX_ROLE_MAX];
	bool barrier; /* a group role restarts: every agent joins one barrier fence */
	bool preempt; /* an agent got the preemption signal: every agent saves and stops */
};

/*
 * The decision of a round from every agent's report (index = agent rank)
 * and the roles' states. Every agent gets the same reports from the fence
 * and so the same answer. A report of a group role in another epoch counts
 * as running: a late failure of workers that were already being stopped
 * cannot cause a second restart. A role that restarts does so alone: the
 * workers of the other roles keep running. A self role restarts the failed
 * workers only, each up to its max_restarts. Any role out of restarts ends
 * the job; so does a shutdown; the preemption signal suspends restarts.
 */
void phx_restart_decide(const struct phx_report *r, size_t n, const struct phx_role_state *roles,
			size_t nroles, struct phx_decision *d);
/*
 * "2 ROLE EPOCH STATE FAIL_NS RANK KIND CODE WAITING" and, when rates is
 * not NULL, " | " and the step rates; returns snprintf's value.
 */
int phx_report_format(const struct phx_report *r, const char *rates, char *buf, size_t len);
/* 0, or -1 when s is not a version 2 report; nroles bounds the role index. */
int phx_report_parse(const char *s, size_t nroles, struct phx_report *r);
const char *phx_fail_describe(const struct phx_report *r, char *buf, size_t len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoint staging in the agent (agent_ckpt.c): its hooks in the
 * agent's life and agreement rounds. The node engine itself is
 * checkpoint/node/.
 */
#ifndef PHX_LAUNCHER_AGENT_AGENT_CKPT_H
#define PHX_LAUNCHER_AGENT_AGENT_CKPT_H

#include <stddef.h>

struct phx_agent;

/*
 * After the wire-up, before the first workers: the tiers and the workers'
 * socket, whose path the workers inherit. 0 or an exit code.
 */
int phx_agent_ckpt_setup(struct phx_agent *a);
/*
 * Once the workers run: the partner copies and the generation every agent
 * can restore (a gather), then registers with the main loop. Workers that
 * ask to restore before then wait in the socket's backlog, so the agreement
 * overlaps their start (their imports take far longer). 0 or an exit code.
 */
int phx_agent_ckpt_agree(struct phx_agent *a);
void phx_agent_ckpt_fini(struct phx_agent *a);
/* Appends "|STATE" to this agent's round report in buf. */
void phx_agent_ckpt_round_value(struct phx_agent *a, char *buf, size_t len);
/* Takes the "|STATE" off every agent's report (values) and commits what all hold. */
void phx_agent_ckpt_round_result(struct phx_agent *a, char **values);
/*
 * Nanoseconds until the next agreement round: sync_ns, or less while a
 * generation staged here in the last half minute is not yet durable on
 * every node (its commit and publication each take a round; every agent
 * sees the same save, so all speed up together).
 */
unsigned long long phx_agent_ckpt_round_gap(const struct phx_agent *a, unsigned long long sync_ns);
/* Every worker finished: persist what is staged and commit it with the others (blocks). */
void phx_agent_ckpt_finish(struct phx_agent *a);
/* The workers were stopped for an in-job restart: drop what they left half done. */
void phx_agent_ckpt_restart(struct phx_agent *a);

/*
 * agent_ckpt_partner.c: starts this node's partner server, announces the
 * copies it keeps, sends them where they are needed now and waits for the
 * ones this node needs. Every agent calls it (a gather); 0 or -1.
 */
struct phx_ckpt;
int phx_agent_ckpt_partner_setup(struct phx_agent *a, struct phx_ckpt *c);
/* step is committed in the local tier: this node keeps its partner copies of it. */
void phx_agent_ckpt_partner_hold(struct phx_ckpt *c, long step);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents' wake-up (agent_wake.c): an agent with news (a worker dead,
 * hung or done, a signal) starts its agreement round at once and sends every
 * other agent one datagram naming that round, so that they enter the fence
 * now instead of at their next --sync-interval-ms tick. The datagram carries
 * no news: what is decided still travels through the PMIx fence. It is
 * checked against the step's wake key (agent 0's, exchanged in the wire-up),
 * so a stranger cannot make the agents run rounds.
 *
 * The same socket carries the agents' liveness beats (launcher/liveness.h,
 * --peer-timeout-ms), sent and heard by a thread of the agent's own: an
 * agent that stops hearing one it watches reports its node lost on stderr
 * and to the driver (PHX_LOST_ENV), so a dead, hung or cut-off node ends
 * the step long before Slurm's SlurmdTimeout.
 */
#ifndef PHX_LAUNCHER_AGENT_AGENT_WAKE_H
#define PHX_LAUNCHER_AGENT_AGENT_WAKE_H

#include <stdbool.h>
#include <stddef.h>

struct phx_agent;

/* Hex digits of a wake key in the wire-up's facts. */
#define PHX_WAKE_KEY_HEX 32

/*
 * Opens this agent's wake socket and makes a key, before the wire-up.
 * Never fatal: without it the agents meet at their ticks.
 */
void phx_agent_wake_open(struct phx_agent *a);
/* The socket's UDP port for the facts, 0 when there is none. */
unsigned phx_agent_wake_port(const struct phx_agent *a);
/* This agent's key as hex (PHX_WAKE_KEY_HEX digits), "" when there is none. */
const char *phx_agent_wake_key(const struct phx_agent *a);
/*
 * After the wire-up: every agent's port (ports[rank], 0: none; addresses
 * from a->addrs) and the step's key (agent 0's). Starts listening, and
 * beating and watching unless --peer-timeout-ms is 0.
 */
void phx_agent_wake_connect(struct phx_agent *a, const unsigned *ports, const char *key);
/* Tells every other agent that round `round` has started here. */
void phx_agent_wake_send(struct phx_agent *a, unsigned long round);
/*
 * From the main loop: while a worker started here (restarts too) has not
 * sent its first heartbeat, at most 30 s, the beats say the agent is
 * settling and its watchers give it PHX_LIVENESS_SETTLE_FACTOR timeouts.
 * The agent settles from its start: its workers are about to start.
 */
void phx_agent_wake_check_settled(struct phx_agent *a);
/* True when another agent has started the round after a->rounds. */
bool phx_agent_wake_due(const struct phx_agent *a);
/* Stops the thread; its last beats tell the watchers this agent ends on its own. */
void phx_agent_wake_close(struct phx_agent *a);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Xid errors in the node's kernel log (launcher.kernel_log), watched by
 * the agent (agent_xid.c) from its main loop, at most once a second.
 */
#ifndef PHX_LAUNCHER_AGENT_AGENT_XID_H
#define PHX_LAUNCHER_AGENT_AGENT_XID_H

struct phx_agent;

/* Registers the watch with the main loop; without a readable log, none. */
void phx_agent_xid_open(struct phx_agent *a);
void phx_agent_xid_close(struct phx_agent *a);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The handlers of agents' and drivers' messages. */
#ifndef PHX_CKPTD_AGENT_H
#define PHX_CKPTD_AGENT_H

#include "checkpoint/ckptd/ckptd.h"

/* Registers the agent and driver handlers with the connection layer. */
void ckptd_agent_init(struct ckptd *d);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's phalanx-ckptd client state, shared by agent_ckptd*.c. */
#ifndef PHX_LAUNCH_AGENT_CKPTD_INT_H
#define PHX_LAUNCH_AGENT_CKPTD_INT_H

#include <stdbool.h>
#include <stdint.h>

struct phx_agent_ckptd {
	struct phx_ckpt_client *client;
	uint64_t next_beat_ns; /* CLOCK_MONOTONIC */
	uint64_t prepared_gen; /* newest generation prepared to the daemon */
	uint64_t daemon_gen; /* newest the daemon said it committed */
	uint64_t persisted_gen; /* newest whose persist lag was reported */
	bool said_connected;
};

#endif

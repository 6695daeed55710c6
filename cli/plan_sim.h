/* SPDX-License-Identifier: Apache-2.0 */
/*
 * 'phalanx plan --explain' asks phalanx-plan-sim (SimGrid) how long one
 * step's communication takes with the plan and with host-name order.
 */
#ifndef PHX_CLI_PLAN_SIM_H
#define PHX_CLI_PLAN_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "placement/placement.h"

/* Allocations larger than this are not simulated: minutes of SimGrid time. */
#define PHX_PLAN_SIM_MAX_GPUS 4096ul

struct plan_sim_times {
	double plan_s, hostname_s; /* simulated seconds */
};

/*
 * Simulates plan->rank_node and host_map (host-name order's map) on the
 * plan's bandwidths. 0 with *t set, or -1 with why not (SimGrid missing,
 * too large, the simulator failing) in why.
 */
int phx_plan_sim_run(const struct phx_plan *plan, const uint32_t *host_map,
		     struct plan_sim_times *t, char *why, size_t whylen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A plan written as a case for placement/phalanx-plan-sim, the SimGrid
 * simulation of one step's communication: the fabric's bandwidths, the
 * layout with its traffic, the nodes with their
 * leaf, spine and NVLink domain, and one or more maps of ranks to nodes
 * with the models' times of each.
 */
#ifndef PHX_PLACEMENT_PLAN_CASE_H
#define PHX_PLACEMENT_PLAN_CASE_H

#include <stdint.h>
#include <stdio.h>

#include "placement/placement.h"

/* title: one line, e.g. "nvl72 mixed 1024 tp=4,ep=8,pp=4,dp=*". */
void phx_plan_case_write(FILE *f, const char *title, const struct phx_plan *plan);
/*
 * A map: "plan NAME", then the index in plan->nodes[] of each rank's node;
 * with times, "model NAME LINK-NS SHARED-NS" (phx_plan_step_times()).
 */
void phx_plan_case_map(FILE *f, const char *name, const uint32_t *rank_node, unsigned long world,
		       const struct phx_step_times *times);

#endif

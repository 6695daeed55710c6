/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's part of straggler detection (agent_rates.c): its workers' step rates. */
#ifndef PHX_LAUNCHER_AGENT_AGENT_RATES_H
#define PHX_LAUNCHER_AGENT_AGENT_RATES_H

#include <stddef.h>

struct phx_agent;
struct phx_report;

/* Straggler sampling: each worker's step time over the window, as report text. */
void phx_agent_sample_rates(struct phx_agent *a);
void phx_agent_rates_text(struct phx_agent *a, char *buf, size_t len);
/* From every report of a round: log and record the stragglers not reported yet. */
void phx_agent_find_stragglers(struct phx_agent *a, char **values, const struct phx_report *r);

#endif

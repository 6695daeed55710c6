/* SPDX-License-Identifier: Apache-2.0 */
/* The result line of the agent of the root cause, for the driver (agent_result.c). */
#ifndef PHX_LAUNCHER_AGENT_AGENT_RESULT_H
#define PHX_LAUNCHER_AGENT_AGENT_RESULT_H

struct phx_agent;
struct phx_report;

/* The driver's result line on stderr (launcher/result.h), msg: the error file's message or "". */
void phx_agent_print_result(struct phx_agent *a, const struct phx_report *r, const char *msg);

#endif

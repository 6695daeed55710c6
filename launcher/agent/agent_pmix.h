/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents over PMIx (agent_pmix.c): each is a client of slurmstepd's
 * PMIx server, one rank per node; collecting fences carry the wire-up's
 * facts and the agreement rounds.
 */
#ifndef PHX_LAUNCHER_AGENT_AGENT_PMIX_H
#define PHX_LAUNCHER_AGENT_AGENT_PMIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pmix.h>

/* PMIx: the agent's identity and the agreement rounds. */
struct phx_pmix {
	pmix_proc_t me;
	uint32_t size; /* agents in the step */
	int done_pipe[2]; /* a non-blocking fence writes its status here */
	bool in_flight;
	bool inited;
};

int phx_pmix_init(struct phx_pmix *pm, char *err, size_t errlen);
void phx_pmix_fini(struct phx_pmix *pm);
/* Put + Commit + Fence (collecting) + Get of key from every agent; values[size], free each. */
int phx_pmix_allgather(struct phx_pmix *pm, const char *key, const char *value, char **values,
		       char *err, size_t errlen);
/* The same without blocking: done_pipe[0] turns readable when it is done. */
int phx_pmix_round_start(struct phx_pmix *pm, const char *key, const char *value, char *err,
			 size_t errlen);
int phx_pmix_round_finish(struct phx_pmix *pm, const char *key, char **values, char *err,
			  size_t errlen);

struct phx_agent;
/* Wire-up: facts exchange, placement, this node's rank map. An exit code or 0. */
int phx_agent_wireup(struct phx_agent *a);
/* A free TCP port on this node, 0 when none. */
unsigned phx_free_port(void);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stand-ins (standin.c): at a relaunch on a spare, the spare takes the
 * lost node's place in the placement, so every surviving rank stays on
 * its node (and restores from its own local tier) and only the lost
 * node's ranks move. The driver names the pairs (--stand-ins
 * LOST=SPARE,...); the agents place the step as if each spare were its
 * lost node. Pure.
 */
#ifndef PHX_LAUNCHER_STANDIN_H
#define PHX_LAUNCHER_STANDIN_H

#include <stddef.h>

/*
 * The pairs for the next step: each node of the last step (last[0..nlast),
 * indices into the allocation) that the next one lacks gets, in order, a
 * node of the next step (next[0..nnext)) that the last one lacked. Only
 * when both have the same number of nodes (the same layout); lost[k] and
 * spare[k] receive the pairs. Their count.
 */
size_t phx_stand_ins_pair(const size_t *last, size_t nlast, const size_t *next, size_t nnext,
			  size_t *lost, size_t *spare);

/*
 * Applies spec ("LOST=SPARE,...", cut in place) to hosts[0..n), the step's
 * nodes: each SPARE is renamed LOST. 0; -1 when spec is malformed, a SPARE
 * is not in hosts, a LOST still is, or a name comes twice (err says which).
 */
int phx_stand_ins_apply(char *spec, char **hosts, size_t n, char *err, size_t errlen);

#endif

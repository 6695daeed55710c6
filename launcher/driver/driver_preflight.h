/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's preflight (--preflight): which nodes to check before a
 * step (driver_trust.c, pure) and the check itself (driver_preflight.c).
 */
#ifndef PHX_LAUNCHER_DRIVER_DRIVER_PREFLIGHT_H
#define PHX_LAUNCHER_DRIVER_DRIVER_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>

struct phx_check_verdict;
struct phx_conf;

/*
 * The nodes to check before a step: healthy ones not trusted yet, in
 * allocation order, into idx. A node is trusted once it passed a check;
 * prev[0..nprev) are the nodes of the step before (NULL, 0: none), and a
 * node of next[0..nnext) that was not in it (a spare brought in) is
 * trusted again only after another check.
 */
size_t phx_drv_to_check(const bool *bad, bool *trusted, size_t n, const size_t *prev, size_t nprev,
			const size_t *next, size_t nnext, size_t *idx);

/*
 * The verdict of each of hosts[0..n) out of all[0..nall) (by node name)
 * into out; a host without one is FAILED, "no result for it in SOURCE":
 * a node is never passed without a measurement.
 */
void phx_drv_verdicts_for(const struct phx_check_verdict *all, size_t nall, char *const *hosts,
			  size_t n, const char *source, struct phx_check_verdict *out);

/*
 * The check of hosts[0..n): verdicts into out[0..n), judged from the
 * results recorded in results, or measured live when it is NULL. -1 (err
 * says why) when there is no verdict at all.
 */
int phx_drv_preflight_run(const struct phx_conf *conf, const char *results, char *const *hosts,
			  size_t n, struct phx_check_verdict *out, char *err, size_t errlen);

#endif

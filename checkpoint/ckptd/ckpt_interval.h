/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checkpoint interval that wastes least, from the stall of one save
 * (delta) and the job's mean time between failures (M = one node's MTBF
 * divided by the job's nodes). Young: tau = sqrt(2 delta M). Daly's
 * higher-order form: tau = sqrt(2 delta M) [1 + sqrt(delta/2M)/3 +
 * (delta/2M)/9] - delta when delta < 2M, else M.
 */
#ifndef PHX_CKPT_INTERVAL_H
#define PHX_CKPT_INTERVAL_H

#include <stdint.h>

enum phx_ckpt_interval_mode { PHX_INTERVAL_AUTO, PHX_INTERVAL_STEPS, PHX_INTERVAL_SECONDS };

double phx_interval_young(double stall_s, double mtbf_s);
double phx_interval_daly(double stall_s, double mtbf_s);

/*
 * One node's MTBF from a prior and what was observed: the prior counts as
 * prior_s node-seconds holding one failure, so a few early failures move
 * the estimate without one lucky or unlucky hour deciding it.
 */
double phx_interval_node_mtbf(double prior_s, double observed_node_s, uint64_t failures);

/* Young/Daly for a job of nodes nodes, in whole seconds, at least 1. */
uint64_t phx_interval_auto_seconds(double stall_s, double node_mtbf_s, uint32_t nodes);

/*
 * A job's interval request: "auto", "steps:N" or "seconds:N" (N from 1).
 * 0, or -1 with err.
 */
int phx_interval_parse(const char *s, enum phx_ckpt_interval_mode *mode, uint64_t *value, char *err,
		       size_t errlen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Draining the nodes a preflight check condemned, with what was measured. */
#include "config.h"

#include <stdio.h>

#include "common/drain.h"
#include "common/log.h"
#include "health/preflight.h"

int phx_check_drain(const struct phx_check_verdict *v, size_t n, const struct phx_check_limits *lim,
		    size_t *drained)
{
	char reason[PHX_DRAIN_REASON_MAX], err[256];
	int failed = 0;

	*drained = 0;
	for (size_t i = 0; i < n; i++) {
		if (!phx_check_should_drain(&v[i], lim))
			continue;
		snprintf(reason, sizeof(reason), "phalanx: check: %s", v[i].reason);
		if (phx_slurm_drain(v[i].node, reason, err, sizeof(err)) < 0) {
			phx_error("check: cannot drain %s: %s; drain it by hand with scontrol "
				  "update nodename=%s state=drain reason=...",
				  v[i].node, err, v[i].node);
			failed++;
			continue;
		}
		phx_info("check: drained %s: %s", v[i].node, reason);
		(*drained)++;
	}
	return failed;
}

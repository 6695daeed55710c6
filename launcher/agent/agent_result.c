/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The result line of an agent whose worker was the root cause when the
 * step gives up: what the driver (phalanx-launch in the batch script)
 * reads from srun's stderr to tell a worker failure from a lost node and
 * to see the same failure come back.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "checkpoint/proto/heartbeat.h"
#include "launcher/restart.h"
#include "launcher/result.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_result.h"

void phx_agent_print_result(struct phx_agent *a, const struct phx_report *r, const char *msg)
{
	struct phx_result res = { .rank = r->fail_rank, .kind = (int)r->kind, .code = r->code };
	char line[4096];
	int n;

	snprintf(res.node, sizeof(res.node), "%s", a->node);
	/* The exception's first line; the traceback differs in addresses and paths. */
	snprintf(res.msg, sizeof(res.msg), "%.*s", (int)strcspn(msg ? msg : "", "\n"),
		 msg ? msg : "");
	res.restarts = a->epoch;
	for (unsigned i = 0; a->hb && i < a->nproc; i++) {
		struct phx_hb_snapshot snap;

		if ((long)a->w[i].rank != r->fail_rank)
			continue;
		phx_hb_read(a->hb, i, &snap);
		res.step = snap.step;
	}
	n = phx_result_format(&res, line, sizeof(line));
	/* One write: the line must not mix with others in srun's stream. */
	if (n > 0 && (size_t)n < sizeof(line) && write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

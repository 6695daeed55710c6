/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's preflight (--preflight): the GPU/NCCL check of the nodes it
 * is about to use, measured live as one step of phalanx-check in the
 * allocation, or judged from results recorded before
 * (--preflight-results). A node without a measurement fails.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "health/preflight.h"
#include "launcher/driver/driver_preflight.h"

static int recorded(const struct phx_conf *conf, const char *path, char *const *hosts, size_t n,
		    struct phx_check_verdict *out, char *err, size_t errlen)
{
	struct phx_check_results res = { 0 };
	struct phx_check_limits lim;
	struct phx_check_verdict *all;

	if (phx_check_results_load(path, &res, err, errlen) < 0)
		return -1;
	all = calloc(res.n ? res.n : 1, sizeof(*all));
	if (!all) {
		phx_check_results_free(&res);
		return phx_errf(err, errlen, "out of memory");
	}
	/* Judged as a whole: slow is relative to the median of every node. */
	phx_check_limits_from_conf(conf, &lim);
	phx_check_judge(&res, &lim, all);
	phx_drv_verdicts_for(all, res.n, hosts, n, path, out);
	free(all);
	phx_check_results_free(&res);
	return 0;
}

int phx_drv_preflight_run(const struct phx_conf *conf, const char *results, char *const *hosts,
			  size_t n, struct phx_check_verdict *out, char *err, size_t errlen)
{
	struct phx_check_verdict *v = NULL;

	if (results)
		return recorded(conf, results, hosts, n, out, err, errlen);
	if (phx_check_verdicts(hosts, n, conf, NULL, &v, err, errlen) < 0)
		return -1;
	memcpy(out, v, n * sizeof(*v));
	free(v);
	return 0;
}

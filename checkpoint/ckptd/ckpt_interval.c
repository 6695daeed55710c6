/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckptd/ckpt_interval.h"
#include "common/log.h"

double phx_interval_young(double stall_s, double mtbf_s)
{
	return sqrt(2.0 * stall_s * mtbf_s);
}

double phx_interval_daly(double stall_s, double mtbf_s)
{
	double r;

	if (stall_s >= 2.0 * mtbf_s)
		return mtbf_s;
	r = stall_s / (2.0 * mtbf_s);
	return phx_interval_young(stall_s, mtbf_s) * (1.0 + sqrt(r) / 3.0 + r / 9.0) - stall_s;
}

double phx_interval_node_mtbf(double prior_s, double observed_node_s, uint64_t failures)
{
	return (prior_s + observed_node_s) / (1.0 + (double)failures);
}

uint64_t phx_interval_auto_seconds(double stall_s, double node_mtbf_s, uint32_t nodes)
{
	double m = node_mtbf_s / (nodes ? nodes : 1), tau;

	if (stall_s <= 0.0 || m <= 0.0)
		return 1;
	tau = phx_interval_daly(stall_s, m);
	if (!(tau >= 1.0))
		return 1;
	return tau > 1e12 ? (uint64_t)1e12 : (uint64_t)tau;
}

int phx_interval_parse(const char *s, enum phx_ckpt_interval_mode *mode, uint64_t *value, char *err,
		       size_t errlen)
{
	const char *num;
	char *end;
	unsigned long long v;

	if (!strcmp(s, "auto")) {
		*mode = PHX_INTERVAL_AUTO;
		*value = 0;
		return 0;
	}
	if (!strncmp(s, "steps:", 6)) {
		*mode = PHX_INTERVAL_STEPS;
		num = s + 6;
	} else if (!strncmp(s, "seconds:", 8)) {
		*mode = PHX_INTERVAL_SECONDS;
		num = s + 8;
	} else {
		return phx_errf(err, errlen,
				"checkpoint interval \"%s\" is not auto, steps:N or seconds:N", s);
	}
	errno = 0;
	v = strtoull(num, &end, 10);
	if (*num < '0' || *num > '9' || *end || errno || v < 1 || v > 1000000000ULL)
		return phx_errf(err, errlen,
				"checkpoint interval \"%s\": N must be a whole number from 1 to "
				"1000000000",
				s);
	*value = v;
	return 0;
}

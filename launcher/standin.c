/* SPDX-License-Identifier: Apache-2.0 */
/* Stand-ins: see standin.h. */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include "common/log.h"
#include "launcher/standin.h"

static bool has(const size_t *v, size_t n, size_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

size_t phx_stand_ins_pair(const size_t *last, size_t nlast, const size_t *next, size_t nnext,
			  size_t *lost, size_t *spare)
{
	size_t nl = 0, ns = 0;

	if (nlast != nnext)
		return 0;
	for (size_t i = 0; i < nlast; i++)
		if (!has(next, nnext, last[i]))
			lost[nl++] = last[i];
	for (size_t i = 0; i < nnext; i++)
		if (!has(last, nlast, next[i]))
			spare[ns++] = next[i];
	/* Equal sizes: as many came as went. */
	return nl == ns ? nl : 0;
}

static long find(char **hosts, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(hosts[i], name))
			return (long)i;
	return -1;
}

int phx_stand_ins_apply(char *spec, char **hosts, size_t n, char *err, size_t errlen)
{
	char *save = NULL;

	for (char *pair = strtok_r(spec, ",", &save); pair; pair = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(pair, '=');
		long at;

		if (!eq || eq == pair || !eq[1] || strchr(eq + 1, '='))
			return phx_errf(err, errlen, "--stand-ins: '%s' is not LOST=SPARE", pair);
		*eq = '\0';
		if (find(hosts, n, pair) >= 0)
			return phx_errf(err, errlen,
					"--stand-ins: %s runs in this step, so no node stands in "
					"for it",
					pair);
		at = find(hosts, n, eq + 1);
		if (at < 0)
			return phx_errf(err, errlen,
					"--stand-ins: %s, standing in for %s, is not in this step",
					eq + 1, pair);
		/* Renamed, it is found no more: a second pair for the same spare fails above. */
		hosts[at] = pair;
	}
	return 0;
}

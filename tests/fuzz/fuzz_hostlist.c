/* SPDX-License-Identifier: Apache-2.0 */
/* Host list expressions come from users (--nodes, fabric files). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "hostlist";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_hostnames hosts;
	char err[256];
	char *expr, *ranged;

	if (size > 4096)
		return 0;
	expr = malloc(size + 1);
	if (!expr)
		return 0;
	memcpy(expr, data, size);
	expr[size] = '\0';
	/*
	 * Larger lists run the same code of ours and only cost libslurm's time
	 * under ASan (up to seconds per input); the unit tests check the limits.
	 */
	if (phx_hostlist_check_size(expr, 1 << 12, 1 << 10, err, sizeof(err)) == 0 &&
	    phx_hostlist_expand(expr, &hosts, err, sizeof(err)) == 0) {
		/* Round trip: what we compress must expand to the same names. */
		ranged = phx_hostlist_compress(hosts.names, hosts.count, err, sizeof(err));
		if (ranged) {
			struct phx_hostnames again;

			if (phx_hostlist_expand(ranged, &again, err, sizeof(err)) == 0) {
				if (again.count != hosts.count)
					abort();
				phx_hostnames_free(&again);
			}
			free(ranged);
		}
		phx_hostnames_free(&hosts);
	}
	free(expr);
	return 0;
}

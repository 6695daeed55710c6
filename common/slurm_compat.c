/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdlib.h>

#include "common/slurm_compat.h"

char *phx_slurm_hostlist_ranged(phx_slurm_hostlist_t hl)
{
	/* As libslurm's own ranged_string_malloc did: 8 KiB, doubled until it fits. */
	size_t size = 8192;
	char *buf = malloc(size), *bigger;

	while (buf && slurm_hostlist_ranged_string(hl, size, buf) < 0) {
		size *= 2;
		bigger = realloc(buf, size);
		if (!bigger)
			free(buf);
		buf = bigger;
	}
	return buf;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/slurm_compat.h"

static void init_once(void)
{
	void (*init)(const char *conf);

	*(void **)&init = dlsym(RTLD_DEFAULT, "slurm_init");
	if (init)
		init(NULL);
}

void phx_slurm_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_once);
}

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

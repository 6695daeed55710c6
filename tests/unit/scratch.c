/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/scratch.h"

int phx_scratch_make(char *dir, size_t len, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	if (snprintf(dir, len, "%s/phx-%s.XXXXXX", tmp ? tmp : "/tmp", name) >= (int)len)
		return -1;
	if (!mkdtemp(dir))
		return -1;
	/* Other users (e.g. nobody in the safety tests) must be able to look in. */
	return chmod(dir, 0755);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

int phx_scratch_remove(const char *dir)
{
	return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

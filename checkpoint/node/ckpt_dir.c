/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Generation directories of the directory tiers: where a generation lives,
 * and whether it is published (its manifest is there).
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "checkpoint/node/ckpt_int.h"

void ck_gen_dir(const struct phx_ckpt *c, enum phx_ckpt_tier t, long step, char *buf, size_t len)
{
	char name[32];

	phx_ckpt_gen_name(step, name, sizeof(name));
	snprintf(buf, len, "%s/%s", c->dir[t], name);
}

bool ck_published(const struct phx_ckpt *c, enum phx_ckpt_tier t, long step, const char *file)
{
	char dir[4200], path[4600];

	ck_gen_dir(c, t, step, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	if (access(path, F_OK) < 0)
		return false;
	if (!file)
		return true;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return access(path, F_OK) == 0;
}

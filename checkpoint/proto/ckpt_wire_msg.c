/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a decoded message owns, freed in one place for both decoders: the
 * json-c one (ckpt_wire.c) and the fast prepare reader (ckpt_wire_fast.c),
 * which calls it when it declines a message half read.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "checkpoint/proto/ckpt_wire.h"

void phx_wire_msg_free(struct phx_wire_msg *m)
{
	if (m->shards)
		for (size_t i = 0; i < m->nshards; i++)
			for (size_t j = 0; j < m->shards[i].nlocations; j++)
				free(m->shards[i].locations[j].path);
	free(m->shards);
	json_object_put(m->obj);
	memset(m, 0, sizeof(*m));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Staging buffers: a worker's shard lives in a memfd the agent owns, so the
 * worker can map it, the writer thread can persist it and a restore or a
 * partner copy can fill it.
 */
#include "config.h"

#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "checkpoint/node/ckpt_int.h"

int ck_buf_alloc(struct phx_ckpt *c, struct ck_buf *b, size_t len)
{
	size_t cap = len ? len : 1;

	b->fd = memfd_create("phalanx-shard", MFD_CLOEXEC);
	if (b->fd < 0)
		return -1;
	if (ftruncate(b->fd, (off_t)cap) < 0)
		goto fail;
	b->map = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
	if (b->map == MAP_FAILED) {
		b->map = NULL;
		goto fail;
	}
	b->cap = cap;
	b->id = ++c->next_id;
	b->len = 0;
	b->state = B_FREE;
	b->refs = 0;
	b->digested = false;
	return 0;
fail:
	close(b->fd);
	b->fd = -1;
	return -1;
}

void ck_buf_free(struct ck_buf *b)
{
	if (b->map)
		munmap(b->map, b->cap);
	if (b->fd >= 0)
		close(b->fd);
	memset(b, 0, sizeof(*b));
	b->fd = -1;
}

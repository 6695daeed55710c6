/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Partner copies on the data path: the writer thread sends each shard
 * that went to the local tier to this node's partner; the restore takes a
 * rank's shard from the copies this node received. The start of a step,
 * where copies are announced and sent to the nodes that need them, is in
 * agent_ckpt_partner.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/node/partner_io.h"
#include "common/file.h"
#include "common/log.h"
#include "checkpoint/node/ckpt_int.h"

#define SEND_TIMEOUT_MS 30000

void ck_partner_fini(struct phx_ckpt *c)
{
	struct ck_partner *p = c->partner;

	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->serving)
		phx_partner_server_stop(&p->srv);
	free(p);
	c->partner = NULL;
}

/* ------------------------------------------------------------ training and restore */

/* A new connection to the partner, welcomed for h (phx_partner_open()), then h's shard. */
static int open_and_send(struct ck_partner *p, const struct phx_partner_hdr *h, const void *data,
			 char *err, size_t errlen)
{
	uint8_t hdr[PHX_PARTNER_HDR_BYTES];
	int rc;

	if (phx_partner_hdr_encode(h, p->secret, hdr) < 0)
		return phx_errf(err, errlen, "the copy's header is out of range");
	p->fd = phx_partner_open(p->peer_addr, (uint16_t)p->peer_port, SEND_TIMEOUT_MS, hdr, err,
				 errlen);
	if (p->fd < 0)
		return -1;
	rc = phx_send_all(p->fd, data, h->bytes);
	if (rc)
		return phx_errf(err, errlen, "sending the shard: %s", strerror(-rc));
	return 0;
}

void ck_partner_send(struct phx_ckpt *c, const struct ck_job *j)
{
	struct ck_partner *p = c->partner;
	struct phx_partner_hdr h = {
		.job_id = c->job_id,
		.rank = (uint32_t)j->rank,
		.step = (uint64_t)j->step,
		.gen = ck_gen_of(j->step),
		.bytes = j->len,
		.algo = c->algo,
	};
	char err[512];
	int rc;

	if (!p || !p->peer_port)
		return;
	memcpy(h.digest, j->digest, sizeof(h.digest));
	if (p->fd < 0)
		rc = open_and_send(p, &h, j->data, err, sizeof(err));
	else if ((rc = phx_partner_send(p->fd, &h, p->secret, j->data)) < 0)
		snprintf(err, sizeof(err), "%s", strerror(-rc));
	if (rc < 0) {
		if (!p->failing)
			phx_warn("rank %lu: no partner copy of step %ld on %s: %s; the local and "
				 "shared tiers still hold it",
				 j->rank, j->step, p->peer_host, err);
		p->failing = true;
		if (p->fd >= 0)
			close(p->fd);
		p->fd = -1;
		return;
	}
	if (p->failing)
		phx_info("rank %lu: partner copies reach %s again", j->rank, p->peer_host);
	p->failing = false;
	phx_debug("rank %lu: step %ld copied to partner %s", j->rank, j->step, p->peer_host);
}

size_t ck_partner_steps(const struct phx_ckpt *c, long max, long *steps, size_t n, size_t cap)
{
	struct ck_partner *p = c->partner;

	if (!p || !p->serving)
		return n;
	pthread_mutex_lock(&p->srv.mu);
	for (unsigned i = 0; i < c->nproc; i++) {
		uint32_t r = (uint32_t)c->slot[i].rank;

		for (int k = 0; r < p->srv.store.nranks && k < 2 && n < cap; k++) {
			const struct phx_partner_copy *cp = &p->srv.store.slot[r][k];
			long s = (long)cp->hdr.step;
			bool dup = false;

			if (!cp->data || s > max)
				continue;
			for (size_t x = 0; x < n; x++)
				dup |= steps[x] == s;
			if (!dup)
				steps[n++] = s;
		}
	}
	pthread_mutex_unlock(&p->srv.mu);
	return n;
}

int ck_partner_load(struct phx_ckpt *c, unsigned long rank, long step, struct ck_buf *b)
{
	struct ck_partner *p = c->partner;
	const struct phx_partner_copy *cp;
	int rc = -1;

	if (!p || !p->serving)
		return -1;
	pthread_mutex_lock(&p->srv.mu);
	cp = phx_partner_store_get(&p->srv.store, (uint32_t)rank, ck_gen_of(step));
	if (!cp || cp->hdr.step != (uint64_t)step || cp->hdr.algo != c->algo)
		goto out;
	if (b->fd < 0 || b->cap < cp->hdr.bytes) {
		ck_buf_free(b);
		if (ck_buf_alloc(c, b, (size_t)cp->hdr.bytes) < 0)
			goto out;
	}
	/* Verified against its authenticated digest when it arrived; nothing wrote it since. */
	memcpy(b->map, cp->data, (size_t)cp->hdr.bytes);
	b->len = (size_t)cp->hdr.bytes;
	b->step = step;
	memcpy(b->digest, cp->hdr.digest, sizeof(b->digest));
	b->digested = true;
	rc = 0;
out:
	pthread_mutex_unlock(&p->srv.mu);
	return rc;
}

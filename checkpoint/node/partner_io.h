/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Moving a partner copy over a stream socket, and keeping the copies a
 * partner holds. The sender writes the signed header and the shard; the
 * receiver checks the header before it reads a byte of the shard, reads
 * the shard into a memfd of exactly the announced size, and digests it:
 * a copy exists only once it is complete and its digest matches the
 * authenticated one. The store keeps, per rank, the newest copy and the
 * one before (the generation being agreed and the last agreed one), so a
 * partner never holds more than two shards per rank of its peer.
 */
#ifndef PHX_CKPT_PARTNER_IO_H
#define PHX_CKPT_PARTNER_IO_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/node/partner.h"

/* A verified copy in memory: fd is a memfd of exactly hdr.bytes, data its mapping. */
struct phx_partner_copy {
	struct phx_partner_hdr hdr;
	int fd;
	void *data;
};

/*
 * Sends the header (h->bytes, h->digest describe data) and the shard on fd,
 * a blocking stream socket the server already welcomed
 * (phx_partner_open()); never raises SIGPIPE. 0 or a negated errno.
 */
int phx_partner_send(int fd, const struct phx_partner_hdr *h,
		     const uint8_t secret[PHX_PARTNER_SECRET_BYTES], const void *data);

/*
 * Receives one copy from fd: header checked against the secret and the
 * limits, the shard read whole, its digest computed with digest_threads
 * and compared. 0 with *out filled (free with phx_partner_copy_free), 1
 * when the peer closed before a header began, -1 with the reason in err.
 */
int phx_partner_recv(int fd, const uint8_t secret[PHX_PARTNER_SECRET_BYTES],
		     const struct phx_partner_limits *lim, unsigned digest_threads,
		     struct phx_partner_copy *out, char *err, size_t errlen);

/*
 * The two halves of phx_partner_recv, for a server that trusts a sender
 * once its header's MAC checked: the header (0, 1 or -1 as above; out->hdr
 * filled), then its shard (0, or -1 with c freed).
 */
int phx_partner_recv_header(int fd, const uint8_t secret[PHX_PARTNER_SECRET_BYTES],
			    const struct phx_partner_limits *lim, struct phx_partner_copy *out,
			    char *err, size_t errlen);
int phx_partner_recv_shard(int fd, unsigned digest_threads, struct phx_partner_copy *c, char *err,
			   size_t errlen);

void phx_partner_copy_free(struct phx_partner_copy *c);

/* The copies a partner holds: two per rank at most. */
struct phx_partner_store {
	uint32_t nranks;
	struct phx_partner_copy (*slot)[2]; /* [rank][0] newest, [rank][1] the one before */
};

int phx_partner_store_init(struct phx_partner_store *s, uint32_t nranks);
void phx_partner_store_free(struct phx_partner_store *s);

/*
 * Takes c (its fd and mapping now belong to the store, c is cleared). A
 * copy of a generation older than both held ones, or equal to one, is
 * freed instead; the oldest held one is freed when a newer one comes.
 * 1 when kept, 0 when dropped.
 */
int phx_partner_store_put(struct phx_partner_store *s, struct phx_partner_copy *c);

/* The copy of rank at generation gen, or NULL. */
const struct phx_partner_copy *phx_partner_store_get(const struct phx_partner_store *s,
						     uint32_t rank, uint64_t gen);

/* 1 with *gen the newest generation held for rank, 0 when none is held. */
int phx_partner_store_newest(const struct phx_partner_store *s, uint32_t rank, uint64_t *gen);

#endif

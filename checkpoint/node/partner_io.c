/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/node/partner_io.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/log.h"

#define IO_PIECE (8u << 20)

int phx_partner_send(int fd, const struct phx_partner_hdr *h,
		     const uint8_t secret[PHX_PARTNER_SECRET_BYTES], const void *data)
{
	uint8_t hdr[PHX_PARTNER_HDR_BYTES];
	int rc;

	if (phx_partner_hdr_encode(h, secret, hdr) < 0)
		return -EINVAL;
	rc = phx_send_all(fd, hdr, sizeof(hdr));
	return rc ? rc : phx_send_all(fd, data, h->bytes);
}

/* Bytes read until len or the end of the stream; a negated errno on error. */
static ssize_t recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		size_t want = len - got < IO_PIECE ? len - got : IO_PIECE;
		ssize_t n = recv(fd, p + got, want, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * A header: its first byte whenever it comes (a sender idles between
 * generations), the rest within ms of it, so a peer that trickles bytes
 * holds a connection no longer than that before its MAC is checked.
 */
static ssize_t recv_header(int fd, uint8_t *hdr, size_t len, int ms)
{
	uint64_t deadline;
	size_t got;
	ssize_t n;

	n = recv_all(fd, hdr, 1);
	if (n <= 0)
		return n;
	if (ms <= 0) {
		n = recv_all(fd, hdr + 1, len - 1);
		return n < 0 ? n : n + 1;
	}
	deadline = phx_now_ns(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000;
	for (got = 1; got < len; got += (size_t)n) {
		int left = phx_ms_until(deadline);
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (left <= 0 || poll(&p, 1, left) == 0)
			return -ETIMEDOUT;
		n = recv(fd, hdr + got, len - got, 0);
		if (n < 0 && errno == EINTR)
			n = 0;
		else if (n < 0)
			return -errno;
		else if (n == 0)
			break;
	}
	return (ssize_t)got;
}

static int map_copy(struct phx_partner_copy *c, char *err, size_t errlen)
{
	c->fd = memfd_create("phalanx-partner", MFD_CLOEXEC);
	if (c->fd < 0)
		return phx_errf(err, errlen, "memfd_create: %s", strerror(errno));
	if (ftruncate(c->fd, (off_t)c->hdr.bytes) < 0)
		return phx_errf(err, errlen, "cannot size a %llu-byte partner copy: %s",
				(unsigned long long)c->hdr.bytes, strerror(errno));
	if (!c->hdr.bytes)
		return 0;
	c->data = mmap(NULL, c->hdr.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->data == MAP_FAILED) {
		c->data = NULL;
		return phx_errf(err, errlen, "cannot map a %llu-byte partner copy: %s",
				(unsigned long long)c->hdr.bytes, strerror(errno));
	}
	return 0;
}

/* Receives the shard, advancing the feed so the digest runs while bytes arrive. */
struct receiver {
	int fd;
	uint8_t *dst;
	size_t len;
	struct phx_digest_feed *feed;
	ssize_t got; /* bytes, or a negated errno */
};

static void *recv_thread(void *arg)
{
	struct receiver *r = arg;
	size_t off = 0;

	while (off < r->len) {
		ssize_t n = recv_all(r->fd, r->dst + off,
				     r->len - off < IO_PIECE ? r->len - off : IO_PIECE);

		if (n <= 0) {
			r->got = n < 0 ? n : (ssize_t)off;
			phx_digest_feed_advance(r->feed, off, 1);
			return NULL;
		}
		off += (size_t)n;
		phx_digest_feed_advance(r->feed, off, 0);
	}
	r->got = (ssize_t)off;
	return NULL;
}

static int receive_digest(int fd, struct phx_partner_copy *c, unsigned threads, uint8_t *d)
{
	struct phx_digest_feed feed;
	struct receiver r = { .fd = fd, .dst = c->data, .len = c->hdr.bytes, .feed = &feed };
	pthread_t tid;
	int drc;

	phx_digest_feed_init(&feed);
	if (pthread_create(&tid, NULL, recv_thread, &r)) {
		recv_thread(&r);
		drc = (uint64_t)r.got == c->hdr.bytes
			      ? phx_digest_compute(c->hdr.algo, c->data, c->hdr.bytes, threads,
						   NULL, d)
			      : -1;
	} else {
		drc = phx_digest_compute(c->hdr.algo, c->data, c->hdr.bytes, threads, &feed, d);
		pthread_join(tid, NULL);
	}
	phx_digest_feed_destroy(&feed);
	if (r.got < 0)
		return (int)r.got;
	if ((uint64_t)r.got != c->hdr.bytes)
		return -EPIPE;
	return drc < 0 ? -EIO : 0;
}

static int read_shard(int fd, struct phx_partner_copy *c, unsigned threads, char *err,
		      size_t errlen)
{
	uint8_t d[PHX_DIGEST_MAX] = { 0 };
	char want[PHX_DIGEST_HEX_LEN], got[PHX_DIGEST_HEX_LEN];
	int rc = receive_digest(fd, c, threads, d);

	if (rc == -EPIPE)
		return phx_errf(err, errlen, "rank %u's shard ended before its %llu bytes",
				c->hdr.rank, (unsigned long long)c->hdr.bytes);
	if (rc == -EIO)
		return phx_errf(err, errlen, "cannot digest rank %u's shard", c->hdr.rank);
	if (rc < 0)
		return phx_errf(err, errlen, "reading rank %u's shard: %s", c->hdr.rank,
				strerror(-rc));
	if (!memcmp(d, c->hdr.digest, phx_digest_len(c->hdr.algo)))
		return 0;
	phx_digest_hex(c->hdr.algo, c->hdr.digest, want);
	phx_digest_hex(c->hdr.algo, d, got);
	return phx_errf(err, errlen, "rank %u step %llu: %s digest %s, the sender announced %s",
			c->hdr.rank, (unsigned long long)c->hdr.step, phx_digest_name(c->hdr.algo),
			got, want);
}

int phx_partner_recv_header(int fd, const uint8_t secret[PHX_PARTNER_SECRET_BYTES],
			    const struct phx_partner_limits *lim, struct phx_partner_copy *out,
			    char *err, size_t errlen)
{
	uint8_t hdr[PHX_PARTNER_HDR_BYTES];
	ssize_t n;

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	err[0] = '\0';
	n = recv_header(fd, hdr, sizeof(hdr), lim->header_ms);
	if (n == 0)
		return 1;
	if (n < 0)
		return phx_errf(err, errlen, "reading a partner header: %s", strerror((int)-n));
	return phx_partner_hdr_decode(hdr, (size_t)n, secret, lim, &out->hdr, err, errlen);
}

int phx_partner_recv_shard(int fd, unsigned digest_threads, struct phx_partner_copy *c, char *err,
			   size_t errlen)
{
	if (map_copy(c, err, errlen) < 0 || read_shard(fd, c, digest_threads, err, errlen) < 0) {
		phx_partner_copy_free(c);
		return -1;
	}
	return 0;
}

int phx_partner_recv(int fd, const uint8_t secret[PHX_PARTNER_SECRET_BYTES],
		     const struct phx_partner_limits *lim, unsigned digest_threads,
		     struct phx_partner_copy *out, char *err, size_t errlen)
{
	int rc = phx_partner_recv_header(fd, secret, lim, out, err, errlen);

	return rc ? rc : phx_partner_recv_shard(fd, digest_threads, out, err, errlen);
}

void phx_partner_copy_free(struct phx_partner_copy *c)
{
	if (c->data)
		munmap(c->data, c->hdr.bytes);
	if (c->fd >= 0)
		close(c->fd);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* ------------------------------------------------------------ store */

int phx_partner_store_init(struct phx_partner_store *s, uint32_t nranks)
{
	s->nranks = nranks;
	s->slot = calloc(nranks ? nranks : 1, sizeof(*s->slot));
	if (!s->slot)
		return -1;
	for (uint32_t r = 0; r < nranks; r++)
		s->slot[r][0].fd = s->slot[r][1].fd = -1;
	return 0;
}

void phx_partner_store_free(struct phx_partner_store *s)
{
	for (uint32_t r = 0; s->slot && r < s->nranks; r++) {
		phx_partner_copy_free(&s->slot[r][0]);
		phx_partner_copy_free(&s->slot[r][1]);
	}
	free(s->slot);
	s->slot = NULL;
}

static int held(const struct phx_partner_copy *c)
{
	return c->fd >= 0;
}

int phx_partner_store_put(struct phx_partner_store *s, struct phx_partner_copy *c)
{
	struct phx_partner_copy *two;
	uint64_t gen = c->hdr.gen;

	if (c->hdr.rank >= s->nranks)
		goto drop;
	two = s->slot[c->hdr.rank];
	if ((held(&two[0]) && two[0].hdr.gen == gen) || (held(&two[1]) && two[1].hdr.gen == gen))
		goto drop;
	if (!held(&two[0]) || gen > two[0].hdr.gen) {
		phx_partner_copy_free(&two[1]);
		two[1] = two[0];
		two[0] = *c;
	} else if (!held(&two[1]) || gen > two[1].hdr.gen) {
		phx_partner_copy_free(&two[1]);
		two[1] = *c;
	} else {
		goto drop;
	}
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	return 1;
drop:
	phx_partner_copy_free(c);
	return 0;
}

const struct phx_partner_copy *phx_partner_store_get(const struct phx_partner_store *s,
						     uint32_t rank, uint64_t gen)
{
	if (rank >= s->nranks)
		return NULL;
	for (int i = 0; i < 2; i++)
		if (held(&s->slot[rank][i]) && s->slot[rank][i].hdr.gen == gen)
			return &s->slot[rank][i];
	return NULL;
}

int phx_partner_store_newest(const struct phx_partner_store *s, uint32_t rank, uint64_t *gen)
{
	if (rank >= s->nranks || !held(&s->slot[rank][0]))
		return 0;
	*gen = s->slot[rank][0].hdr.gen;
	return 1;
}

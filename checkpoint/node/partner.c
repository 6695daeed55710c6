/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "checkpoint/proto/ckpt_msg.h"
#include "checkpoint/node/partner.h"
#include "common/log.h"
#include "placement/fabric.h"

struct member {
	const char *name;
	const char *group; /* leaf name, or the node's own name when its leaf is unknown */
	int known; /* on a leaf the fabric names: ordered before unknown ones */
	size_t size; /* nodes in its group */
	size_t idx; /* in the caller's list */
};

static int by_group(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int c;

	if (x->known != y->known)
		return y->known - x->known;
	c = strcmp(x->group, y->group);
	if (c)
		return c;
	c = phx_hostname_cmp(x->name, y->name);
	return c ? c : strcmp(x->name, y->name);
}

/* Largest group first, so that a shift of n - size crosses leaves where it can. */
static int by_size(const void *a, const void *b)
{
	const struct member *x = a, *y = b;

	if (x->size != y->size)
		return x->size < y->size ? 1 : -1;
	return by_group(a, b);
}

static void group_of(struct member *m, const struct phx_fabric *fabric)
{
	long k;

	m->known = 1;
	m->group = "";
	if (!fabric || !fabric->has_switches)
		return;
	k = phx_fabric_find(fabric, m->name);
	if (k >= 0) {
		m->group = fabric->leaves[fabric->nodes[k].leaf];
		return;
	}
	m->known = 0;
	m->group = m->name;
}

static int same_group(const struct member *a, const struct member *b)
{
	return a->known == b->known && !strcmp(a->group, b->group);
}

/* Sizes of the groups; -1 when a name is repeated (adjacent after by_group). */
static int size_groups(struct member *m, size_t n)
{
	size_t i = 0, j;

	qsort(m, n, sizeof(*m), by_group);
	while (i < n) {
		for (j = i + 1; j < n && same_group(&m[i], &m[j]); j++)
			if (!strcmp(m[j - 1].name, m[j].name))
				return -1;
		for (size_t k = i; k < j; k++)
			m[k].size = j - i;
		i = j;
	}
	return 0;
}

long phx_partner_assign(const char *const *nodes, size_t n, const struct phx_fabric *fabric,
			long *partner)
{
	struct member *m;
	size_t largest, shift;
	long shared = 0;

	for (size_t i = 0; i < n; i++)
		partner[i] = -1;
	if (n < 2)
		return 0;
	m = calloc(n, sizeof(*m));
	if (!m)
		return -1;
	for (size_t i = 0; i < n; i++) {
		m[i].name = nodes[i];
		m[i].idx = i;
		group_of(&m[i], fabric);
	}
	if (size_groups(m, n) < 0) {
		free(m);
		return -1;
	}
	qsort(m, n, sizeof(*m), by_size);
	largest = m[0].size;
	if (largest == n)
		shift = 1;
	else if (2 * largest <= n)
		shift = largest;
	else
		shift = n - largest;
	for (size_t i = 0; i < n; i++) {
		const struct member *to = &m[(i + shift) % n];

		partner[m[i].idx] = (long)to->idx;
		shared += same_group(&m[i], to);
	}
	free(m);
	return shared;
}

long phx_partner_holder(const char *const *nodes, size_t n, const struct phx_fabric *fabric,
			const char *lost)
{
	long *partner, at = -1;

	for (size_t i = 0; i < n && at < 0; i++)
		if (!strcmp(nodes[i], lost))
			at = (long)i;
	if (at < 0 || n < 2)
		return -1;
	partner = calloc(n, sizeof(*partner));
	if (!partner)
		return -1;
	if (phx_partner_assign(nodes, n, fabric, partner) < 0)
		at = -1;
	else
		at = partner[at];
	free(partner);
	return at;
}

/* ------------------------------------------------------------ header */

/*
 * Layout, little-endian:
 *   0 magic u32, 4 version u16, 6 algo u8, 7 digest length u8,
 *   8 job u32, 12 rank u32, 16 step u64, 24 generation u64, 32 bytes u64,
 *   40 digest[32] (zero past its length), 72 zero[24],
 *   96 HMAC-SHA256(secret, bytes 0..96)
 */
#define OFF_DIGEST 40
#define OFF_RESERVED 72
#define OFF_MAC 96

_Static_assert(OFF_MAC + PHX_PARTNER_MAC_BYTES == PHX_PARTNER_HDR_BYTES, "header layout");

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int mac(const uint8_t *secret, const uint8_t *buf, uint8_t out[PHX_PARTNER_MAC_BYTES])
{
	unsigned len = 0;

	if (!HMAC(EVP_sha256(), secret, PHX_PARTNER_SECRET_BYTES, buf, OFF_MAC, out, &len))
		return -1;
	return len == PHX_PARTNER_MAC_BYTES ? 0 : -1;
}

int phx_partner_hdr_encode(const struct phx_partner_hdr *h,
			   const uint8_t secret[PHX_PARTNER_SECRET_BYTES],
			   uint8_t out[PHX_PARTNER_HDR_BYTES])
{
	size_t dlen;

	if (h->algo != PHX_DIGEST_XXH3 && h->algo != PHX_DIGEST_SHA256)
		return -1;
	if (h->bytes > PHX_CKPT_MAX_BYTES || h->step > INT64_MAX || h->gen > INT64_MAX)
		return -1;
	dlen = phx_digest_len(h->algo);
	memset(out, 0, PHX_PARTNER_HDR_BYTES);
	put32(out, PHX_PARTNER_MAGIC);
	put16(out + 4, PHX_PARTNER_VERSION);
	out[6] = (uint8_t)h->algo;
	out[7] = (uint8_t)dlen;
	put32(out + 8, h->job_id);
	put32(out + 12, h->rank);
	put64(out + 16, h->step);
	put64(out + 24, h->gen);
	put64(out + 32, h->bytes);
	memcpy(out + OFF_DIGEST, h->digest, dlen);
	return mac(secret, out, out + OFF_MAC);
}

static int all_zero(const uint8_t *p, size_t n)
{
	uint8_t acc = 0;

	for (size_t i = 0; i < n; i++)
		acc |= p[i];
	return !acc;
}

static int check_digest(const uint8_t *buf, struct phx_partner_hdr *h, char *err, size_t errlen)
{
	size_t dlen;

	if (buf[6] != PHX_DIGEST_XXH3 && buf[6] != PHX_DIGEST_SHA256)
		return phx_errf(err, errlen, "unknown digest algorithm %u", buf[6]);
	h->algo = (enum phx_digest_algo)buf[6];
	dlen = phx_digest_len(h->algo);
	if (buf[7] != dlen)
		return phx_errf(err, errlen, "digest length %u, %s has %zu", buf[7],
				phx_digest_name(h->algo), dlen);
	if (!all_zero(buf + OFF_DIGEST + dlen, OFF_MAC - OFF_DIGEST - dlen))
		return phx_errf(err, errlen, "reserved bytes are not zero");
	memset(h->digest, 0, sizeof(h->digest));
	memcpy(h->digest, buf + OFF_DIGEST, dlen);
	return 0;
}

static int check_fields(const struct phx_partner_hdr *h, const struct phx_partner_limits *lim,
			char *err, size_t errlen)
{
	if (h->job_id != lim->job_id)
		return phx_errf(err, errlen, "shard of job %u, this agent serves job %u", h->job_id,
				lim->job_id);
	if (h->rank >= lim->nranks)
		return phx_errf(err, errlen, "rank %u, the job has %u", h->rank, lim->nranks);
	if (h->step > INT64_MAX || h->gen > INT64_MAX)
		return phx_errf(err, errlen, "step or generation out of range");
	if (h->bytes > lim->max_bytes || h->bytes > PHX_CKPT_MAX_BYTES)
		return phx_errf(err, errlen, "shard of %llu bytes, the limit is %llu",
				(unsigned long long)h->bytes, (unsigned long long)lim->max_bytes);
	return 0;
}

int phx_partner_hdr_decode(const uint8_t *buf, size_t len,
			   const uint8_t secret[PHX_PARTNER_SECRET_BYTES],
			   const struct phx_partner_limits *lim, struct phx_partner_hdr *h,
			   char *err, size_t errlen)
{
	uint8_t want[PHX_PARTNER_MAC_BYTES];

	err[0] = '\0';
	if (len != PHX_PARTNER_HDR_BYTES)
		return phx_errf(err, errlen, "header of %zu bytes, expected %d", len,
				PHX_PARTNER_HDR_BYTES);
	if (get32(buf) != PHX_PARTNER_MAGIC)
		return phx_errf(err, errlen, "not a partner copy (bad magic)");
	if (get16(buf + 4) != PHX_PARTNER_VERSION)
		return phx_errf(err, errlen, "partner copy version %u, this agent speaks %u",
				get16(buf + 4), PHX_PARTNER_VERSION);
	if (mac(secret, buf, want) < 0)
		return phx_errf(err, errlen, "HMAC computation failed");
	if (CRYPTO_memcmp(want, buf + OFF_MAC, sizeof(want)))
		return phx_errf(err, errlen,
				"authentication failed: not signed with this job's secret");
	memset(h, 0, sizeof(*h));
	h->job_id = get32(buf + 8);
	h->rank = get32(buf + 12);
	h->step = get64(buf + 16);
	h->gen = get64(buf + 24);
	h->bytes = get64(buf + 32);
	if (check_digest(buf, h, err, errlen) < 0)
		return -1;
	return check_fields(h, lim, err, errlen);
}

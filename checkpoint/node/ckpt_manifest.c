/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node side's use of the generation manifest (checkpoint/proto/ckpt_manifest.h,
 * the format phalanx-ckptd catalogs): finding a rank's shard in one read
 * back from a tier, and the digest list agents exchange in their rounds so
 * that each can write the complete manifest of a generation. Both decode
 * outside input and are fuzzed.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "checkpoint/proto/digest.h"
#include "common/hex.h"
#include "common/log.h"
#include "checkpoint/node/ckpt.h"

int phx_ckpt_manifest_find(const char *json, unsigned long rank, struct phx_ckpt_entry *out,
			   char *err, size_t errlen)
{
	struct phx_manifest m;
	const struct phx_manifest_shard *s;
	enum phx_digest_algo algo;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (phx_manifest_parse(json, strlen(json), &m, err, errlen) < 0)
		return -1;
	if (rank >= m.world) {
		rc = 1;
		phx_errf(err, errlen, "the manifest has %u ranks, not rank %lu", m.world, rank);
		goto out;
	}
	s = &m.shards[rank];
	if (phx_digest_parse(s->digest.alg, &algo) < 0 ||
	    phx_hex_decode(s->digest.hex, strlen(s->digest.hex), out->digest,
			   phx_digest_len(algo)) < 0) {
		phx_errf(err, errlen, "rank %lu's digest is %s, which this agent cannot check",
			 rank, s->digest.alg);
		goto out;
	}
	out->step = (long)m.step;
	out->rank = rank;
	out->bytes = s->bytes;
	out->algo = (int)algo;
	rc = 0;
out:
	phx_manifest_free(&m);
	return rc;
}

int phx_ckpt_digests_format(long step, const struct phx_ckpt_shard *s, size_t n, int algo,
			    char *buf, size_t len)
{
	char hex[PHX_DIGEST_HEX_LEN];
	size_t off = 0;
	int w = snprintf(buf, len, "d %ld", step);

	for (size_t i = 0; i < n && w >= 0; i++) {
		off += (size_t)w;
		phx_digest_hex((enum phx_digest_algo)algo, s[i].digest, hex);
		w = snprintf(buf + (off < len ? off : len), off < len ? len - off : 0,
			     "%c%lu:%llu:%s", i ? ',' : ' ', s[i].rank, s[i].bytes, hex);
	}
	return w < 0 ? w : (int)(off + (size_t)w);
}

int phx_ckpt_digests_parse(const char *text, int algo, long *step, struct phx_ckpt_shard *out,
			   size_t max, size_t *n)
{
	size_t hexlen = 2 * phx_digest_len((enum phx_digest_algo)algo);
	const char *p = text;
	char *end;

	*n = 0;
	if (strncmp(p, "d ", 2) || p[2] < '0' || p[2] > '9' || (p[2] == '0' && p[3] != ' '))
		return -1;
	errno = 0;
	*step = strtol(p + 2, &end, 10);
	if (errno || *end != ' ')
		return -1;
	p = end;
	while (*p == ' ' || *p == ',') {
		struct phx_ckpt_shard s = { 0 };

		if (*n >= max || p[1] < '0' || p[1] > '9' || (p[1] == '0' && p[2] != ':'))
			return -1;
		errno = 0;
		s.rank = strtoul(p + 1, &end, 10);
		if (errno || *end != ':' || end[1] < '0' || end[1] > '9' ||
		    (end[1] == '0' && end[2] != ':'))
			return -1;
		s.bytes = strtoull(end + 1, &end, 10);
		if (errno || *end != ':' || strspn(end + 1, PHX_HEX_LOWER) != hexlen ||
		    phx_hex_decode(end + 1, hexlen, s.digest, hexlen / 2) < 0)
			return -1;
		out[(*n)++] = s;
		p = end + 1 + hexlen;
		if (*p && *p != ',')
			return -1;
		if (!*p)
			break;
	}
	return *p || !*n ? -1 : 0;
}

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
#include "placement/layout.h"

int phx_ckpt_manifest_entry(const struct phx_manifest *m, unsigned long rank,
			    struct phx_ckpt_entry *out, char *err, size_t errlen)
{
	const struct phx_manifest_shard *s;
	enum phx_digest_algo algo;

	memset(out, 0, sizeof(*out));
	if (rank >= m->world) {
		phx_errf(err, errlen, "the manifest has %u ranks, not rank %lu", m->world, rank);
		return 1;
	}
	s = &m->shards[rank];
	if (phx_digest_parse(s->digest.alg, &algo) < 0 ||
	    phx_hex_decode(s->digest.hex, strlen(s->digest.hex), out->digest,
			   phx_digest_len(algo)) < 0)
		return phx_errf(err, errlen,
				"rank %lu's digest is %s, which this agent cannot check", rank,
				s->digest.alg);
	out->step = (long)m->step;
	out->rank = rank;
	out->bytes = s->bytes;
	out->algo = (int)algo;
	return 0;
}

int phx_ckpt_manifest_find(const char *json, unsigned long rank, struct phx_ckpt_entry *out,
			   char *err, size_t errlen)
{
	struct phx_manifest m;
	int rc;

	memset(out, 0, sizeof(*out));
	if (phx_manifest_parse(json, strlen(json), &m, err, errlen) < 0)
		return -1;
	rc = phx_ckpt_manifest_entry(&m, rank, out, err, errlen);
	phx_manifest_free(&m);
	return rc;
}

/* A generation saved without coordinates is restored by rank number: same world only. */
static int source_by_number(const struct phx_manifest *m, unsigned long world, unsigned long rank,
			    unsigned long *src, char *err, size_t errlen)
{
	if (m->world != world)
		return phx_errf(err, errlen,
				"step %llu was saved by %u ranks without a recorded layout and "
				"this job has %lu; start it with the same number of ranks",
				(unsigned long long)m->step, m->world, world);
	*src = rank;
	return 0;
}

int phx_ckpt_source_rank(const struct phx_manifest *m, const struct phx_layout *now,
			 unsigned long world, unsigned long rank, unsigned long *src, char *err,
			 size_t errlen)
{
	unsigned long c[PHX_DIM_COUNT], dp_old, dp_now;
	const struct phx_manifest_shard *s;
	struct phx_layout old;
	char why[256];

	if (!m->shards[0].state || !now->world)
		return source_by_number(m, world, rank, src, err, errlen);
	if (phx_layout_parse(m->layout, &old, why, sizeof(why)) < 0 ||
	    phx_layout_resolve(&old, m->world, why, sizeof(why)) < 0)
		return phx_errf(err, errlen, "step %llu's layout \"%s\": %s",
				(unsigned long long)m->step, m->layout, why);
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		if (d == PHX_DIM_DP || old.size[d] == now->size[d])
			continue;
		return phx_errf(err, errlen,
				"step %llu was saved with %s=%lu and this job has %s=%lu; only dp "
				"may change between a save and its restore (a DCP checkpoint "
				"read through phalanx.dcp.StorageReader(shared_dir) reshards)",
				(unsigned long long)m->step, phx_dim_name((enum phx_dim)d),
				old.size[d], phx_dim_name((enum phx_dim)d), now->size[d]);
	}
	phx_layout_coords(now, rank, c);
	dp_old = old.size[PHX_DIM_DP];
	dp_now = now->size[PHX_DIM_DP];
	/* A replica of the same dp index where there is one, spreading the reads. */
	c[PHX_DIM_DP] %= dp_old;
	*src = phx_layout_rank(&old, c);
	s = &m->shards[*src];
	for (int d = 0; d < PHX_DIM_COUNT; d++)
		if (s->coord[d] != c[d])
			return phx_errf(err, errlen,
					"step %llu: rank %lu's recorded coordinates are not its "
					"place in the layout %s (a corrupt manifest)",
					(unsigned long long)m->step, *src, m->layout);
	if (dp_old != dp_now && s->state == PHX_STATE_SHARDED)
		return phx_errf(err, errlen,
				"rank %lu's state of step %llu is sharded across dp (saved with "
				"dp=%lu, this job has dp=%lu): another dp rank's part is not its "
				"own; reshard it with phalanx.dcp.StorageReader(shared_dir), or "
				"start with dp=%lu",
				rank, (unsigned long long)m->step, dp_old, dp_now, dp_old);
	return 0;
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
			     "%c%lu:%llu:%s:%c", i ? ',' : ' ', s[i].rank, s[i].bytes, hex,
			     s[i].sharded ? 's' : 'r');
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
		p = end + 1 + hexlen;
		if (p[0] != ':' || (p[1] != 'r' && p[1] != 's'))
			return -1;
		s.sharded = p[1] == 's';
		out[(*n)++] = s;
		p += 2;
		if (*p && *p != ',')
			return -1;
		if (!*p)
			break;
	}
	return *p || !*n ? -1 : 0;
}

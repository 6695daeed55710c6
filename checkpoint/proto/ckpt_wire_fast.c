/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fast reader for the one message that comes in bursts: prepare. With
 * 2,048 agents a generation brings 2,048 prepares of 16k shards, and a
 * json-c tree per message (three hashed objects a shard) was most of the
 * daemon's time. This reader walks the text once and fills the message
 * directly. It takes only plain input (known keys once each, no escapes,
 * plain integers) that passes the same checks as the json-c path; on
 * anything else it declines and the json-c path decodes the message and
 * words the error. The fuzz target checks that both agree.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "checkpoint/proto/ckpt_wire.h"

#define GEN_MAX (UINT64_MAX >> 1)

struct cur {
	const char *p, *end;
};

static void ws(struct cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int lit(struct cur *c, char ch)
{
	ws(c);
	if (c->p >= c->end || *c->p != ch)
		return 0;
	c->p++;
	return 1;
}

/* Peeks at the next non-blank character. */
static int peek(struct cur *c, char ch)
{
	ws(c);
	return c->p < c->end && *c->p == ch;
}

/* A string of printable ASCII without escapes; s points into the text (not terminated). */
static int str(struct cur *c, const char **s, size_t *n)
{
	const char *q;

	if (!lit(c, '"'))
		return 0;
	for (q = c->p; q < c->end && *q != '"'; q++)
		if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e || *q == '\\')
			return 0;
	if (q >= c->end)
		return 0;
	*s = c->p;
	*n = (size_t)(q - c->p);
	c->p = q + 1;
	return 1;
}

static int str_is(struct cur *c, const char *want)
{
	const char *s;
	size_t n;

	return str(c, &s, &n) && n == strlen(want) && !memcmp(s, want, n);
}

/* A string copied into out (at most max characters, at least one). */
static int str_to(struct cur *c, char *out, size_t max)
{
	const char *s;
	size_t n;

	if (!str(c, &s, &n) || !n || n > max)
		return 0;
	memcpy(out, s, n);
	out[n] = '\0';
	return 1;
}

/* A plain non-negative integer (no sign, fraction, exponent or leading zero) up to max. */
static int num(struct cur *c, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	const char *start;

	ws(c);
	start = c->p;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		if (x > (UINT64_MAX - (uint64_t)(*c->p - '0')) / 10)
			return 0;
		x = x * 10 + (uint64_t)(*c->p - '0');
		c->p++;
	}
	if (c->p == start || (c->p - start > 1 && *start == '0') || x > max)
		return 0;
	if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E'))
		return 0;
	*v = x;
	return 1;
}

/* The key of the next member: index in keys, each seen at most once; -1 when none fits. */
static int key(struct cur *c, const char *const *keys, unsigned *seen)
{
	const char *s;
	size_t n;

	if (!str(c, &s, &n) || !lit(c, ':'))
		return -1;
	for (int i = 0; keys[i]; i++)
		if (n == strlen(keys[i]) && !memcmp(s, keys[i], n)) {
			if (*seen & (1u << i))
				return -1;
			*seen |= 1u << i;
			return i;
		}
	return -1;
}

/* Walks the members of an object, handing each key's index to fn; all keys required. */
#define OBJECT(c, keys, nkeys, body)                                                               \
	do {                                                                                       \
		unsigned seen_ = 0;                                                                \
		if (!lit(c, '{'))                                                                  \
			return 0;                                                                  \
		do {                                                                               \
			int k_ = key(c, keys, &seen_);                                             \
			if (k_ < 0)                                                                \
				return 0;                                                          \
			body                                                                       \
		} while (lit(c, ','));                                                             \
		if (!lit(c, '}') || seen_ != (1u << (nkeys)) - 1)                                  \
			return 0;                                                                  \
	} while (0)

static int location(struct cur *c, struct phx_manifest_shard *s)
{
	static const char *const keys[] = { "tier", "path", NULL };
	char tier[PHX_MANIFEST_NAME_MAX + 1], path[PHX_MANIFEST_PATH_MAX + 1];

	OBJECT(c, keys, 2, {
		if (k_ == 0 && !str_to(c, tier, PHX_MANIFEST_NAME_MAX))
			return 0;
		if (k_ == 1 && !str_to(c, path, PHX_MANIFEST_PATH_MAX))
			return 0;
	});
	return phx_manifest_shard_add_location(s, tier, path, NULL, 0) == 0;
}

static int digest(struct cur *c, struct phx_manifest_shard *s)
{
	static const char *const keys[] = { "alg", "hex", NULL };

	OBJECT(c, keys, 2, {
		if (k_ == 0 && !str_to(c, s->digest.alg, PHX_MANIFEST_NAME_MAX))
			return 0;
		if (k_ == 1 && !str_to(c, s->digest.hex, PHX_DIGEST_HEX_MAX))
			return 0;
	});
	return phx_manifest_digest_check(s->digest.alg, s->digest.hex, NULL, 0) == 0;
}

static int locations(struct cur *c, struct phx_manifest_shard *s)
{
	if (!lit(c, '['))
		return 0;
	do {
		if (s->nlocations >= PHX_MANIFEST_MAX_LOCATIONS || !location(c, s))
			return 0;
	} while (lit(c, ','));
	return lit(c, ']');
}

static int shard(struct cur *c, struct phx_manifest_shard *s)
{
	static const char *const keys[] = { "rank", "bytes", "digest", "locations", NULL };
	uint64_t v;

	OBJECT(c, keys, 4, {
		if (k_ == 0) {
			if (!num(c, PHX_MANIFEST_MAX_WORLD - 1, &v))
				return 0;
			s->rank = (uint32_t)v;
		} else if (k_ == 1) {
			if (!num(c, GEN_MAX, &s->bytes))
				return 0;
		} else if (k_ == 2) {
			if (!digest(c, s))
				return 0;
		} else if (!locations(c, s)) {
			return 0;
		}
	});
	s->filled = 1;
	return 1;
}

static int shards(struct cur *c, struct phx_wire_msg *m)
{
	size_t cap = 8;

	if (!lit(c, '[') || peek(c, ']'))
		return 0;
	m->shards = calloc(cap, sizeof(*m->shards));
	do {
		if (!m->shards || m->nshards >= PHX_WIRE_MAX_SHARDS)
			return 0;
		if (m->nshards == cap) {
			struct phx_manifest_shard *v = realloc(m->shards, 2 * cap * sizeof(*v));

			if (!v)
				return 0;
			memset(v + cap, 0, cap * sizeof(*v));
			m->shards = v;
			cap *= 2;
		}
		m->nshards++;
		if (!shard(c, &m->shards[m->nshards - 1]))
			return 0;
	} while (lit(c, ','));
	return lit(c, ']');
}

static int prepare(struct cur *c, struct phx_wire_msg *m)
{
	static const char *const keys[] = { "type", "v", "gen", "step", "shards", NULL };
	uint64_t v;

	OBJECT(c, keys, 5, {
		if (k_ == 0 && !str_is(c, "prepare"))
			return 0;
		if (k_ == 1 &&
		    (!num(c, UINT32_MAX, &v) || (v < PHX_WIRE_VERSION_MIN || v > PHX_WIRE_VERSION)))
			return 0;
		if (k_ == 2 && !num(c, GEN_MAX, &m->gen))
			return 0;
		if (k_ == 3 && !num(c, GEN_MAX, &m->step))
			return 0;
		if (k_ == 4 && !shards(c, m))
			return 0;
	});
	ws(c);
	return c->p == c->end && m->gen >= 1;
}

int phx_wire_decode_prepare_fast(const char *body, size_t len, struct phx_wire_msg *m)
{
	struct cur c = { body, body + len };

	memset(m, 0, sizeof(*m));
	if (!prepare(&c, m)) {
		phx_wire_msg_free(m);
		return 0;
	}
	m->type = PHX_MSG_PREPARE;
	m->has_gen = 1;
	return 1;
}

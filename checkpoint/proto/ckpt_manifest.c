/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "checkpoint/proto/ckpt_json.h"
#include "checkpoint/proto/ckpt_manifest.h"
#include "common/file.h"
#include "common/hex.h"
#include "checkpoint/proto/digest.h"
#include "common/log.h"

static int name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_' || *s == '.'))
			return 0;
	return 1;
}

static int text_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max)
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e || *s == '"' || *s == '\\')
			return 0;
	return 1;
}

int phx_manifest_digest_check(const char *alg, const char *hex, char *err, size_t errlen)
{
	enum phx_digest_algo algo;
	size_t n = strlen(hex), bad, want;

	/* The names proto/digest.h computes, and nothing else: a shard is checked by them. */
	if (!name_ok(alg, PHX_MANIFEST_NAME_MAX) || phx_digest_parse(alg, &algo) < 0 ||
	    strcmp(phx_digest_name(algo), alg))
		return phx_errf(err, errlen, "digest algorithm \"%.40s\" is unknown; use %s or %s",
				alg, phx_digest_name(PHX_DIGEST_XXH3),
				phx_digest_name(PHX_DIGEST_SHA256));
	bad = strspn(hex, PHX_HEX_LOWER);
	if (bad < n)
		return phx_errf(err, errlen,
				"digest hex holds '%c' at offset %zu; lower-case hex only",
				hex[bad], bad);
	want = 2 * phx_digest_len(algo);
	if (n != want)
		return phx_errf(err, errlen, "a %s digest has %zu hex characters, not %zu", alg,
				want, n);
	return 0;
}

int phx_manifest_init(struct phx_manifest *m, uint32_t job, uint64_t generation, uint64_t step,
		      const char *layout, uint32_t world, char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	if (!job || !generation || !world || world > PHX_MANIFEST_MAX_WORLD)
		return phx_errf(err, errlen,
				"manifest needs a job id, a generation from 1 and 1 to %u ranks "
				"(got job %u, generation %llu, %u ranks)",
				PHX_MANIFEST_MAX_WORLD, job, (unsigned long long)generation, world);
	if (layout && *layout && !text_ok(layout, PHX_MANIFEST_LAYOUT_MAX))
		return phx_errf(err, errlen, "layout \"%.40s\" is not printable text of at most %d",
				layout, PHX_MANIFEST_LAYOUT_MAX);
	m->version = PHX_MANIFEST_VERSION;
	m->job = job;
	m->generation = generation;
	m->step = step;
	m->created = (uint64_t)time(NULL);
	m->world = world;
	m->layout = strdup(layout ? layout : "");
	m->shards = calloc(world, sizeof(*m->shards));
	if (!m->layout || !m->shards) {
		phx_manifest_free(m);
		return phx_errf(err, errlen, "out of memory for a manifest of %u ranks", world);
	}
	for (uint32_t r = 0; r < world; r++)
		m->shards[r].rank = r;
	return 0;
}

int phx_manifest_shard_set(struct phx_manifest *m, uint32_t rank, const char *node, uint64_t bytes,
			   const char *alg, const char *hex, char *err, size_t errlen)
{
	struct phx_manifest_shard *s;
	char *copy;

	if (rank >= m->world)
		return phx_errf(err, errlen, "rank %u is outside the job's %u ranks", rank,
				m->world);
	if (!text_ok(node, PHX_MANIFEST_NODE_MAX))
		return phx_errf(err, errlen, "rank %u: node name \"%.40s\" is not a host name",
				rank, node);
	if (phx_manifest_digest_check(alg, hex, err, errlen) < 0)
		return -1;
	copy = strdup(node);
	if (!copy)
		return phx_errf(err, errlen, "out of memory");
	s = &m->shards[rank];
	free(s->node);
	for (size_t i = 0; i < s->nlocations; i++)
		free(s->locations[i].path);
	s->nlocations = 0;
	s->node = copy;
	s->bytes = bytes;
	memcpy(s->digest.alg, alg, strlen(alg) + 1); /* lengths checked above */
	memcpy(s->digest.hex, hex, strlen(hex) + 1);
	s->filled = 1;
	return 0;
}

int phx_manifest_shard_add_location(struct phx_manifest_shard *s, const char *tier,
				    const char *path, char *err, size_t errlen)
{
	struct phx_manifest_location *l;

	if (s->nlocations >= PHX_MANIFEST_MAX_LOCATIONS)
		return phx_errf(err, errlen, "rank %u: more than %d tier locations", s->rank,
				PHX_MANIFEST_MAX_LOCATIONS);
	if (!name_ok(tier, PHX_MANIFEST_NAME_MAX))
		return phx_errf(err, errlen,
				"rank %u: tier name \"%.40s\" must be 1 to %d characters of a-z, "
				"0-9, '-', '_', '.'",
				s->rank, tier, PHX_MANIFEST_NAME_MAX);
	if (!text_ok(path, PHX_MANIFEST_PATH_MAX))
		return phx_errf(err, errlen,
				"rank %u: tier %s path is not printable text of 1 to %d bytes",
				s->rank, tier, PHX_MANIFEST_PATH_MAX);
	for (size_t i = 0; i < s->nlocations; i++)
		if (!strcmp(s->locations[i].tier, tier))
			return phx_errf(err, errlen, "rank %u: tier %s is listed twice", s->rank,
					tier);
	l = &s->locations[s->nlocations];
	l->path = strdup(path);
	if (!l->path)
		return phx_errf(err, errlen, "out of memory");
	snprintf(l->tier, sizeof(l->tier), "%s", tier);
	s->nlocations++;
	return 0;
}

static const char *const state_names[] = {
	[PHX_STATE_NONE] = "",
	[PHX_STATE_REPLICATED] = "replicated",
	[PHX_STATE_SHARDED] = "sharded",
};

const char *phx_manifest_state_name(enum phx_manifest_state state)
{
	return (unsigned)state <= PHX_STATE_SHARDED ? state_names[state] : "";
}

int phx_manifest_shard_place(struct phx_manifest_shard *s, const uint32_t coord[PHX_MANIFEST_DIMS],
			     enum phx_manifest_state state, char *err, size_t errlen)
{
	if (state != PHX_STATE_REPLICATED && state != PHX_STATE_SHARDED)
		return phx_errf(err, errlen, "rank %u: state must be replicated or sharded",
				s->rank);
	for (int d = 0; d < PHX_MANIFEST_DIMS; d++)
		if (coord[d] >= PHX_MANIFEST_MAX_WORLD)
			return phx_errf(err, errlen, "rank %u: coordinate %u is out of range",
					s->rank, coord[d]);
	memcpy(s->coord, coord, sizeof(s->coord));
	s->state = state;
	return 0;
}

int phx_manifest_check_complete(const struct phx_manifest *m, char *err, size_t errlen)
{
	for (uint32_t r = 0; r < m->world; r++) {
		/* Coordinates for every rank or none: a restore maps them all. */
		if (!m->shards[r].state != !m->shards[0].state)
			return phx_errf(err, errlen,
					"generation %llu of job %u: rank %u %s coordinates, rank 0 "
					"%s",
					(unsigned long long)m->generation, m->job, r,
					m->shards[r].state ? "has" : "lacks",
					m->shards[0].state ? "has them" : "not");
		if (!m->shards[r].filled)
			return phx_errf(err, errlen,
					"generation %llu of job %u lacks the shard of rank %u",
					(unsigned long long)m->generation, m->job, r);
		if (!m->shards[r].nlocations)
			return phx_errf(err, errlen,
					"generation %llu of job %u: rank %u's shard is in no tier",
					(unsigned long long)m->generation, m->job, r);
	}
	return 0;
}

void phx_manifest_free(struct phx_manifest *m)
{
	if (m->shards)
		for (uint32_t r = 0; r < m->world; r++) {
			free(m->shards[r].node);
			for (size_t i = 0; i < m->shards[r].nlocations; i++)
				free(m->shards[r].locations[i].path);
		}
	free(m->shards);
	free(m->layout);
	memset(m, 0, sizeof(*m));
}

uint64_t phx_manifest_bytes(const struct phx_manifest *m)
{
	uint64_t sum = 0;

	for (uint32_t r = 0; r < m->world; r++)
		sum += m->shards[r].bytes;
	return sum;
}

/*
 * The manifest is written by hand rather than through a json-c tree: a
 * 16k-rank manifest is 160k objects, and building them cost the daemon
 * most of a commit.
 */
struct sbuf {
	char *s;
	size_t len, cap;
	int oom;
};

static void sb_grow(struct sbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *ns;

	if (b->oom || b->len + more + 1 <= b->cap)
		return;
	while (cap < b->len + more + 1)
		cap *= 2;
	ns = realloc(b->s, cap);
	if (!ns) {
		b->oom = 1;
		return;
	}
	b->s = ns;
	b->cap = cap;
}

static void sb_raw(struct sbuf *b, const char *s, size_t n)
{
	sb_grow(b, n);
	if (b->oom)
		return;
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

#define SB_LIT(b, lit) sb_raw(b, lit, sizeof(lit) - 1)

static void sb_u64(struct sbuf *b, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	sb_raw(b, tmp + i, sizeof(tmp) - (size_t)i);
}

/* A JSON string; what the setters let in is printable ASCII, quotes escaped anyway. */
static void sb_str(struct sbuf *b, const char *s)
{
	static const char hex[] = PHX_HEX_LOWER;
	const char *run = s;

	sb_raw(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		sb_raw(b, run, (size_t)(s - run));
		if (c == '"' || c == '\\') {
			esc[1] = (char)c;
			sb_raw(b, esc, 2);
		} else {
			sb_raw(b, esc, 6);
		}
		run = s + 1;
	}
	sb_raw(b, run, (size_t)(s - run));
	sb_raw(b, "\"", 1);
}

static void shard_text(struct sbuf *b, const struct phx_manifest_shard *s)
{
	SB_LIT(b, "{\"rank\":");
	sb_u64(b, s->rank);
	SB_LIT(b, ",\"node\":");
	sb_str(b, s->node);
	SB_LIT(b, ",\"bytes\":");
	sb_u64(b, s->bytes);
	SB_LIT(b, ",\"digest\":{\"alg\":");
	sb_str(b, s->digest.alg);
	SB_LIT(b, ",\"hex\":");
	sb_str(b, s->digest.hex);
	SB_LIT(b, "},\"locations\":[");
	for (size_t i = 0; i < s->nlocations; i++) {
		SB_LIT(b, "{\"tier\":");
		sb_str(b, s->locations[i].tier);
		SB_LIT(b, ",\"path\":");
		sb_str(b, s->locations[i].path);
		sb_raw(b, i + 1 < s->nlocations ? "}," : "}", i + 1 < s->nlocations ? 2 : 1);
	}
	SB_LIT(b, "]");
	if (s->state) {
		SB_LIT(b, ",\"coords\":[");
		for (int d = 0; d < PHX_MANIFEST_DIMS; d++) {
			if (d)
				sb_raw(b, ",", 1);
			sb_u64(b, s->coord[d]);
		}
		SB_LIT(b, "],\"state\":");
		sb_str(b, phx_manifest_state_name(s->state));
	}
	SB_LIT(b, "}");
}

char *phx_manifest_to_json(const struct phx_manifest *m, char *err, size_t errlen)
{
	struct sbuf b = { 0 };

	if (phx_manifest_check_complete(m, err, errlen) < 0)
		return NULL;
	sb_grow(&b, (size_t)m->world * 200 + 256);
	SB_LIT(&b, "{\"format\":\"" PHX_MANIFEST_FORMAT "\",\"version\":");
	sb_u64(&b, PHX_MANIFEST_VERSION);
	SB_LIT(&b, ",\"job\":");
	sb_u64(&b, m->job);
	SB_LIT(&b, ",\"generation\":");
	sb_u64(&b, m->generation);
	SB_LIT(&b, ",\"step\":");
	sb_u64(&b, m->step);
	SB_LIT(&b, ",\"created\":");
	sb_u64(&b, m->created);
	SB_LIT(&b, ",\"layout\":");
	sb_str(&b, m->layout);
	SB_LIT(&b, ",\"world\":");
	sb_u64(&b, m->world);
	SB_LIT(&b, ",\"shards\":[");
	for (uint32_t r = 0; r < m->world; r++) {
		if (r)
			sb_raw(&b, ",", 1);
		shard_text(&b, &m->shards[r]);
	}
	SB_LIT(&b, "]}");
	if (b.oom) {
		free(b.s);
		phx_errf(err, errlen, "out of memory for the manifest of %u ranks", m->world);
		return NULL;
	}
	return b.s;
}

static const char *const top_keys[] = { "format",  "version", "job",   "generation", "step",
					"created", "layout",  "world", "shards",     NULL };
static const char *const shard_keys[] = { "rank",      "node",	 "bytes", "digest",
					  "locations", "coords", "state", NULL };
static const char *const digest_keys[] = { "alg", "hex", NULL };
static const char *const location_keys[] = { "tier", "path", NULL };

static int parse_locations(struct json_object *arr, struct phx_manifest_shard *s, const char *what,
			   char *err, size_t errlen)
{
	size_t n = json_object_array_length(arr);

	if (!n)
		return phx_errf(err, errlen,
				"%s: \"locations\" is empty; a shard must be in a tier", what);
	for (size_t i = 0; i < n; i++) {
		struct json_object *l = json_object_array_get_idx(arr, i);
		const char *tier, *path;
		char lwhat[96];

		snprintf(lwhat, sizeof(lwhat), "%s location %zu", what, i);
		if (!json_object_is_type(l, json_type_object))
			return phx_errf(err, errlen, "%s: must be an object", lwhat);
		if (phx_json_only_keys(l, lwhat, location_keys, err, errlen) < 0 ||
		    phx_json_str(l, lwhat, "tier", PHX_MANIFEST_NAME_MAX, 0, &tier, NULL, err,
				 errlen) < 0 ||
		    phx_json_str(l, lwhat, "path", PHX_MANIFEST_PATH_MAX, 0, &path, NULL, err,
				 errlen) < 0)
			return -1;
		if (phx_manifest_shard_add_location(s, tier, path, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* "coords" and "state" of a version 2 shard: both or neither. */
static int parse_place(struct json_object *o, struct phx_manifest_shard *s, const char *what,
		       char *err, size_t errlen)
{
	struct json_object *arr;
	uint32_t coord[PHX_MANIFEST_DIMS];
	int has_coords, has_state;
	const char *state;
	enum phx_manifest_state st;

	if (phx_json_array(o, what, "coords", PHX_MANIFEST_DIMS, &arr, &has_coords, err, errlen) <
		    0 ||
	    phx_json_str(o, what, "state", 16, 0, &state, &has_state, err, errlen) < 0)
		return -1;
	if (!has_coords && !has_state)
		return 0;
	if (!has_coords || !has_state)
		return phx_errf(err, errlen, "%s: \"coords\" and \"state\" come together", what);
	if (json_object_array_length(arr) != PHX_MANIFEST_DIMS)
		return phx_errf(err, errlen, "%s: \"coords\" must list tp, cp, ep, dp and pp",
				what);
	for (size_t d = 0; d < PHX_MANIFEST_DIMS; d++) {
		struct json_object *v = json_object_array_get_idx(arr, d);
		int64_t x = json_object_get_int64(v);

		if (!json_object_is_type(v, json_type_int) || x < 0 || x >= PHX_MANIFEST_MAX_WORLD)
			return phx_errf(err, errlen,
					"%s: \"coords\" holds a value that is not an integer "
					"from 0 to %u",
					what, PHX_MANIFEST_MAX_WORLD - 1);
		coord[d] = (uint32_t)x;
	}
	if (!strcmp(state, "replicated"))
		st = PHX_STATE_REPLICATED;
	else if (!strcmp(state, "sharded"))
		st = PHX_STATE_SHARDED;
	else
		return phx_errf(err, errlen,
				"%s: \"state\" is \"%s\", not \"replicated\" or \"sharded\"", what,
				state);
	return phx_manifest_shard_place(s, coord, st, err, errlen);
}

static int parse_shard(struct json_object *o, struct phx_manifest *m, size_t idx, char *err,
		       size_t errlen)
{
	struct json_object *d, *locs;
	const char *node, *alg, *hex;
	uint64_t rank, bytes;
	char what[64], emsg[256];

	snprintf(what, sizeof(what), "shard %zu", idx);
	if (!json_object_is_type(o, json_type_object))
		return phx_errf(err, errlen, "%s: must be an object", what);
	if (phx_json_only_keys(o, what, shard_keys, err, errlen) < 0 ||
	    phx_json_u64(o, what, "rank", 0, m->world - 1, &rank, NULL, err, errlen) < 0)
		return -1;
	if (rank != idx)
		return phx_errf(err, errlen, "%s: holds rank %llu; shards must be in rank order",
				what, (unsigned long long)rank);
	if (phx_json_str(o, what, "node", PHX_MANIFEST_NODE_MAX, 0, &node, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, what, "bytes", 0, UINT64_MAX >> 1, &bytes, NULL, err, errlen) < 0 ||
	    phx_json_object(o, what, "digest", &d, err, errlen) < 0 ||
	    phx_json_only_keys(d, what, digest_keys, err, errlen) < 0 ||
	    phx_json_str(d, what, "alg", PHX_MANIFEST_NAME_MAX, 0, &alg, NULL, err, errlen) < 0 ||
	    phx_json_str(d, what, "hex", PHX_DIGEST_HEX_MAX, 0, &hex, NULL, err, errlen) < 0 ||
	    phx_json_array(o, what, "locations", PHX_MANIFEST_MAX_LOCATIONS, &locs, NULL, err,
			   errlen) < 0)
		return -1;
	if (phx_manifest_shard_set(m, (uint32_t)rank, node, bytes, alg, hex, emsg, sizeof(emsg)) <
	    0)
		return phx_errf(err, errlen, "%s: %s", what, emsg);
	if (parse_locations(locs, &m->shards[rank], what, err, errlen) < 0)
		return -1;
	if (m->version < 2 && (json_object_object_get_ex(o, "coords", NULL) ||
			       json_object_object_get_ex(o, "state", NULL)))
		return phx_errf(err, errlen, "%s: coordinates need manifest version 2", what);
	return parse_place(o, &m->shards[rank], what, err, errlen);
}

static int parse_top(struct json_object *o, struct phx_manifest *m, char *err, size_t errlen)
{
	uint64_t version, job, gen, step, created, world;
	const char *format, *layout;
	struct json_object *shards;
	const char *w = "manifest";

	if (phx_json_only_keys(o, w, top_keys, err, errlen) < 0 ||
	    phx_json_str(o, w, "format", 32, 0, &format, NULL, err, errlen) < 0)
		return -1;
	if (strcmp(format, PHX_MANIFEST_FORMAT))
		return phx_errf(err, errlen, "manifest: \"format\" is \"%s\", not \"%s\"", format,
				PHX_MANIFEST_FORMAT);
	if (phx_json_u64(o, w, "version", 1, 1000, &version, NULL, err, errlen) < 0)
		return -1;
	if (version > PHX_MANIFEST_VERSION)
		return phx_errf(
			err, errlen,
			"manifest: version %llu is not supported (this build reads 1 to %d)",
			(unsigned long long)version, PHX_MANIFEST_VERSION);
	if (phx_json_u64(o, w, "job", 1, UINT32_MAX, &job, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, w, "generation", 1, UINT64_MAX >> 1, &gen, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, w, "step", 0, UINT64_MAX >> 1, &step, NULL, err, errlen) < 0 ||
	    phx_json_u64(o, w, "created", 0, UINT64_MAX >> 1, &created, NULL, err, errlen) < 0 ||
	    phx_json_str(o, w, "layout", PHX_MANIFEST_LAYOUT_MAX, 1, &layout, NULL, err, errlen) <
		    0 ||
	    phx_json_u64(o, w, "world", 1, PHX_MANIFEST_MAX_WORLD, &world, NULL, err, errlen) < 0 ||
	    phx_json_array(o, w, "shards", PHX_MANIFEST_MAX_WORLD, &shards, NULL, err, errlen) < 0)
		return -1;
	if (json_object_array_length(shards) != world)
		return phx_errf(err, errlen, "manifest: %zu shards for a world of %llu ranks",
				json_object_array_length(shards), (unsigned long long)world);
	if (phx_manifest_init(m, (uint32_t)job, gen, step, layout, (uint32_t)world, err, errlen) <
	    0)
		return -1;
	m->created = created;
	m->version = (int)version;
	for (size_t i = 0; i < world; i++)
		if (parse_shard(json_object_array_get_idx(shards, i), m, i, err, errlen) < 0)
			goto fail;
	if (phx_manifest_check_complete(m, err, errlen) < 0)
		goto fail;
	return 0;
fail:
	phx_manifest_free(m);
	return -1;
}

int phx_manifest_from_json(struct json_object *obj, struct phx_manifest *m, char *err,
			   size_t errlen)
{
	struct phx_manifest tmp;

	if (parse_top(obj, &tmp, err, errlen) < 0)
		return -1;
	*m = tmp;
	return 0;
}

int phx_manifest_parse(const char *text, size_t len, struct phx_manifest *m, char *err,
		       size_t errlen)
{
	struct json_object *o;
	int rc;

	if (len > PHX_MANIFEST_MAX_BYTES)
		return phx_errf(err, errlen, "manifest of %zu bytes is over the %u byte limit", len,
				PHX_MANIFEST_MAX_BYTES);
	o = phx_json_parse_object(text, len, err, errlen);
	if (!o)
		return -1;
	rc = phx_manifest_from_json(o, m, err, errlen);
	json_object_put(o);
	return rc;
}

int phx_manifest_write_file(const struct phx_manifest *m, const char *path, char *err,
			    size_t errlen)
{
	char *text = phx_manifest_to_json(m, err, errlen);
	int rc;

	if (!text)
		return -1;
	rc = phx_file_write_atomic(path, text, strlen(text), 0644);
	free(text);
	if (rc < 0)
		return phx_errf(err, errlen, "cannot write manifest %s: %s", path, strerror(-rc));
	return 0;
}

int phx_manifest_read_file(const char *path, struct phx_manifest *m, char *err, size_t errlen)
{
	char *text, emsg[512];
	size_t len;
	int rc = phx_file_read(path, PHX_MANIFEST_MAX_BYTES, &text, &len);

	if (rc < 0)
		return phx_errf(err, errlen, "cannot read manifest %s: %s", path, strerror(-rc));
	rc = phx_manifest_parse(text, len, m, emsg, sizeof(emsg));
	free(text);
	if (rc < 0)
		return phx_errf(err, errlen, "manifest %s: %s", path, emsg);
	return 0;
}

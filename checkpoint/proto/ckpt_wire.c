/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "checkpoint/proto/ckpt_json.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "common/hex.h"
#include "common/log.h"

static const char *const names[PHX_MSG_COUNT] = {
	[PHX_MSG_HELLO] = "hello",	   [PHX_MSG_CHALLENGE] = "challenge",
	[PHX_MSG_AUTH] = "auth",	   [PHX_MSG_WELCOME] = "welcome",
	[PHX_MSG_REGISTER] = "register",   [PHX_MSG_REGISTERED] = "registered",
	[PHX_MSG_PREPARE] = "prepare",	   [PHX_MSG_ABORT] = "abort",
	[PHX_MSG_COMMIT] = "commit",	   [PHX_MSG_ABORTED] = "aborted",
	[PHX_MSG_QUERY] = "query",	   [PHX_MSG_MANIFEST] = "manifest",
	[PHX_MSG_EVENT] = "event",	   [PHX_MSG_INTERVAL] = "interval",
	[PHX_MSG_ERROR] = "error",	   [PHX_MSG_LS] = "ls",
	[PHX_MSG_LIST] = "list",	   [PHX_MSG_RM] = "rm",
	[PHX_MSG_REMOVED] = "removed",	   [PHX_MSG_STATUS] = "status",
	[PHX_MSG_HEARTBEAT] = "heartbeat", [PHX_MSG_GOODPUT] = "goodput",
};

const char *phx_msg_name(enum phx_msg type)
{
	if (type <= PHX_MSG_NONE || type >= PHX_MSG_COUNT)
		return "?";
	return names[type];
}

static enum phx_msg type_of(const char *s)
{
	for (int t = 1; t < PHX_MSG_COUNT; t++)
		if (!strcmp(names[t], s))
			return (enum phx_msg)t;
	return PHX_MSG_NONE;
}

/* ------------------------------------------------------------------ fields */

#define U32 UINT32_MAX
#define GEN_MAX (UINT64_MAX >> 1)

struct ctx {
	struct json_object *o;
	struct phx_wire_msg *m;
	const char *what;
	char *err;
	size_t errlen;
};

static int u64(struct ctx *c, const char *key, uint64_t min, uint64_t max, uint64_t *out,
	       int optional)
{
	int present;

	*out = 0;
	return phx_json_u64(c->o, c->what, key, min, max, out, optional ? &present : NULL, c->err,
			    c->errlen);
}

static int u32(struct ctx *c, const char *key, uint64_t min, uint64_t max, uint32_t *out,
	       int optional)
{
	uint64_t v;

	if (u64(c, key, min, max, &v, optional) < 0)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int str(struct ctx *c, const char *key, size_t max, int empty_ok, const char **out,
	       int optional)
{
	int present;

	*out = NULL;
	return phx_json_str(c->o, c->what, key, max, empty_ok, out, optional ? &present : NULL,
			    c->err, c->errlen);
}

static int hex_opt(struct ctx *c, const char *key, size_t len, const char **out, int optional)
{
	if (str(c, key, len, 0, out, optional) < 0)
		return -1;
	if (!*out)
		return 0;
	if ((*out)[strspn(*out, PHX_HEX_LOWER)])
		return phx_errf(c->err, c->errlen, "%s: \"%s\" must be lower-case hex", c->what,
				key);
	if (strlen(*out) != len)
		return phx_errf(c->err, c->errlen, "%s: \"%s\" must hold %zu hex characters",
				c->what, key, len);
	return 0;
}

static int hex(struct ctx *c, const char *key, size_t len, const char **out)
{
	return hex_opt(c, key, len, out, 0);
}

static int gen_field(struct ctx *c, int optional, uint64_t min)
{
	int present = 0;

	c->m->gen = 0;
	if (phx_json_u64(c->o, c->what, "gen", min, GEN_MAX, &c->m->gen, optional ? &present : NULL,
			 c->err, c->errlen) < 0)
		return -1;
	c->m->has_gen = optional ? present : 1;
	return 0;
}

static int job_field(struct ctx *c, int optional)
{
	int present = 0;
	uint64_t v = 0;

	if (phx_json_u64(c->o, c->what, "job", 1, U32, &v, optional ? &present : NULL, c->err,
			 c->errlen) < 0)
		return -1;
	c->m->job = (uint32_t)v;
	c->m->has_job = optional ? present : 1;
	return 0;
}

/* ------------------------------------------------------------------ per type */

static int d_hello(struct ctx *c)
{
	static const char *const agent[] = { "v", "type", "role", "job", "uid", "node", NULL };
	static const char *const admin[] = { "v", "type", "role", "cred", NULL };
	const char *role;

	if (str(c, "role", 16, 0, &role, 0) < 0)
		return -1;
	if (!strcmp(role, "admin")) {
		c->m->role = PHX_ROLE_ADMIN;
		if (phx_json_only_keys(c->o, c->what, admin, c->err, c->errlen) < 0)
			return -1;
		/* A MUNGE credential: how an admin client off the daemon's host says who it is. */
		return str(c, "cred", PHX_WIRE_CRED_MAX, 0, &c->m->cred, 1);
	}
	if (!strcmp(role, "driver")) {
		if (c->m->version < 3)
			return phx_errf(c->err, c->errlen,
					"hello: role \"driver\" needs protocol version 3, not %u",
					c->m->version);
		c->m->role = PHX_ROLE_DRIVER;
	} else if (!strcmp(role, "agent")) {
		c->m->role = PHX_ROLE_AGENT;
	} else {
		return phx_errf(c->err, c->errlen,
				"hello: \"role\" is \"%s\", not \"agent\", \"driver\" or \"admin\"",
				role);
	}
	if (phx_json_only_keys(c->o, c->what, agent, c->err, c->errlen) < 0 ||
	    job_field(c, 0) < 0 || u32(c, "uid", 0, U32 - 1, &c->m->uid, 0) < 0)
		return -1;
	return str(c, "node", PHX_MANIFEST_NODE_MAX, 0, &c->m->node, 0);
}

static int d_register(struct ctx *c)
{
	if (u32(c, "nodes", 1, 1u << 20, &c->m->nodes, 0) < 0 ||
	    u32(c, "ranks", 1, PHX_MANIFEST_MAX_WORLD, &c->m->ranks, 0) < 0 ||
	    str(c, "layout", PHX_MANIFEST_LAYOUT_MAX, 1, &c->m->layout, 0) < 0)
		return -1;
	if (c->m->nodes > c->m->ranks)
		return phx_errf(c->err, c->errlen, "register: %u nodes for only %u ranks",
				c->m->nodes, c->m->ranks);
	return str(c, "interval", 63, 0, &c->m->interval, 1);
}

static int d_shard(struct ctx *c, struct json_object *o, size_t i)
{
	static const char *const keys[] = { "rank", "bytes", "digest", "locations", NULL };
	static const char *const dkeys[] = { "alg", "hex", NULL };
	static const char *const lkeys[] = { "tier", "path", NULL };
	struct phx_manifest_shard *s = &c->m->shards[i];
	struct json_object *d, *locs;
	const char *alg, *hx;
	uint64_t rank;
	char what[48];
	struct ctx sc = { o, c->m, what, c->err, c->errlen };

	/* Names the shard in errors; formatted once, not per field. */
	snprintf(what, sizeof(what), "prepare shard %zu", i);
	if (!json_object_is_type(o, json_type_object))
		return phx_errf(c->err, c->errlen, "%s: must be an object", what);
	if (phx_json_only_keys(o, what, keys, c->err, c->errlen) < 0 ||
	    u64(&sc, "rank", 0, PHX_MANIFEST_MAX_WORLD - 1, &rank, 0) < 0 ||
	    u64(&sc, "bytes", 0, GEN_MAX, &s->bytes, 0) < 0 ||
	    phx_json_object(o, what, "digest", &d, c->err, c->errlen) < 0 ||
	    phx_json_only_keys(d, what, dkeys, c->err, c->errlen) < 0 ||
	    phx_json_str(d, what, "alg", PHX_MANIFEST_NAME_MAX, 0, &alg, NULL, c->err, c->errlen) <
		    0 ||
	    phx_json_str(d, what, "hex", PHX_DIGEST_HEX_MAX, 0, &hx, NULL, c->err, c->errlen) < 0 ||
	    phx_json_array(o, what, "locations", PHX_MANIFEST_MAX_LOCATIONS, &locs, NULL, c->err,
			   c->errlen) < 0)
		return -1;
	s->rank = (uint32_t)rank;
	s->filled = 1;
	if (phx_manifest_digest_check(alg, hx, c->err, c->errlen) < 0)
		return -1;
	memcpy(s->digest.alg, alg, strlen(alg) + 1); /* lengths checked above */
	memcpy(s->digest.hex, hx, strlen(hx) + 1);
	if (!json_object_array_length(locs))
		return phx_errf(c->err, c->errlen, "%s: \"locations\" is empty", what);
	for (size_t j = 0; j < json_object_array_length(locs); j++) {
		struct json_object *l = json_object_array_get_idx(locs, j);
		const char *tier, *path;

		if (!json_object_is_type(l, json_type_object))
			return phx_errf(c->err, c->errlen, "%s: location %zu must be an object",
					what, j);
		if (phx_json_only_keys(l, what, lkeys, c->err, c->errlen) < 0 ||
		    phx_json_str(l, what, "tier", PHX_MANIFEST_NAME_MAX, 0, &tier, NULL, c->err,
				 c->errlen) < 0 ||
		    phx_json_str(l, what, "path", PHX_MANIFEST_PATH_MAX, 0, &path, NULL, c->err,
				 c->errlen) < 0 ||
		    phx_manifest_shard_add_location(s, tier, path, c->err, c->errlen) < 0)
			return -1;
	}
	return 0;
}

static int d_prepare(struct ctx *c)
{
	struct json_object *arr;
	size_t n;

	if (gen_field(c, 0, 1) < 0 || u64(c, "step", 0, GEN_MAX, &c->m->step, 0) < 0 ||
	    phx_json_array(c->o, c->what, "shards", PHX_WIRE_MAX_SHARDS, &arr, NULL, c->err,
			   c->errlen) < 0)
		return -1;
	n = json_object_array_length(arr);
	if (!n)
		return phx_errf(c->err, c->errlen, "prepare: \"shards\" is empty");
	c->m->shards = calloc(n, sizeof(*c->m->shards));
	if (!c->m->shards)
		return phx_errf(c->err, c->errlen, "out of memory");
	c->m->nshards = n;
	for (size_t i = 0; i < n; i++)
		if (d_shard(c, json_object_array_get_idx(arr, i), i) < 0)
			return -1;
	return 0;
}

static int opt_u64(struct ctx *c, const char *key, uint64_t *out, int *has)
{
	*has = 0;
	*out = 0;
	return phx_json_u64(c->o, c->what, key, 0, GEN_MAX, out, has, c->err, c->errlen);
}

static int d_event(struct ctx *c)
{
	static const char *const kinds[] = { "save", "persist",	  "failure", "node_bad", "crash",
					     "hang", "straggler", "check",   "xid",	 "restart",
					     "done", "stop",	  "wait",    "role",	 NULL };
	const char *const *k;
	const char *kind;

	if (str(c, "kind", 16, 0, &c->m->kind, 0) < 0)
		return -1;
	kind = c->m->kind;
	for (k = kinds; *k && strcmp(*k, kind); k++)
		;
	if (!*k)
		return phx_errf(
			c->err, c->errlen,
			"event: \"kind\" \"%s\" is not save, persist, failure, node_bad, "
			"crash, hang, straggler, check, xid, restart, done, stop, wait or role",
			kind);
	if (str(c, "node", PHX_MANIFEST_NODE_MAX, 0, &c->m->node, 1) < 0 ||
	    gen_field(c, 1, 1) < 0 || opt_u64(c, "value", &c->m->value, &c->m->has_value) < 0 ||
	    u64(c, "bytes", 0, GEN_MAX, &c->m->bytes, 1) < 0 ||
	    opt_u64(c, "step", &c->m->step, &c->m->has_step) < 0 ||
	    str(c, "reason", PHX_WIRE_REASON_MAX, 0, &c->m->reason, 1) < 0)
		return -1;
	if ((!strcmp(kind, "node_bad") || !strcmp(kind, "check") || !strcmp(kind, "xid")) &&
	    !c->m->node)
		return phx_errf(c->err, c->errlen, "event: a %s event must name the \"node\"",
				kind);
	/* A role's ledger is the job's, not a node's; its record is the reason. */
	if (!strcmp(kind, "role") && (c->m->node || !c->m->reason))
		return phx_errf(c->err, c->errlen,
				"event: a role event names no \"node\" and carries its record as "
				"\"reason\"");
	if (!strcmp(kind, "check") && (!c->m->has_value || c->m->value > 1))
		return phx_errf(c->err, c->errlen,
				"event: a check event needs \"value\" 1 (passed) or 0 (failed)");
	return 0;
}

static int d_manifest(struct ctx *c)
{
	struct json_object *man;
	int has = json_object_object_get_ex(c->o, "manifest", &man);

	if (gen_field(c, 0, 0) < 0)
		return -1;
	if (has != (c->m->gen > 0))
		return phx_errf(
			c->err, c->errlen,
			"manifest: a manifest comes with a generation above 0, and only then");
	if (has && !json_object_is_type(man, json_type_object))
		return phx_errf(c->err, c->errlen, "manifest: \"manifest\" must be an object");
	c->m->payload = has ? man : NULL;
	/* The job's owner, to the admin socket: verify reads the shards as that user. */
	c->m->has_uid = json_object_object_get_ex(c->o, "uid", NULL);
	if (c->m->has_uid && !has)
		return phx_errf(c->err, c->errlen, "manifest: a uid only with a manifest");
	return c->m->has_uid ? u32(c, "uid", 0, U32 - 1, &c->m->uid, 0) : 0;
}

static int d_interval(struct ctx *c, enum phx_wire_side side)
{
	static const char *const modes[] = { "steps", "seconds", "auto", NULL };
	const char *const *k;

	if (side == PHX_SIDE_DAEMON)
		return 0;
	if (str(c, "mode", 16, 0, &c->m->mode, 0) < 0)
		return -1;
	for (k = modes; *k && strcmp(*k, c->m->mode); k++)
		;
	if (!*k)
		return phx_errf(c->err, c->errlen, "interval: \"mode\" \"%s\" is not known",
				c->m->mode);
	if (u64(c, "steps", 0, GEN_MAX, &c->m->steps, 0) < 0 ||
	    u64(c, "seconds", 0, GEN_MAX, &c->m->seconds, 0) < 0)
		return -1;
	return 0;
}

static int d_array_payload(struct ctx *c, const char *key)
{
	return phx_json_array(c->o, c->what, key, PHX_MANIFEST_MAX_WORLD, &c->m->payload, NULL,
			      c->err, c->errlen);
}

/* Keys each type may carry, by the side that reads it. */
struct spec {
	enum phx_msg type;
	enum phx_wire_side side;
	const char *const keys[9];
};

static const struct spec specs[] = {
	{ PHX_MSG_HELLO, PHX_SIDE_DAEMON, { NULL } }, /* role-dependent, d_hello */
	{ PHX_MSG_AUTH, PHX_SIDE_DAEMON, { "mac", "nonce" } },
	{ PHX_MSG_REGISTER, PHX_SIDE_DAEMON, { "nodes", "ranks", "layout", "interval" } },
	{ PHX_MSG_PREPARE, PHX_SIDE_DAEMON, { "gen", "step", "shards" } },
	{ PHX_MSG_ABORT, PHX_SIDE_DAEMON, { "gen", "reason" } },
	{ PHX_MSG_QUERY, PHX_SIDE_DAEMON, { "gen", "job" } },
	{ PHX_MSG_EVENT,
	  PHX_SIDE_DAEMON,
	  { "kind", "node", "gen", "value", "bytes", "step", "reason" } },
	{ PHX_MSG_HEARTBEAT, PHX_SIDE_DAEMON, { "step" } },
	{ PHX_MSG_GOODPUT, PHX_SIDE_DAEMON, { "job" } },
	{ PHX_MSG_GOODPUT, PHX_SIDE_CLIENT, { "job", "report" } },
	{ PHX_MSG_INTERVAL, PHX_SIDE_DAEMON, { NULL } },
	{ PHX_MSG_LS, PHX_SIDE_DAEMON, { "job" } },
	{ PHX_MSG_RM, PHX_SIDE_DAEMON, { "job", "gen" } },
	{ PHX_MSG_STATUS, PHX_SIDE_DAEMON, { NULL } },
	{ PHX_MSG_CHALLENGE, PHX_SIDE_CLIENT, { "nonce" } },
	{ PHX_MSG_WELCOME, PHX_SIDE_CLIENT, { "committed", "step", "proof" } },
	{ PHX_MSG_REGISTERED, PHX_SIDE_CLIENT, { "committed", "step", "keep", "heartbeat_ms" } },
	{ PHX_MSG_COMMIT, PHX_SIDE_CLIENT, { "gen", "step", "keep_from" } },
	{ PHX_MSG_ABORTED, PHX_SIDE_CLIENT, { "gen", "reason" } },
	{ PHX_MSG_MANIFEST, PHX_SIDE_CLIENT, { "gen", "manifest", "uid" } },
	{ PHX_MSG_INTERVAL, PHX_SIDE_CLIENT, { "mode", "steps", "seconds" } },
	{ PHX_MSG_ERROR, PHX_SIDE_CLIENT, { "reason" } },
	{ PHX_MSG_LIST, PHX_SIDE_CLIENT, { "generations" } },
	{ PHX_MSG_REMOVED, PHX_SIDE_CLIENT, { "job", "gen" } },
	{ PHX_MSG_STATUS, PHX_SIDE_CLIENT, { "jobs", "agents", "generations", "untrusted" } },
};

static const struct spec *spec_of(enum phx_msg type, enum phx_wire_side side)
{
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		if (specs[i].type == type && specs[i].side == side)
			return &specs[i];
	return NULL;
}

static int check_keys(struct ctx *c, const struct spec *sp)
{
	const char *keys[12] = { "v", "type" };
	size_t n = 2;

	for (size_t i = 0; i < 9 && sp->keys[i]; i++)
		keys[n++] = sp->keys[i];
	keys[n] = NULL;
	return phx_json_only_keys(c->o, c->what, keys, c->err, c->errlen);
}

static int decode_fields(struct ctx *c, enum phx_wire_side side)
{
	struct phx_wire_msg *m = c->m;

	switch (m->type) {
	case PHX_MSG_HELLO:
		return d_hello(c);
	case PHX_MSG_AUTH:
		if (hex(c, "mac", PHX_WIRE_MAC_HEX, &m->mac) < 0)
			return -1;
		return hex_opt(c, "nonce", PHX_WIRE_NONCE_HEX, &m->nonce, 1);
	case PHX_MSG_CHALLENGE:
		return hex(c, "nonce", PHX_WIRE_NONCE_HEX, &m->nonce);
	case PHX_MSG_REGISTER:
		return d_register(c);
	case PHX_MSG_WELCOME:
	case PHX_MSG_REGISTERED:
		if (u64(c, "committed", 0, GEN_MAX, &m->committed, 0) < 0 ||
		    u64(c, "step", 0, GEN_MAX, &m->step, 0) < 0)
			return -1;
		if (m->type == PHX_MSG_WELCOME)
			return hex_opt(c, "proof", PHX_WIRE_MAC_HEX, &m->proof, 1);
		if (u32(c, "keep", 1, 1000, &m->keep, 0) < 0)
			return -1;
		return u64(c, "heartbeat_ms", 1, 3600000, &m->heartbeat_ms, 1);
	case PHX_MSG_PREPARE:
		return d_prepare(c);
	case PHX_MSG_ABORT:
	case PHX_MSG_ABORTED:
		if (gen_field(c, 0, 1) < 0)
			return -1;
		return str(c, "reason", PHX_WIRE_REASON_MAX, 0, &m->reason, 0);
	case PHX_MSG_COMMIT:
		if (gen_field(c, 0, 1) < 0 || u64(c, "step", 0, GEN_MAX, &m->step, 0) < 0)
			return -1;
		return u64(c, "keep_from", 1, GEN_MAX, &m->keep_from, 0);
	case PHX_MSG_QUERY:
		return gen_field(c, 0, 0) < 0 ? -1 : job_field(c, 1);
	case PHX_MSG_MANIFEST:
		return d_manifest(c);
	case PHX_MSG_EVENT:
		return d_event(c);
	case PHX_MSG_HEARTBEAT:
		return opt_u64(c, "step", &m->step, &m->has_step);
	case PHX_MSG_GOODPUT:
		if (job_field(c, 0) < 0)
			return -1;
		if (side == PHX_SIDE_DAEMON)
			return 0;
		if (!json_object_object_get_ex(c->o, "report", &m->payload) ||
		    !json_object_is_type(m->payload, json_type_object))
			return phx_errf(c->err, c->errlen, "goodput: \"report\" must be an object");
		return 0;
	case PHX_MSG_INTERVAL:
		return d_interval(c, side);
	case PHX_MSG_ERROR:
		return str(c, "reason", 4096, 0, &m->reason, 0);
	case PHX_MSG_LS:
		return job_field(c, 1);
	case PHX_MSG_RM:
	case PHX_MSG_REMOVED:
		return job_field(c, 0) < 0 ? -1 : gen_field(c, 0, 1);
	case PHX_MSG_LIST:
		return d_array_payload(c, "generations");
	case PHX_MSG_STATUS:
		if (side == PHX_SIDE_DAEMON || d_array_payload(c, "jobs") < 0)
			return side == PHX_SIDE_DAEMON ? 0 : -1;
		m->payload = c->o; /* the whole report */
		return 0;
	default:
		return phx_errf(c->err, c->errlen, "no decoder for %s", phx_msg_name(m->type));
	}
}

int phx_wire_decode(const char *body, size_t len, enum phx_wire_side side, struct phx_wire_msg *m,
		    char *err, size_t errlen)
{
	/* Prepares come in bursts of thousands; plain ones skip the json-c tree. */
	if (side == PHX_SIDE_DAEMON && phx_wire_decode_prepare_fast(body, len, m))
		return 0;
	return phx_wire_decode_json(body, len, side, m, err, errlen);
}

int phx_wire_decode_json(const char *body, size_t len, enum phx_wire_side side,
			 struct phx_wire_msg *m, char *err, size_t errlen)
{
	struct ctx c = { NULL, m, "message", err, errlen };
	const struct spec *sp;
	const char *type;
	uint64_t v;
	char emsg[512];

	memset(m, 0, sizeof(*m));
	c.o = phx_json_parse_object(body, len, emsg, sizeof(emsg));
	if (!c.o)
		return phx_errf(err, errlen, "message: %s", emsg);
	m->obj = c.o;
	if (phx_json_u64(c.o, "message", "v", 0, UINT32_MAX, &v, NULL, err, errlen) < 0)
		goto fail;
	if (v < PHX_WIRE_VERSION_MIN || v > PHX_WIRE_VERSION) {
		phx_errf(err, errlen, "message: protocol version %llu, this build speaks %d to %d",
			 (unsigned long long)v, PHX_WIRE_VERSION_MIN, PHX_WIRE_VERSION);
		goto fail;
	}
	m->version = (uint32_t)v;
	if (phx_json_str(c.o, "message", "type", 16, 0, &type, NULL, err, errlen) < 0)
		goto fail;
	m->type = type_of(type);
	sp = m->type ? spec_of(m->type, side) : NULL;
	if (!sp) {
		phx_errf(err, errlen, "message: type \"%s\" is not one %s reads", type,
			 side == PHX_SIDE_DAEMON ? "phalanx-ckptd" : "a client");
		goto fail;
	}
	c.what = names[m->type];
	if ((m->type != PHX_MSG_HELLO && check_keys(&c, sp) < 0) || decode_fields(&c, side) < 0)
		goto fail;
	return 0;
fail:
	phx_wire_msg_free(m);
	return -1;
}

/* ------------------------------------------------------------------ order */

void phx_wire_order_init(struct phx_wire_order *o, enum phx_wire_side side, enum phx_wire_role role)
{
	o->side = side;
	o->role = role;
	o->stage = 0;
}

static const char *role_name(enum phx_wire_role role)
{
	if (role == PHX_ROLE_ADMIN)
		return "an admin";
	return role == PHX_ROLE_DRIVER ? "a driver" : "an agent";
}

static int role_may(enum phx_wire_role role, enum phx_msg t)
{
	if (role == PHX_ROLE_ADMIN)
		return t == PHX_MSG_LS || t == PHX_MSG_QUERY || t == PHX_MSG_RM ||
		       t == PHX_MSG_STATUS || t == PHX_MSG_GOODPUT;
	if (role == PHX_ROLE_DRIVER)
		return t == PHX_MSG_EVENT;
	return t == PHX_MSG_PREPARE || t == PHX_MSG_ABORT || t == PHX_MSG_QUERY ||
	       t == PHX_MSG_EVENT || t == PHX_MSG_INTERVAL || t == PHX_MSG_HEARTBEAT;
}

static int order_daemon(struct phx_wire_order *o, const struct phx_wire_msg *m, char *err,
			size_t errlen)
{
	static const enum phx_msg agent_first[] = { PHX_MSG_HELLO, PHX_MSG_AUTH, PHX_MSG_REGISTER };
	enum phx_msg t = m->type;

	if (o->stage == 0) {
		if (t != PHX_MSG_HELLO)
			goto early;
		o->role = m->role;
		o->stage = o->role == PHX_ROLE_ADMIN ? 3 : 1;
		return 0;
	}
	if (o->stage < 3) {
		if (t != agent_first[o->stage])
			goto early;
		/* A driver does not register: the agents give the job its shape. */
		o->stage = o->role == PHX_ROLE_DRIVER && t == PHX_MSG_AUTH ? 3 : o->stage + 1;
		return 0;
	}
	if (!role_may(o->role, t))
		return phx_errf(err, errlen, "%s: not a message %s sends, or sent twice",
				phx_msg_name(t), role_name(o->role));
	if (o->role == PHX_ROLE_AGENT && t == PHX_MSG_QUERY && m->has_job)
		return phx_errf(err, errlen, "query: an agent asks about its own job only");
	return 0;
early:
	return phx_errf(err, errlen, "%s: out of order; expected %s", phx_msg_name(t),
			phx_msg_name(agent_first[o->stage]));
}

static int order_client(struct phx_wire_order *o, const struct phx_wire_msg *m, char *err,
			size_t errlen)
{
	enum phx_msg t = m->type;
	enum phx_msg want =
		o->stage == 0 && o->role != PHX_ROLE_ADMIN ? PHX_MSG_CHALLENGE : PHX_MSG_WELCOME;

	if (t == PHX_MSG_ERROR)
		return 0;
	if (o->stage < 2) {
		if (t != want)
			return phx_errf(err, errlen, "%s: out of order; expected %s",
					phx_msg_name(t), phx_msg_name(want));
		o->stage = t == PHX_MSG_CHALLENGE ? 1 : 2;
		return 0;
	}
	if (t == PHX_MSG_CHALLENGE || t == PHX_MSG_WELCOME)
		return phx_errf(err, errlen, "%s: sent twice", phx_msg_name(t));
	if (o->role != PHX_ROLE_ADMIN && (t == PHX_MSG_LIST || t == PHX_MSG_REMOVED ||
					  t == PHX_MSG_STATUS || t == PHX_MSG_GOODPUT))
		return phx_errf(err, errlen, "%s: an admin reply on an agent's connection",
				phx_msg_name(t));
	if (o->role == PHX_ROLE_DRIVER && t != PHX_MSG_ERROR)
		return phx_errf(err, errlen, "%s: not a reply a driver gets", phx_msg_name(t));
	return 0;
}

int phx_wire_order_accept(struct phx_wire_order *o, const struct phx_wire_msg *m, char *err,
			  size_t errlen)
{
	if (o->side == PHX_SIDE_DAEMON)
		return order_daemon(o, m, err, errlen);
	return order_client(o, m, err, errlen);
}

/* ------------------------------------------------------------------ frames */

void phx_wire_reader_init(struct phx_wire_reader *r, size_t max_frame)
{
	memset(r, 0, sizeof(*r));
	r->max = max_frame ? max_frame : PHX_WIRE_MAX_FRAME;
}

void phx_wire_reader_free(struct phx_wire_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* Drops the frame handed out last, and compacts when the dead head is large. */
static void drop_taken(struct phx_wire_reader *r)
{
	r->off += r->taken;
	r->taken = 0;
	if (r->off == r->len) {
		r->off = r->len = 0;
	} else if (r->off > r->cap / 2) {
		memmove(r->buf, r->buf + r->off, r->len - r->off);
		r->len -= r->off;
		r->off = 0;
	}
}

static int reserve(struct phx_wire_reader *r, size_t more)
{
	size_t cap = r->cap ? r->cap : 4096;
	char *nb;

	drop_taken(r);
	if (r->len + more <= r->cap)
		return 0;
	if (r->off) {
		memmove(r->buf, r->buf + r->off, r->len - r->off);
		r->len -= r->off;
		r->off = 0;
		if (r->len + more <= r->cap)
			return 0;
	}
	while (cap < r->len + more)
		cap *= 2;
	nb = realloc(r->buf, cap);
	if (!nb)
		return -1;
	r->buf = nb;
	r->cap = cap;
	return 0;
}

int phx_wire_reader_feed(struct phx_wire_reader *r, const void *data, size_t len)
{
	if (!len)
		return 0;
	if (reserve(r, len) < 0)
		return -1;
	memcpy(r->buf + r->len, data, len);
	r->len += len;
	return 0;
}

ssize_t phx_wire_reader_read(struct phx_wire_reader *r, int fd)
{
	ssize_t n;

	/* Room for a few small frames; a large one grows the buffer as it arrives. */
	if (reserve(r, 8192) < 0)
		return -ENOMEM;
	n = read(fd, r->buf + r->len, r->cap - r->len);
	if (n < 0)
		return -errno;
	r->len += (size_t)n;
	return n;
}

static uint32_t be32(const char *p)
{
	const unsigned char *u = (const unsigned char *)p;

	return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

int phx_wire_reader_next(struct phx_wire_reader *r, const char **body, size_t *len, char *err,
			 size_t errlen)
{
	size_t avail;
	uint32_t n;

	drop_taken(r);
	avail = r->len - r->off;
	if (avail < 4)
		return 0;
	n = be32(r->buf + r->off);
	if (n == 0 || n > r->max)
		return phx_errf(err, errlen, "frame of %u bytes; frames hold 1 to %zu bytes", n,
				r->max);
	if (avail < 4 + (size_t)n)
		return 0;
	*body = r->buf + r->off + 4;
	*len = n;
	r->taken = 4 + (size_t)n;
	return 1;
}

void phx_wire_writer_free(struct phx_wire_writer *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

int phx_wire_writer_put_frame(struct phx_wire_writer *w, const char *frame, size_t len)
{
	if (w->off && w->off == w->len)
		w->off = w->len = 0;
	if (w->len + len > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		char *nb;

		if (w->off) {
			memmove(w->buf, w->buf + w->off, w->len - w->off);
			w->len -= w->off;
			w->off = 0;
		}
		while (cap < w->len + len)
			cap *= 2;
		if (cap != w->cap) {
			nb = realloc(w->buf, cap);
			if (!nb)
				return -1;
			w->buf = nb;
			w->cap = cap;
		}
	}
	memcpy(w->buf + w->len, frame, len);
	w->len += len;
	return 0;
}

char *phx_wire_frame(struct json_object *obj, size_t *len)
{
	const char *text;
	size_t n;
	char *out = NULL;

	if (!obj)
		return NULL;
	/* The oldest version that has the message, so that older peers read it. */
	if (!json_object_object_get_ex(obj, "v", NULL))
		json_object_object_add(obj, "v", json_object_new_int(PHX_WIRE_VERSION_SEND));
	text = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
							   JSON_C_TO_STRING_NOSLASHESCAPE);
	n = text ? strlen(text) : 0;
	if (n && n <= PHX_WIRE_MAX_FRAME)
		out = malloc(n + 4);
	if (out) {
		out[0] = (char)(n >> 24);
		out[1] = (char)(n >> 16);
		out[2] = (char)(n >> 8);
		out[3] = (char)n;
		memcpy(out + 4, text, n);
		*len = n + 4;
	}
	json_object_put(obj);
	return out;
}

int phx_wire_writer_put(struct phx_wire_writer *w, struct json_object *obj)
{
	size_t len;
	char *frame = phx_wire_frame(obj, &len);
	int rc;

	if (!frame)
		return -1;
	rc = phx_wire_writer_put_frame(w, frame, len);
	free(frame);
	return rc;
}

int phx_wire_writer_flush(struct phx_wire_writer *w, int fd)
{
	while (w->off < w->len) {
		ssize_t n = send(fd, w->buf + w->off, w->len - w->off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		w->off += (size_t)n;
	}
	w->off = w->len = 0;
	return 1;
}

/* ------------------------------------------------------------------ builders */

struct json_object *phx_wire_new(enum phx_msg type)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(phx_msg_name(type)));
	return o;
}

struct json_object *phx_wire_hello_agent(uint32_t job, uint32_t uid, const char *node)
{
	struct json_object *o = phx_wire_new(PHX_MSG_HELLO);

	json_object_object_add(o, "role", json_object_new_string("agent"));
	json_object_object_add(o, "job", json_object_new_uint64(job));
	json_object_object_add(o, "uid", json_object_new_uint64(uid));
	json_object_object_add(o, "node", json_object_new_string(node));
	return o;
}

struct json_object *phx_wire_hello_driver(uint32_t job, uint32_t uid, const char *node)
{
	struct json_object *o = phx_wire_hello_agent(job, uid, node);

	json_object_object_add(o, "role", json_object_new_string("driver"));
	json_object_object_add(o, "v", json_object_new_int(3));
	return o;
}

struct json_object *phx_wire_hello_admin(const char *cred)
{
	struct json_object *o = phx_wire_new(PHX_MSG_HELLO);

	json_object_object_add(o, "role", json_object_new_string("admin"));
	if (cred)
		json_object_object_add(o, "cred", json_object_new_string(cred));
	return o;
}

struct json_object *phx_wire_error(const char *reason)
{
	struct json_object *o = phx_wire_new(PHX_MSG_ERROR);

	json_object_object_add(o, "reason", json_object_new_string(reason));
	return o;
}

struct json_object *phx_wire_prepare(uint64_t gen, uint64_t step,
				     const struct phx_manifest_shard *shards, size_t n)
{
	struct json_object *o = phx_wire_new(PHX_MSG_PREPARE), *arr = json_object_new_array();

	json_object_object_add(o, "gen", json_object_new_uint64(gen));
	json_object_object_add(o, "step", json_object_new_uint64(step));
	for (size_t i = 0; i < n; i++) {
		struct json_object *s = json_object_new_object(), *d = json_object_new_object(),
				   *locs = json_object_new_array();

		json_object_object_add(s, "rank", json_object_new_uint64(shards[i].rank));
		json_object_object_add(s, "bytes", json_object_new_uint64(shards[i].bytes));
		json_object_object_add(d, "alg", json_object_new_string(shards[i].digest.alg));
		json_object_object_add(d, "hex", json_object_new_string(shards[i].digest.hex));
		json_object_object_add(s, "digest", d);
		for (size_t j = 0; j < shards[i].nlocations; j++) {
			struct json_object *l = json_object_new_object();

			json_object_object_add(l, "tier",
					       json_object_new_string(shards[i].locations[j].tier));
			json_object_object_add(l, "path",
					       json_object_new_string(shards[i].locations[j].path));
			json_object_array_add(locs, l);
		}
		json_object_object_add(s, "locations", locs);
		json_object_array_add(arr, s);
	}
	json_object_object_add(o, "shards", arr);
	return o;
}

/* ------------------------------------------------------------------ auth */

int phx_wire_nonce(char out[PHX_WIRE_NONCE_HEX + 1])
{
	unsigned char raw[PHX_WIRE_NONCE_HEX / 2];

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -1;
	phx_hex_encode(raw, sizeof(raw), out);
	return 0;
}

/* HMAC-SHA256 keyed by the job token over "phalanx-ckptd-LABEL:v1:NONCE:JOB:UID:NODE". */
static int token_mac(const char *label, const char *token, const char *nonce, uint32_t job,
		     uint32_t uid, const char *node, char out[PHX_WIRE_MAC_HEX + 1])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	char msg[512];
	int len;

	len = snprintf(msg, sizeof(msg), "phalanx-ckptd-%s:v1:%s:%u:%u:%s", label, nonce, job, uid,
		       node);
	if (len < 0 || (size_t)len >= sizeof(msg) || !token || strlen(token) != PHX_TOKEN_HEX_LEN)
		return -1;
	if (!HMAC(EVP_sha256(), token, PHX_TOKEN_HEX_LEN, (unsigned char *)msg, (size_t)len, mac,
		  &mac_len) ||
	    mac_len * 2 != PHX_WIRE_MAC_HEX)
		return -1;
	phx_hex_encode(mac, mac_len, out);
	OPENSSL_cleanse(mac, sizeof(mac));
	return 0;
}

int phx_wire_auth_mac(const char *token, const char *nonce, uint32_t job, uint32_t uid,
		      const char *node, char out[PHX_WIRE_MAC_HEX + 1])
{
	return token_mac("auth", token, nonce, job, uid, node, out);
}

/* token_mac keyed by the job's token as the cluster key mints it. */
static int key_mac(const char *label, const struct phx_key *key, const char *nonce, uint32_t job,
		   uint32_t uid, const char *node, char out[PHX_WIRE_MAC_HEX + 1])
{
	char token[PHX_TOKEN_HEX_LEN + 1];
	int rc = -1;

	if (phx_token_mint(key, job, uid, token) == 0)
		rc = token_mac(label, token, nonce, job, uid, node, out);
	OPENSSL_cleanse(token, sizeof(token));
	return rc;
}

/*
 * 1 when expected was computed (rc 0) and given is that MAC, compared in
 * constant time; expected is wiped either way.
 */
static int mac_equal(int rc, char expected[PHX_WIRE_MAC_HEX + 1], const char *given)
{
	int ok = !rc && given && strlen(given) == PHX_WIRE_MAC_HEX &&
		 CRYPTO_memcmp(expected, given, PHX_WIRE_MAC_HEX) == 0;

	OPENSSL_cleanse(expected, PHX_WIRE_MAC_HEX + 1);
	return ok;
}

int phx_wire_welcome_proof(const struct phx_key *key, const char *nonce, uint32_t job, uint32_t uid,
			   const char *node, char out[PHX_WIRE_MAC_HEX + 1])
{
	return key_mac("welcome", key, nonce, job, uid, node, out);
}

int phx_wire_welcome_check(const char *token, const char *nonce, uint32_t job, uint32_t uid,
			   const char *node, const char *proof)
{
	char expected[PHX_WIRE_MAC_HEX + 1];

	return mac_equal(token_mac("welcome", token, nonce, job, uid, node, expected), expected,
			 proof);
}

int phx_wire_auth_verify(const struct phx_key *key, const char *nonce, uint32_t job, uint32_t uid,
			 const char *node, const char *mac)
{
	char expected[PHX_WIRE_MAC_HEX + 1];

	return mac_equal(key_mac("auth", key, nonce, job, uid, node, expected), expected, mac);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a generation manifest (JSON, json-c): strict about what a
 * restore relies on (format, version, generation, digest algorithm, and
 * each shard's rank, size, digest and file name), silent about the rest.
 * Manifests come from files anyone with access to the tier could edit, so
 * every field is checked and a shard's file name is derived, never taken.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "common/digest.h"
#include "common/log.h"
#include "launcher/agent_ckpt.h"

static int hex_decode(const char *s, unsigned char *out, size_t n)
{
	if (strlen(s) != 2 * n)
		return -1;
	for (size_t i = 0; i < 2 * n; i++) {
		char ch = s[i];
		int v = ch >= '0' && ch <= '9'	 ? ch - '0'
			: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
						 : -1;

		if (v < 0)
			return -1;
		out[i / 2] = (unsigned char)(i % 2 ? (out[i / 2] << 4) | v : v);
	}
	return 0;
}

static int get_int(struct json_object *o, const char *key, int64_t min, int64_t *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return -1;
	*out = json_object_get_int64(v);
	return *out < min ? -1 : 0;
}

static const char *get_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static int entry_of(struct json_object *r, enum phx_digest_algo algo, struct phx_ckpt_entry *out,
		    char *err, size_t errlen)
{
	int64_t rank, bytes;
	const char *digest = get_str(r, "digest"), *file = get_str(r, "file");
	char want[64];

	if (!json_object_is_type(r, json_type_object) || get_int(r, "rank", 0, &rank) < 0 ||
	    get_int(r, "bytes", 0, &bytes) < 0 || !digest || !file)
		return phx_errf(err, errlen, "a shard entry lacks rank, bytes, digest or file");
	snprintf(want, sizeof(want), "rank-%lld.shard", (long long)rank);
	/* The file name is derived, never a path taken from the manifest. */
	if (strcmp(file, want))
		return phx_errf(err, errlen, "shard file '%.64s' is not '%s'", file, want);
	if (hex_decode(digest, out->digest, phx_digest_len(algo)) < 0)
		return phx_errf(err, errlen, "the digest of rank %lld is not %zu hex bytes",
				(long long)rank, phx_digest_len(algo));
	out->rank = (unsigned long)rank;
	out->bytes = (unsigned long long)bytes;
	out->algo = (int)algo;
	return 0;
}

int phx_ckpt_manifest_find(const char *json, unsigned long rank, struct phx_ckpt_entry *out,
			   char *err, size_t errlen)
{
	struct json_object *o = json_tokener_parse(json), *shards;
	enum phx_digest_algo algo;
	const char *fmt, *dname;
	int64_t version, step;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (!o || !json_object_is_type(o, json_type_object)) {
		phx_errf(err, errlen, "not a JSON object");
		goto out;
	}
	fmt = get_str(o, "format");
	dname = get_str(o, "digest");
	if (!fmt || strcmp(fmt, "phalanx-checkpoint") || get_int(o, "version", 1, &version) < 0 ||
	    version != 1) {
		phx_errf(err, errlen, "not a version 1 phalanx-checkpoint manifest");
		goto out;
	}
	if (get_int(o, "generation", 0, &step) < 0 || !dname ||
	    phx_digest_parse(dname, &algo) < 0 ||
	    !json_object_object_get_ex(o, "shards", &shards) ||
	    !json_object_is_type(shards, json_type_array)) {
		phx_errf(err, errlen, "generation, digest or shards missing or malformed");
		goto out;
	}
	rc = 1;
	for (size_t i = 0; i < json_object_array_length(shards); i++) {
		struct phx_ckpt_entry e;

		if (entry_of(json_object_array_get_idx(shards, i), algo, &e, err, errlen) < 0) {
			rc = -1;
			break;
		}
		if (e.rank == rank && rc == 1) {
			*out = e;
			out->step = (long)step;
			rc = 0;
		}
	}
out:
	json_object_put(o);
	return rc;
}

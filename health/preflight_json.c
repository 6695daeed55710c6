/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Preflight results as JSON: written by phalanx-check on each node, read
 * back by the front end, and replayed from files recorded on this or
 * another cluster. Files come from outside, so the reader is strict: every
 * key is known, every value has its type and range, and a bad one is
 * reported with its path ("nodes[3].gpus[1].h2d_gbps: ...").
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/file.h"
#include "common/log.h"
#include "health/preflight.h"

#define MAX_FILE (64u << 20)
#define MAX_DEPTH 16
#define MAX_MEASURE 1e9 /* TFLOP/s, GB/s: anything larger is a broken file */

struct field {
	const char *key;
	enum json_type type; /* json_type_double also takes an int */
};

/* Every key of obj is one of fields, with its type; else err names it. */
static int check_keys(struct json_object *obj, const struct field *fields, const char *path,
		      char *err, size_t errlen)
{
	json_object_object_foreach(obj, key, val)
	{
		const struct field *f = fields;
		enum json_type t = json_object_get_type(val);

		while (f->key && strcmp(f->key, key))
			f++;
		if (!f->key)
			return phx_errf(err, errlen, "%s%s'%s': unknown key", path,
					*path ? "." : "", key);
		if (t != f->type && !(f->type == json_type_double && t == json_type_int))
			return phx_errf(err, errlen, "%s%s%s: expected a %s, found a %s", path,
					*path ? "." : "", key, json_type_to_name(f->type),
					json_type_to_name(t));
	}
	return 0;
}

static int get_text(struct json_object *obj, const char *key, char *out, size_t len, bool required,
		    const char *path, char *err, size_t errlen)
{
	struct json_object *v;
	const char *s;

	if (!json_object_object_get_ex(obj, key, &v)) {
		if (required)
			return phx_errf(err, errlen, "%s: '%s' is missing", path, key);
		out[0] = '\0';
		return 0;
	}
	s = json_object_get_string(v);
	if ((size_t)json_object_get_string_len(v) >= len ||
	    strlen(s) != (size_t)json_object_get_string_len(v))
		return phx_errf(err, errlen, "%s.%s: longer than %zu bytes or holds a NUL", path,
				key, len - 1);
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

static int get_num(struct json_object *obj, const char *key, double *out, double max,
		   const char *path, char *err, size_t errlen)
{
	struct json_object *v;
	double d;

	*out = 0;
	if (!json_object_object_get_ex(obj, key, &v))
		return 0;
	d = json_object_get_double(v);
	if (!isfinite(d) || d < 0 || d > max)
		return phx_errf(err, errlen, "%s.%s: %g is not between 0 and %g", path, key, d,
				max);
	*out = d;
	return 0;
}

static const struct field gpu_fields[] = {
	{ "index", json_type_int },	     { "name", json_type_string },
	{ "error", json_type_string },	     { "gemm_ok", json_type_boolean },
	{ "gemm_tflops", json_type_double }, { "h2d_gbps", json_type_double },
	{ "d2h_gbps", json_type_double },    { "memtest_mib", json_type_int },
	{ "memtest_errors", json_type_int }, { NULL, json_type_null },
};

static int parse_gpu(struct json_object *obj, struct phx_check_gpu *gpu, const char *path,
		     char *err, size_t errlen)
{
	struct json_object *v;
	double d;

	if (!json_object_is_type(obj, json_type_object))
		return phx_errf(err, errlen, "%s: expected an object", path);
	if (check_keys(obj, gpu_fields, path, err, errlen) < 0)
		return -1;
	if (!json_object_object_get_ex(obj, "index", &v))
		return phx_errf(err, errlen, "%s: 'index' is missing", path);
	errno = 0;
	if (json_object_get_int64(v) < 0 || json_object_get_int64(v) >= PHX_CHECK_MAX_GPUS)
		return phx_errf(err, errlen, "%s.index: not between 0 and %d", path,
				PHX_CHECK_MAX_GPUS - 1);
	gpu->index = (int)json_object_get_int64(v);
	if (get_text(obj, "name", gpu->name, sizeof(gpu->name), false, path, err, errlen) < 0 ||
	    get_text(obj, "error", gpu->error, sizeof(gpu->error), false, path, err, errlen) < 0)
		return -1;
	gpu->gemm_ok = json_object_object_get_ex(obj, "gemm_ok", &v) && json_object_get_boolean(v);
	if (get_num(obj, "gemm_tflops", &gpu->gemm_tflops, MAX_MEASURE, path, err, errlen) < 0 ||
	    get_num(obj, "h2d_gbps", &gpu->h2d_gbps, MAX_MEASURE, path, err, errlen) < 0 ||
	    get_num(obj, "d2h_gbps", &gpu->d2h_gbps, MAX_MEASURE, path, err, errlen) < 0 ||
	    get_num(obj, "memtest_mib", &d, 1 << 30, path, err, errlen) < 0)
		return -1;
	gpu->memtest_mib = (unsigned)d;
	if (json_object_object_get_ex(obj, "memtest_errors", &v)) {
		if (json_object_get_int64(v) < 0)
			return phx_errf(err, errlen, "%s.memtest_errors: negative", path);
		gpu->memtest_errors = (uint64_t)json_object_get_int64(v);
	}
	return 0;
}

static const struct field link_fields[] = {
	{ "round", json_type_int },	{ "peer", json_type_string },
	{ "status", json_type_string }, { "busbw_gbps", json_type_double },
	{ "error", json_type_string },	{ NULL, json_type_null },
};

static int parse_link(struct json_object *obj, struct phx_check_link *link, const char *path,
		      char *err, size_t errlen)
{
	struct json_object *v;
	char status[16];
	int s;

	if (!json_object_is_type(obj, json_type_object))
		return phx_errf(err, errlen, "%s: expected an object", path);
	if (check_keys(obj, link_fields, path, err, errlen) < 0)
		return -1;
	if (!json_object_object_get_ex(obj, "round", &v) || json_object_get_int64(v) < 1 ||
	    json_object_get_int64(v) > PHX_CHECK_ROUNDS)
		return phx_errf(err, errlen, "%s.round: missing or not 1 or 2", path);
	link->round = (int)json_object_get_int64(v);
	if (get_text(obj, "peer", link->peer, sizeof(link->peer), true, path, err, errlen) < 0 ||
	    get_text(obj, "status", status, sizeof(status), true, path, err, errlen) < 0 ||
	    get_text(obj, "error", link->error, sizeof(link->error), false, path, err, errlen) < 0)
		return -1;
	for (s = PHX_LINK_OK; s <= PHX_LINK_ERROR; s++) {
		if (!strcmp(status, phx_link_status_name((enum phx_link_status)s)))
			break;
	}
	if (s > PHX_LINK_ERROR)
		return phx_errf(err, errlen, "%s.status: '%s' is not ok, timeout or error", path,
				status);
	link->status = (enum phx_link_status)s;
	if (!link->peer[0])
		return phx_errf(err, errlen, "%s.peer: empty", path);
	return get_num(obj, "busbw_gbps", &link->busbw_gbps, MAX_MEASURE, path, err, errlen);
}

static const struct field node_fields[] = {
	{ "node", json_type_string }, { "error", json_type_string }, { "gpus", json_type_array },
	{ "links", json_type_array }, { NULL, json_type_null },
};

static int parse_gpus(struct json_object *list, struct phx_check_node *node, const char *path,
		      char *err, size_t errlen)
{
	size_t n = json_object_array_length(list);
	char sub[PHX_CHECK_NAME + 64];

	if (n > PHX_CHECK_MAX_GPUS)
		return phx_errf(err, errlen, "%s.gpus: more than %d", path, PHX_CHECK_MAX_GPUS);
	node->gpus = calloc(n + 1, sizeof(*node->gpus));
	if (!node->gpus)
		return phx_errf(err, errlen, "out of memory");
	for (size_t g = 0; g < n; g++) {
		snprintf(sub, sizeof(sub), "%s.gpus[%zu]", path, g);
		if (parse_gpu(json_object_array_get_idx(list, g), &node->gpus[g], sub, err,
			      errlen) < 0)
			return -1;
		node->n_gpus++;
		for (size_t h = 0; h < g; h++) {
			if (node->gpus[h].index == node->gpus[g].index)
				return phx_errf(err, errlen, "%s.index: GPU %d appears twice", sub,
						node->gpus[g].index);
		}
	}
	return 0;
}

static int parse_links(struct json_object *list, struct phx_check_node *node, const char *path,
		       char *err, size_t errlen)
{
	size_t n = json_object_array_length(list);
	char sub[PHX_CHECK_NAME + 64];

	if (n > PHX_CHECK_ROUNDS)
		return phx_errf(err, errlen, "%s.links: more than %d", path, PHX_CHECK_ROUNDS);
	for (size_t l = 0; l < n; l++) {
		snprintf(sub, sizeof(sub), "%s.links[%zu]", path, l);
		if (parse_link(json_object_array_get_idx(list, l), &node->links[l], sub, err,
			       errlen) < 0)
			return -1;
		if (l && node->links[0].round == node->links[l].round)
			return phx_errf(err, errlen, "%s.round: round %d appears twice", sub,
					node->links[l].round);
		node->n_links++;
	}
	return 0;
}

static int parse_node(struct json_object *obj, struct phx_check_node *node, const char *where,
		      char *err, size_t errlen)
{
	struct json_object *v;
	char path[PHX_CHECK_NAME + 32];

	memset(node, 0, sizeof(*node));
	if (!json_object_is_type(obj, json_type_object))
		return phx_errf(err, errlen, "%s: expected an object", where);
	if (check_keys(obj, node_fields, where, err, errlen) < 0 ||
	    get_text(obj, "node", node->name, sizeof(node->name), true, where, err, errlen) < 0 ||
	    get_text(obj, "error", node->error, sizeof(node->error), false, where, err, errlen) < 0)
		goto fail;
	if (!node->name[0]) {
		phx_errf(err, errlen, "%s.node: empty", where);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s(%s)", where, node->name);
	if (json_object_object_get_ex(obj, "gpus", &v) &&
	    parse_gpus(v, node, path, err, errlen) < 0)
		goto fail;
	if (json_object_object_get_ex(obj, "links", &v) &&
	    parse_links(v, node, path, err, errlen) < 0)
		goto fail;
	return 0;
fail:
	phx_check_node_free(node);
	return -1;
}

int phx_check_node_from_json(struct json_object *obj, struct phx_check_node *node, char *err,
			     size_t errlen)
{
	return parse_node(obj, node, "node", err, errlen);
}

void phx_check_node_free(struct phx_check_node *node)
{
	free(node->gpus);
	node->gpus = NULL;
	node->n_gpus = 0;
}

void phx_check_results_free(struct phx_check_results *res)
{
	for (size_t i = 0; i < res->n; i++)
		phx_check_node_free(&res->nodes[i]);
	free(res->nodes);
	res->nodes = NULL;
	res->n = 0;
}

int phx_check_results_add(struct phx_check_results *res, struct phx_check_node *node)
{
	struct phx_check_node *nodes;

	if (res->n >= PHX_CHECK_MAX_NODES)
		return -1;
	nodes = realloc(res->nodes, (res->n + 1) * sizeof(*nodes));
	if (!nodes)
		return -1;
	res->nodes = nodes;
	res->nodes[res->n++] = *node;
	memset(node, 0, sizeof(*node));
	return 0;
}

static int add_node(struct phx_check_results *res, struct json_object *obj, const char *where,
		    char *err, size_t errlen)
{
	struct phx_check_node node;

	if (parse_node(obj, &node, where, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < res->n; i++) {
		if (!strcmp(res->nodes[i].name, node.name)) {
			phx_check_node_free(&node);
			return phx_errf(err, errlen, "%s.node: '%s' appears twice", where,
					res->nodes[i].name);
		}
	}
	if (phx_check_results_add(res, &node) < 0) {
		phx_check_node_free(&node);
		return phx_errf(err, errlen, "%s: out of memory or more than %d nodes", where,
				PHX_CHECK_MAX_NODES);
	}
	return 0;
}

static const struct field doc_fields[] = {
	{ "phalanx_check", json_type_int },
	{ "nodes", json_type_array },
	{ "verdicts", json_type_array },
	{ NULL, json_type_null },
};

static int parse_doc(struct json_object *doc, struct phx_check_results *out, char *err,
		     size_t errlen)
{
	struct json_object *v, *nodes;
	char where[32];

	if (!json_object_is_type(doc, json_type_object))
		return phx_errf(err, errlen, "expected a JSON object");
	if (!json_object_object_get_ex(doc, "phalanx_check", &v))
		return add_node(out, doc, "node", err, errlen);
	if (check_keys(doc, doc_fields, "", err, errlen) < 0)
		return -1;
	if (json_object_get_int64(v) != PHX_CHECK_VERSION)
		return phx_errf(err, errlen, "phalanx_check: version %lld is not %d",
				(long long)json_object_get_int64(v), PHX_CHECK_VERSION);
	if (!json_object_object_get_ex(doc, "nodes", &nodes))
		return phx_errf(err, errlen, "'nodes' is missing");
	for (size_t i = 0; i < json_object_array_length(nodes); i++) {
		snprintf(where, sizeof(where), "nodes[%zu]", i);
		if (add_node(out, json_object_array_get_idx(nodes, i), where, err, errlen) < 0)
			return -1;
	}
	return 0;
}

int phx_check_results_parse(const char *buf, size_t len, struct phx_check_results *out, char *err,
			    size_t errlen)
{
	struct json_tokener *tok = json_tokener_new_ex(MAX_DEPTH);
	struct json_object *doc;
	enum json_tokener_error jerr;
	size_t end;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!tok)
		return phx_errf(err, errlen, "out of memory");
	if (len > INT32_MAX) {
		json_tokener_free(tok);
		return phx_errf(err, errlen, "larger than %d bytes", INT32_MAX);
	}
	doc = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!doc || jerr != json_tokener_success) {
		json_object_put(doc);
		return phx_errf(err, errlen, "not JSON: %s at byte %zu",
				json_tokener_error_desc(jerr == json_tokener_success
								? json_tokener_continue
								: jerr),
				end);
	}
	while (end < len && strchr(" \t\r\n", buf[end]) && buf[end])
		end++;
	if (end < len) {
		json_object_put(doc);
		return phx_errf(err, errlen, "text after the JSON value at byte %zu", end);
	}
	rc = parse_doc(doc, out, err, errlen);
	json_object_put(doc);
	if (rc < 0)
		phx_check_results_free(out);
	return rc;
}

int phx_check_results_load(const char *path, struct phx_check_results *out, char *err,
			   size_t errlen)
{
	char *buf = NULL, why[PHX_CHECK_TEXT];
	size_t len = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (phx_file_read(path, MAX_FILE, &buf, &len) < 0)
		return phx_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
	rc = phx_check_results_parse(buf, len, out, why, sizeof(why));
	free(buf);
	if (rc < 0)
		return phx_errf(err, errlen, "%s: %s", path, why);
	return 0;
}

/* ------------------------------------------------------------ writing */

static void add_text(struct json_object *obj, const char *key, const char *s)
{
	if (s[0])
		json_object_object_add(obj, key, json_object_new_string(s));
}

/* Two decimals: enough for any threshold and stable across printf versions. */
static void add_num(struct json_object *obj, const char *key, double d)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%.2f", d);
	json_object_object_add(obj, key, json_object_new_double_s(d, buf));
}

static struct json_object *gpu_json(const struct phx_check_gpu *gpu)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "index", json_object_new_int(gpu->index));
	add_text(o, "name", gpu->name);
	add_text(o, "error", gpu->error);
	if (gpu->error[0])
		return o;
	json_object_object_add(o, "gemm_ok", json_object_new_boolean(gpu->gemm_ok));
	add_num(o, "gemm_tflops", gpu->gemm_tflops);
	add_num(o, "h2d_gbps", gpu->h2d_gbps);
	add_num(o, "d2h_gbps", gpu->d2h_gbps);
	json_object_object_add(o, "memtest_mib", json_object_new_int((int)gpu->memtest_mib));
	json_object_object_add(o, "memtest_errors",
			       json_object_new_int64((int64_t)gpu->memtest_errors));
	return o;
}

static struct json_object *link_json(const struct phx_check_link *l)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "round", json_object_new_int(l->round));
	json_object_object_add(o, "peer", json_object_new_string(l->peer));
	json_object_object_add(o, "status",
			       json_object_new_string(phx_link_status_name(l->status)));
	if (l->status == PHX_LINK_OK)
		add_num(o, "busbw_gbps", l->busbw_gbps);
	add_text(o, "error", l->error);
	return o;
}

struct json_object *phx_check_node_to_json(const struct phx_check_node *node)
{
	struct json_object *o = json_object_new_object();
	struct json_object *gpus = json_object_new_array(), *links = json_object_new_array();

	if (!o || !gpus || !links)
		goto nomem;
	json_object_object_add(o, "node", json_object_new_string(node->name));
	add_text(o, "error", node->error);
	for (size_t g = 0; g < node->n_gpus; g++) {
		if (json_object_array_add(gpus, gpu_json(&node->gpus[g])) < 0)
			goto nomem;
	}
	for (size_t l = 0; l < node->n_links; l++) {
		if (json_object_array_add(links, link_json(&node->links[l])) < 0)
			goto nomem;
	}
	json_object_object_add(o, "gpus", gpus);
	json_object_object_add(o, "links", links);
	return o;
nomem:
	json_object_put(gpus);
	json_object_put(links);
	json_object_put(o);
	return NULL;
}

static struct json_object *verdict_json(const struct phx_check_verdict *v)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "node", json_object_new_string(v->node));
	json_object_object_add(o, "state", json_object_new_string(phx_check_state_name(v->state)));
	add_text(o, "reason", v->reason);
	add_text(o, "note", v->note);
	add_text(o, "bad_link", v->bad_link);
	return o;
}

struct json_object *phx_check_results_to_json(const struct phx_check_results *res,
					      const struct phx_check_verdict *verdicts)
{
	struct json_object *doc = json_object_new_object(), *nodes = json_object_new_array();
	struct json_object *list = verdicts ? json_object_new_array() : NULL;

	if (!doc || !nodes || (verdicts && !list))
		goto nomem;
	json_object_object_add(doc, "phalanx_check", json_object_new_int(PHX_CHECK_VERSION));
	for (size_t i = 0; i < res->n; i++) {
		if (json_object_array_add(nodes, phx_check_node_to_json(&res->nodes[i])) < 0)
			goto nomem;
		if (verdicts && json_object_array_add(list, verdict_json(&verdicts[i])) < 0)
			goto nomem;
	}
	json_object_object_add(doc, "nodes", nodes);
	if (list)
		json_object_object_add(doc, "verdicts", list);
	return doc;
nomem:
	json_object_put(list);
	json_object_put(nodes);
	json_object_put(doc);
	return NULL;
}

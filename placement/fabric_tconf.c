/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Slurm's topology.conf, as topology/tree and topology/block read it:
 *   SwitchName=s0 Nodes=node[01-32] LinkSpeed=100
 *   SwitchName=spine Switches=s[0-3]
 *   BlockName=b0 Nodes=gb[01-18]      (an NVLink domain here)
 *   BlockSizes=18,36                  (accepted, not used)
 * Keys are case-insensitive, '#' starts a comment, a '\' at the end of a
 * line continues it. LinkSpeed has no unit in Slurm and is not used.
 */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "placement/fabric_int.h"
#include "common/yaml.h"

#define MAX_TOKENS 16

struct token {
	char *key;
	char *value;
};

struct tline {
	struct fab_builder *b;
	const char *file;
	unsigned line;
	struct token tok[MAX_TOKENS];
	size_t n;
	char *err;
	size_t errlen;
};

static const char *const switch_keys[] = { "SwitchName", "Switches", "Nodes", "LinkSpeed" };
static const char *const block_keys[] = { "BlockName", "Nodes" };

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static int fail(struct tline *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct tline *t, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(t->err, t->errlen, "%s:%u: %s", t->file, t->line, msg);
	return -1;
}

/* Splits "Key=Value Key=\"Value\"" in place. */
static int tokenize(struct tline *t, char *text)
{
	char *p = text;

	t->n = 0;
	for (;;) {
		char *eq;

		while (is_space(*p))
			p++;
		if (!*p)
			return 0;
		if (t->n == MAX_TOKENS)
			return fail(t, "more than %d Key=Value items on one line", MAX_TOKENS);
		t->tok[t->n].key = p;
		while (*p && !is_space(*p) && *p != '=')
			p++;
		if (*p != '=') {
			*p = '\0';
			return fail(t, "'%.60s' is not Key=Value", t->tok[t->n].key);
		}
		eq = p;
		*eq = '\0';
		p++;
		if (*p == '"') {
			t->tok[t->n].value = ++p;
			while (*p && *p != '"')
				p++;
			if (!*p)
				return fail(t, "the value of %.60s has no closing quote",
					    t->tok[t->n].key);
		} else {
			t->tok[t->n].value = p;
			while (*p && !is_space(*p))
				p++;
		}
		if (*p)
			*p++ = '\0';
		if (!t->tok[t->n].key[0])
			return fail(t, "'=%.60s' has no key", t->tok[t->n].value);
		t->n++;
	}
}

static int key_in(const char *key, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!strcasecmp(key, keys[i]))
			return (int)i;
	}
	return -1;
}

static int unknown_key(struct tline *t, const char *key, const char *const *keys, size_t n)
{
	const char *near = phx_yaml_suggest(key, keys, n);
	char hint[80] = "";

	if (near)
		snprintf(hint, sizeof(hint), "; did you mean '%s'?", near);
	return fail(t, "unknown key '%.60s'%s", key, hint);
}

/* Fills vals[] by key index; refuses unknown, repeated and empty keys. */
static int collect(struct tline *t, const char *const *keys, size_t n, const char **vals)
{
	for (size_t i = 0; i < n; i++)
		vals[i] = NULL;
	for (size_t i = 0; i < t->n; i++) {
		int k = key_in(t->tok[i].key, keys, n);

		if (k < 0)
			return unknown_key(t, t->tok[i].key, keys, n);
		if (vals[k])
			return fail(t, "%s is given twice", keys[k]);
		if (!t->tok[i].value[0])
			return fail(t, "%s= has no value", keys[k]);
		vals[k] = t->tok[i].value;
	}
	return 0;
}

static int add(struct tline *t, enum fab_decl_kind kind, const char *name, const char *members)
{
	char where[300];

	snprintf(where, sizeof(where), "%s:%u", t->file, t->line);
	if (phx_fab_builder_claim(t->b, kind != FAB_DOMAIN, t->file, t->err, t->errlen) < 0)
		return -1;
	if (phx_fab_builder_add(t->b, kind, name, members, NULL, where) < 0) {
		snprintf(t->err, t->errlen, "out of memory reading %s", t->file);
		return -1;
	}
	return 0;
}

static int switch_line(struct tline *t)
{
	const char *v[4];

	if (collect(t, switch_keys, 4, v) < 0)
		return -1;
	if (v[1] && v[2])
		return fail(t,
			    "switch '%.60s' has both Switches= and Nodes=; a switch has one or the "
			    "other",
			    v[0]);
	if (!v[1] && !v[2])
		return fail(t, "switch '%.60s' has neither Switches= nor Nodes=", v[0]);
	return add(t, v[2] ? FAB_LEAF : FAB_SWITCH, v[0], v[2] ? v[2] : v[1]);
}

static int block_line(struct tline *t)
{
	const char *v[2];

	if (collect(t, block_keys, 2, v) < 0)
		return -1;
	if (!v[1])
		return fail(t, "block '%.60s' has no Nodes=", v[0]);
	return add(t, FAB_DOMAIN, v[0], v[1]);
}

static int parse_line(struct tline *t, char *text)
{
	static const char *const first[] = { "SwitchName", "BlockName", "BlockSizes" };
	int k;

	if (tokenize(t, text) < 0)
		return -1;
	if (t->n == 0)
		return 0;
	k = key_in(t->tok[0].key, first, 3);
	if (k == 0)
		return switch_line(t);
	if (k == 1)
		return block_line(t);
	if (k == 2)
		return 0;
	return fail(t,
		    "a line starting with '%.60s=' is not SwitchName=, BlockName= or BlockSizes=",
		    t->tok[0].key);
}

/* Appends one physical line without its comment; true when it continues. */
static bool take_physical(const char *s, size_t n, char *out, size_t *out_len)
{
	size_t end = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '#' && !(i && s[i - 1] == '\\'))
			break;
		end = i + 1;
	}
	while (end && is_space(s[end - 1]))
		end--;
	if (end && s[end - 1] == '\\') {
		memcpy(out + *out_len, s, end - 1);
		*out_len += end - 1;
		out[(*out_len)++] = ' ';
		return true;
	}
	memcpy(out + *out_len, s, end);
	*out_len += end;
	return false;
}

int phx_fab_parse_tconf(struct fab_builder *b, const char *name, const char *buf, size_t len,
			char *err, size_t errlen)
{
	struct tline t = { .b = b, .file = name, .err = err, .errlen = errlen, .line = 1 };
	char *text = malloc(len + 2);
	size_t pos = 0, lineno = 1;
	int rc = 0;

	if (!text || phx_fab_builder_add_source(b, name) < 0) {
		free(text);
		snprintf(err, errlen, "out of memory reading %s", name);
		return -1;
	}
	if (memchr(buf, '\0', len)) {
		free(text);
		snprintf(err, errlen, "%s: contains a NUL byte; is this a text file?", name);
		return -1;
	}
	while (pos < len && rc == 0) {
		size_t text_len = 0;
		bool more = true;

		t.line = (unsigned)lineno;
		while (more && pos < len) {
			const char *nl = memchr(buf + pos, '\n', len - pos);
			size_t n = nl ? (size_t)(nl - (buf + pos)) : len - pos;

			more = take_physical(buf + pos, n, text, &text_len);
			pos += n + (nl ? 1 : 0);
			lineno++;
		}
		text[text_len] = '\0';
		rc = parse_line(&t, text);
	}
	free(text);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict YAML tree, built from libyaml's event stream. Events rather than
 * yaml_document_t: the document API expands aliases and keeps going after
 * a second document, and we want to stop at the first thing we refuse.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/file.h"
#include "common/yaml.h"

#define TAG_STR "tag:yaml.org,2002:str"
#define TAG_SEQ "tag:yaml.org,2002:seq"
#define TAG_MAP "tag:yaml.org,2002:map"
/* How much of a bad value an error message quotes. */
#define SHOW_MAX 48
#define PATH_MAX_LEN 256

struct frame {
	struct phx_ynode *node;
	size_t cap; /* allocated items */
	char *key; /* mapping: key read, value not yet */
	unsigned key_line;
	unsigned key_column;
};

struct builder {
	struct phx_ydoc *doc;
	const char *buf;
	size_t len;
	struct frame stack[PHX_YAML_MAX_DEPTH];
	int depth;
	size_t n_nodes;
	char *err;
	size_t errlen;
};

/* ------------------------------------------------------------ messages */

static int mark_error(const struct builder *b, const yaml_mark_t *mark, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int mark_error(const struct builder *b, const yaml_mark_t *mark, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return phx_errf(b->err, b->errlen, "%s:%zu:%zu: %s", b->doc->name, mark->line + 1,
			mark->column + 1, msg);
}

/* Copies s for a message: control bytes become '?', long values are cut. */
static void show(char *out, size_t outlen, const char *s)
{
	size_t i, n = 0;

	for (i = 0; s[i] && n + 4 < outlen && i < SHOW_MAX; i++) {
		unsigned char c = (unsigned char)s[i];

		out[n++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	/* Cut before a character, not inside one: messages stay UTF-8. */
	while (s[i] && n > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) {
		i--;
		n--;
	}
	if (s[i] && n + 4 <= outlen) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

static void append(char *out, size_t outlen, size_t *used, const char *s)
{
	size_t n = strlen(s);

	if (*used >= outlen)
		return;
	if (n > outlen - 1 - *used)
		n = outlen - 1 - *used;
	memcpy(out + *used, s, n);
	*used += n;
	out[*used] = '\0';
}

char *phx_ynode_path(const struct phx_ynode *node, char *out, size_t outlen)
{
	const struct phx_ynode *chain[PHX_YAML_MAX_DEPTH + 1];
	size_t n = 0, used = 0;

	if (!outlen)
		return out;
	out[0] = '\0';
	for (; node && node->parent && n < PHX_YAML_MAX_DEPTH + 1; node = node->parent)
		chain[n++] = node;
	while (n--) {
		char part[SHOW_MAX + 8];

		if (chain[n]->key) {
			if (used)
				append(out, outlen, &used, ".");
			show(part, sizeof(part), chain[n]->key);
		} else {
			snprintf(part, sizeof(part), "[%zu]", chain[n]->index);
		}
		append(out, outlen, &used, part);
	}
	return out;
}

static int vnode_error(const struct phx_ydoc *doc, const struct phx_ynode *node, bool at_key,
		       char *err, size_t errlen, const char *fmt, va_list ap)
	__attribute__((format(printf, 6, 0)));

static int vnode_error(const struct phx_ydoc *doc, const struct phx_ynode *node, bool at_key,
		       char *err, size_t errlen, const char *fmt, va_list ap)
{
	const char *name = doc && doc->name ? doc->name : "(yaml)";
	char path[PATH_MAX_LEN], msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (!node)
		return phx_errf(err, errlen, "%s: %s", name, msg);
	if (at_key && node->key)
		return phx_errf(err, errlen, "%s:%u:%u: %s", name, node->key_line, node->key_column,
				msg);
	phx_ynode_path(node, path, sizeof(path));
	if (!path[0] || at_key)
		return phx_errf(err, errlen, "%s:%u:%u: %s", name, node->line, node->column, msg);
	return phx_errf(err, errlen, "%s:%u:%u: key '%s': %s", name, node->line, node->column, path,
			msg);
}

int phx_ynode_error(const struct phx_ydoc *doc, const struct phx_ynode *node, char *err,
		    size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnode_error(doc, node, false, err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int phx_ynode_key_error(const struct phx_ydoc *doc, const struct phx_ynode *node, char *err,
			size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnode_error(doc, node, true, err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* ------------------------------------------------------------ tree */

static void node_free(struct phx_ynode *node)
{
	if (!node)
		return;
	for (size_t i = 0; i < node->n_items; i++)
		node_free(node->items[i]);
	free(node->items);
	free(node->key);
	free(node->value);
	free(node);
}

void phx_ydoc_free(struct phx_ydoc *doc)
{
	if (!doc)
		return;
	node_free(doc->root);
	free(doc->name);
	free(doc);
}

/* Line and column (1-based, in characters) of a byte offset. */
static void offset_pos(const char *buf, size_t len, size_t off, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		if (buf[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

/* The byte at a libyaml mark, found by line and column: the mark's index
 * counts characters, not bytes. Returns -1 past the end. */
static int byte_at(const struct builder *b, const yaml_mark_t *mark)
{
	size_t i = 0, line = 0, col = 0;

	while (i < b->len && line < mark->line) {
		if (b->buf[i++] == '\n')
			line++;
	}
	for (; i < b->len && b->buf[i] != '\n'; i++) {
		if (((unsigned char)b->buf[i] & 0xc0) == 0x80)
			continue;
		if (col++ == mark->column)
			return (unsigned char)b->buf[i];
	}
	return -1;
}

static int parser_error(const struct builder *b, const yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "unknown error";
	size_t line, col;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		return phx_errf(b->err, b->errlen, "%s: out of memory reading YAML", b->doc->name);
	case YAML_READER_ERROR:
		offset_pos(b->buf, b->len, p->problem_offset, &line, &col);
		return phx_errf(b->err, b->errlen, "%s:%zu:%zu: %s; the file must be UTF-8 text",
				b->doc->name, line, col, problem);
	default:
		break;
	}
	if (p->error == YAML_SCANNER_ERROR && byte_at(b, &p->problem_mark) == '\t')
		return mark_error(b, &p->problem_mark,
				  "tab character; YAML indents with spaces only");
	if (p->context)
		return mark_error(b, &p->problem_mark,
				  "%s %s (line %zu); check indentation, "
				  "quotes and ':' separators",
				  problem, p->context, p->context_mark.line + 1);
	return mark_error(b, &p->problem_mark, "%s; check indentation, quotes and ':' separators",
			  problem);
}

static bool is_null(const char *s)
{
	return !s[0] || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	       !strcmp(s, "NULL");
}

static int check_props(const struct builder *b, const yaml_event_t *ev, const char *anchor,
		       const char *tag, const char *allowed)
{
	char shown[SHOW_MAX + 8];

	if (anchor)
		return mark_error(b, &ev->start_mark,
				  "anchor '&%s' is not allowed; write the "
				  "value out instead of reusing it",
				  anchor);
	if (tag && strcmp(tag, allowed)) {
		show(shown, sizeof(shown), tag);
		return mark_error(b, &ev->start_mark,
				  "tag '%s' is not supported; remove it "
				  "(only !!str, !!seq and !!map are understood)",
				  shown);
	}
	return 0;
}

/* A key arrived: store it until its value comes. */
static int take_key(struct builder *b, struct frame *f, const yaml_event_t *ev)
{
	const char *key;

	if (ev->type != YAML_SCALAR_EVENT)
		return mark_error(b, &ev->start_mark, "a mapping key must be a plain word, not %s",
				  ev->type == YAML_MAPPING_START_EVENT ? "a mapping" : "a list");
	key = (const char *)ev->data.scalar.value;
	if (check_props(b, ev, (const char *)ev->data.scalar.anchor,
			(const char *)ev->data.scalar.tag, TAG_STR) < 0)
		return -1;
	if (strlen(key) != ev->data.scalar.length)
		return mark_error(b, &ev->start_mark, "a key holds a NUL character");
	if (!key[0])
		return mark_error(b, &ev->start_mark, "empty key; every value needs a name");
	f->key = strdup(key);
	if (!f->key)
		return phx_errf(b->err, b->errlen, "%s: out of memory", b->doc->name);
	f->key_line = (unsigned)ev->start_mark.line + 1;
	f->key_column = (unsigned)ev->start_mark.column + 1;
	return 0;
}

static int attach(struct builder *b, struct phx_ynode *node)
{
	struct frame *f;

	if (!b->depth) {
		b->doc->root = node;
		return 0;
	}
	f = &b->stack[b->depth - 1];
	if (f->node->n_items == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 4;
		struct phx_ynode **items = realloc(f->node->items, cap * sizeof(*items));

		if (!items)
			return -1;
		f->node->items = items;
		f->cap = cap;
	}
	node->parent = f->node;
	node->index = f->node->n_items;
	if (f->node->type == PHX_YMAP) {
		node->key = f->key;
		node->key_line = f->key_line;
		node->key_column = f->key_column;
		f->key = NULL;
	}
	f->node->items[f->node->n_items++] = node;
	return 0;
}

static struct phx_ynode *new_node(struct builder *b, const yaml_event_t *ev,
				  enum phx_ynode_type type)
{
	struct phx_ynode *node;

	if (++b->n_nodes > PHX_YAML_MAX_NODES) {
		mark_error(b, &ev->start_mark, "more than %u values; the file is too large",
			   PHX_YAML_MAX_NODES);
		return NULL;
	}
	node = calloc(1, sizeof(*node));
	if (!node) {
		phx_errf(b->err, b->errlen, "%s: out of memory", b->doc->name);
		return NULL;
	}
	node->type = type;
	node->line = (unsigned)ev->start_mark.line + 1;
	node->column = (unsigned)ev->start_mark.column + 1;
	if (attach(b, node) < 0) {
		node_free(node);
		phx_errf(b->err, b->errlen, "%s: out of memory", b->doc->name);
		return NULL;
	}
	return node;
}

static int on_scalar(struct builder *b, const yaml_event_t *ev)
{
	const char *value = (const char *)ev->data.scalar.value;
	struct phx_ynode *node;
	bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;

	if (check_props(b, ev, (const char *)ev->data.scalar.anchor,
			(const char *)ev->data.scalar.tag, TAG_STR) < 0)
		return -1;
	if (strlen(value) != ev->data.scalar.length)
		return mark_error(b, &ev->start_mark, "a value holds a NUL character (\\0)");
	/* An empty document is "no root", not a null scalar. */
	if (!b->depth && plain && !ev->data.scalar.tag && is_null(value))
		return 0;
	node = new_node(b, ev, PHX_YSCALAR);
	if (!node)
		return -1;
	node->quoted = !plain || ev->data.scalar.tag;
	node->value = strdup(value);
	if (!node->value)
		return phx_errf(b->err, b->errlen, "%s: out of memory", b->doc->name);
	return 0;
}

static int on_start(struct builder *b, const yaml_event_t *ev, enum phx_ynode_type type)
{
	struct phx_ynode *node;
	int rc;

	if (type == PHX_YMAP)
		rc = check_props(b, ev, (const char *)ev->data.mapping_start.anchor,
				 (const char *)ev->data.mapping_start.tag, TAG_MAP);
	else
		rc = check_props(b, ev, (const char *)ev->data.sequence_start.anchor,
				 (const char *)ev->data.sequence_start.tag, TAG_SEQ);
	if (rc < 0)
		return -1;
	if (b->depth == PHX_YAML_MAX_DEPTH)
		return mark_error(b, &ev->start_mark, "nested more than %d levels deep",
				  PHX_YAML_MAX_DEPTH);
	node = new_node(b, ev, type);
	if (!node)
		return -1;
	b->stack[b->depth++] = (struct frame){ .node = node };
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	const struct phx_ynode *x = *(const struct phx_ynode *const *)a;
	const struct phx_ynode *y = *(const struct phx_ynode *const *)b;
	int c = strcmp(x->key, y->key);

	if (c)
		return c;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorting keeps a 10k-key mapping from costing 50M comparisons. */
static int check_duplicates(struct builder *b, const struct phx_ynode *map)
{
	const struct phx_ynode *dup = NULL, *first = NULL;
	struct phx_ynode **sorted;

	if (map->n_items < 2)
		return 0;
	sorted = malloc(map->n_items * sizeof(*sorted));
	if (!sorted)
		return phx_errf(b->err, b->errlen, "%s: out of memory", b->doc->name);
	memcpy(sorted, map->items, map->n_items * sizeof(*sorted));
	qsort(sorted, map->n_items, sizeof(*sorted), key_cmp);
	for (size_t i = 1; i < map->n_items; i++) {
		/* Report the repeat that comes first in the file. */
		if (!strcmp(sorted[i]->key, sorted[i - 1]->key) &&
		    (!dup || sorted[i]->index < dup->index)) {
			dup = sorted[i];
			first = sorted[i - 1];
		}
	}
	if (dup) {
		char shown[SHOW_MAX + 8];

		show(shown, sizeof(shown), dup->key);
		phx_ynode_key_error(b->doc, dup, b->err, b->errlen,
				    "duplicate key '%s' (first at line %u); keep one of them",
				    shown, first->key_line);
	}
	free(sorted);
	return dup ? -1 : 0;
}

static int on_end(struct builder *b)
{
	struct frame *f = &b->stack[b->depth - 1];

	if (f->node->type == PHX_YMAP && check_duplicates(b, f->node) < 0)
		return -1;
	b->depth--;
	return 0;
}

static int on_event(struct builder *b, const yaml_event_t *ev)
{
	struct frame *f = b->depth ? &b->stack[b->depth - 1] : NULL;

	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		return mark_error(b, &ev->start_mark,
				  "alias '*%s' is not allowed; write the "
				  "value out instead of referring to it",
				  (const char *)ev->data.alias.anchor);
	case YAML_MAPPING_END_EVENT:
	case YAML_SEQUENCE_END_EVENT:
		return on_end(b);
	case YAML_SCALAR_EVENT:
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		if (f && f->node->type == PHX_YMAP && !f->key)
			return take_key(b, f, ev);
		if (ev->type == YAML_SCALAR_EVENT)
			return on_scalar(b, ev);
		return on_start(b, ev, ev->type == YAML_MAPPING_START_EVENT ? PHX_YMAP : PHX_YSEQ);
	default:
		return 0;
	}
}

/* Pulls events until the first document ends, then insists on the end. */
static int build(struct builder *b, yaml_parser_t *p)
{
	bool in_doc = false, done = false;
	yaml_event_t ev;
	int rc = 0;

	while (rc == 0) {
		if (!yaml_parser_parse(p, &ev))
			return parser_error(b, p);
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			yaml_event_delete(&ev);
			return 0;
		case YAML_DOCUMENT_START_EVENT:
			if (done)
				rc = mark_error(b, &ev.start_mark,
						"a second document; a file "
						"holds one (remove the '---' line)");
			in_doc = true;
			break;
		case YAML_DOCUMENT_END_EVENT:
			in_doc = false;
			done = true;
			break;
		default:
			if (in_doc)
				rc = on_event(b, &ev);
			break;
		}
		yaml_event_delete(&ev);
	}
	return rc;
}

static int check_bytes(struct builder *b)
{
	const char *nul = memchr(b->buf, '\0', b->len);
	size_t line, col;

	if (!nul)
		return 0;
	offset_pos(b->buf, b->len, (size_t)(nul - b->buf), &line, &col);
	return phx_errf(b->err, b->errlen,
			"%s:%zu:%zu: NUL byte; the file must be UTF-8 text "
			"(UTF-16 is not supported)",
			b->doc->name, line, col);
}

int phx_ydoc_load_buffer(const char *name, const char *buf, size_t len, struct phx_ydoc **doc,
			 char *err, size_t errlen)
{
	struct builder b = { .buf = buf, .len = len, .err = err, .errlen = errlen };
	yaml_parser_t parser;
	int rc = -1;

	*doc = NULL;
	b.doc = calloc(1, sizeof(*b.doc));
	if (!b.doc)
		return phx_errf(err, errlen, "%s: out of memory", name ? name : "(yaml)");
	b.doc->name = strdup(name ? name : "(yaml)");
	if (!b.doc->name) {
		phx_errf(err, errlen, "%s: out of memory", name ? name : "(yaml)");
		goto out_doc;
	}
	if (len > PHX_YAML_MAX_BYTES) {
		phx_errf(err, errlen, "%s: %zu bytes, more than the %u MiB limit", b.doc->name, len,
			 PHX_YAML_MAX_BYTES >> 20);
		goto out_doc;
	}
	/* libyaml counts a UTF-8 BOM as a column when the encoding is given,
	 * and the encoding is given so that UTF-16 is refused: skip it here. */
	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3)) {
		b.buf += 3;
		b.len -= 3;
	}
	if (check_bytes(&b) < 0)
		goto out_doc;
	if (!yaml_parser_initialize(&parser)) {
		phx_errf(err, errlen, "%s: out of memory", b.doc->name);
		goto out_doc;
	}
	yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
	yaml_parser_set_input_string(&parser, (const unsigned char *)b.buf, b.len);
	rc = build(&b, &parser);
	yaml_parser_delete(&parser);
	for (int i = 0; i < b.depth; i++)
		free(b.stack[i].key);
	if (rc == 0) {
		*doc = b.doc;
		return 0;
	}
out_doc:
	phx_ydoc_free(b.doc);
	return -1;
}

int phx_ydoc_load_file(const char *path, struct phx_ydoc **doc, char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc;

	*doc = NULL;
	rc = phx_file_read(path, PHX_YAML_MAX_BYTES, &buf, &len);
	if (rc == -EFBIG)
		return phx_errf(err, errlen,
				"%s: larger than the %u MiB limit; is it the right file?", path,
				PHX_YAML_MAX_BYTES >> 20);
	if (rc == -EINVAL)
		return phx_errf(err, errlen, "%s: not a regular file", path);
	if (rc < 0)
		return phx_errf(err, errlen, "%s: cannot read: %s", path, strerror(-rc));
	rc = phx_ydoc_load_buffer(path, buf, len, doc, err, errlen);
	free(buf);
	return rc;
}

const struct phx_ynode *phx_ynode_get(const struct phx_ynode *map, const char *key)
{
	if (!map || map->type != PHX_YMAP || !key)
		return NULL;
	for (size_t i = 0; i < map->n_items; i++) {
		if (!strcmp(map->items[i]->key, key))
			return map->items[i];
	}
	return NULL;
}

const char *phx_ynode_type_name(enum phx_ynode_type type)
{
	switch (type) {
	case PHX_YSCALAR:
		return "scalar";
	case PHX_YSEQ:
		return "sequence";
	case PHX_YMAP:
		return "mapping";
	}
	return "unknown";
}

/* ------------------------------------------------------------ conversions */

/* "got ..." text for a value of the wrong kind. */
static const char *describe(const struct phx_ynode *node, char *out, size_t outlen)
{
	char shown[SHOW_MAX + 8];

	if (node->type == PHX_YMAP)
		return "a mapping";
	if (node->type == PHX_YSEQ)
		return "a list";
	if (!node->quoted && is_null(node->value))
		return "nothing (null)";
	show(shown, sizeof(shown), node->value);
	snprintf(out, outlen, node->quoted ? "the string \"%s\"" : "'%s'", shown);
	return out;
}

static int wrong(const struct phx_ydoc *doc, const struct phx_ynode *node, const char *what,
		 const char *hint, char *err, size_t errlen)
{
	char got[SHOW_MAX + 32];

	return phx_ynode_error(doc, node, err, errlen, "expected %s, got %s%s", what,
			       describe(node, got, sizeof(got)), hint ? hint : "");
}

/* Quoted scalars are strings, never numbers or booleans: say so. */
static const char *quote_hint(const struct phx_ynode *node)
{
	return node->type == PHX_YSCALAR && node->quoted ? "; remove the quotes" : NULL;
}

static bool plain_scalar(const struct phx_ynode *node)
{
	return node->type == PHX_YSCALAR && !node->quoted && !is_null(node->value);
}

int phx_ynode_string(const struct phx_ydoc *doc, const struct phx_ynode *node, const char **out,
		     char *err, size_t errlen)
{
	if (node->type != PHX_YSCALAR)
		return wrong(doc, node, "a string", NULL, err, errlen);
	if (!node->quoted && is_null(node->value))
		return wrong(doc, node, "a string", "; write \"\" for an empty string", err,
			     errlen);
	*out = node->value;
	return 0;
}

int phx_ynode_bool(const struct phx_ydoc *doc, const struct phx_ynode *node, bool *out, char *err,
		   size_t errlen)
{
	static const char *const yes[] = { "true", "yes", "on" };
	static const char *const no[] = { "false", "no", "off" };

	if (plain_scalar(node)) {
		for (size_t i = 0; i < 3; i++) {
			if (!strcasecmp(node->value, yes[i]) || !strcasecmp(node->value, no[i])) {
				*out = !strcasecmp(node->value, yes[i]);
				return 0;
			}
		}
	}
	return wrong(doc, node, "true or false", quote_hint(node), err, errlen);
}

static void int_range(char *out, size_t outlen, long long min, long long max)
{
	if (min == LLONG_MIN && max == LLONG_MAX)
		snprintf(out, outlen, "an integer");
	else if (max == LLONG_MAX)
		snprintf(out, outlen, "an integer >= %lld", min);
	else if (min == LLONG_MIN)
		snprintf(out, outlen, "an integer <= %lld", max);
	else
		snprintf(out, outlen, "an integer from %lld to %lld", min, max);
}

/* Decimal only: "010" is octal in YAML 1.1 and 8 nowhere else, so refuse it. */
static const char *int_syntax(const char *s)
{
	const char *d = s + (*s == '+' || *s == '-');

	if (!*d)
		return "; whole numbers only";
	for (const char *p = d; *p; p++) {
		if (*p == '.' || *p == 'e' || *p == 'E')
			return "; whole numbers only";
		if (*p < '0' || *p > '9')
			return "; decimal digits only";
	}
	if (d[0] == '0' && d[1])
		return "; leading zeros are not allowed (YAML reads them as octal)";
	return NULL;
}

int phx_ynode_int(const struct phx_ydoc *doc, const struct phx_ynode *node, long long min,
		  long long max, long long *out, char *err, size_t errlen)
{
	char what[96];
	const char *bad;
	long long v;

	int_range(what, sizeof(what), min, max);
	if (!plain_scalar(node))
		return wrong(doc, node, what, quote_hint(node), err, errlen);
	bad = int_syntax(node->value);
	if (bad)
		return wrong(doc, node, what, bad, err, errlen);
	errno = 0;
	v = strtoll(node->value, NULL, 10);
	if (errno == ERANGE || v < min || v > max)
		return wrong(doc, node, what, "; out of range", err, errlen);
	*out = v;
	return 0;
}

int phx_ynode_seconds(const struct phx_ydoc *doc, const struct phx_ynode *node, long long min,
		      long long max, long long *out, char *err, size_t errlen)
{
	char what[160];
	long long v;

	snprintf(what, sizeof(what),
		 "a duration from %lld to %lld seconds (S, M:S, H:M:S, D-H, D-H:M or D-H:M:S)", min,
		 max);
	v = node->type == PHX_YSCALAR ? phx_duration_parse(node->value) : -1;
	if (v < 0)
		return wrong(doc, node, what, NULL, err, errlen);
	if (v < min || v > max)
		return wrong(doc, node, what, "; out of range", err, errlen);
	*out = v;
	return 0;
}

static void double_range(char *out, size_t outlen, double min, double max)
{
	if (min == -HUGE_VAL && max == HUGE_VAL)
		snprintf(out, outlen, "a number");
	else if (max == HUGE_VAL)
		snprintf(out, outlen, "a number >= %g", min);
	else if (min == -HUGE_VAL)
		snprintf(out, outlen, "a number <= %g", max);
	else
		snprintf(out, outlen, "a number from %g to %g", min, max);
}

int phx_ynode_double(const struct phx_ydoc *doc, const struct phx_ynode *node, double min,
		     double max, double *out, char *err, size_t errlen)
{
	const char *s = node->value;
	char what[96];
	char *end = NULL;
	double v = 0;

	double_range(what, sizeof(what), min, max);
	if (!plain_scalar(node))
		return wrong(doc, node, what, quote_hint(node), err, errlen);
	/* strtod also takes "inf", "nan" and hex; a config never means those. */
	errno = 0;
	if (s[strspn(s, "0123456789+-.eE")] == '\0' && strpbrk(s, "0123456789"))
		v = strtod(s, &end);
	if (!end || *end)
		return wrong(doc, node, what, "; write a decimal number like 1.5", err, errlen);
	if (errno == ERANGE || !isfinite(v) || v < min || v > max)
		return wrong(doc, node, what, "; out of range", err, errlen);
	*out = v;
	return 0;
}

int phx_ynode_enum(const struct phx_ydoc *doc, const struct phx_ynode *node,
		   const char *const *choices, int *out, char *err, size_t errlen)
{
	char what[256], hint[96] = "";
	const char *near;
	size_t used = 0, n = 0;

	if (node->type == PHX_YSCALAR && (node->quoted || !is_null(node->value))) {
		for (n = 0; choices[n]; n++) {
			if (!strcmp(node->value, choices[n])) {
				*out = (int)n;
				return 0;
			}
		}
	}
	for (n = 0; choices[n]; n++)
		;
	append(what, sizeof(what), &used, "one of ");
	for (size_t i = 0; i < n; i++) {
		if (i)
			append(what, sizeof(what), &used, ", ");
		append(what, sizeof(what), &used, choices[i]);
	}
	near = node->type == PHX_YSCALAR ? phx_yaml_suggest(node->value, choices, n) : NULL;
	if (near)
		snprintf(hint, sizeof(hint), "; did you mean '%s'?", near);
	return wrong(doc, node, what, hint, err, errlen);
}

unsigned phx_yaml_distance(const char *a, const char *b)
{
	/* Optimal string alignment: a swap of two letters ("mdoe") is one edit.
	 * Three rows of the table; words past 63 bytes are simply "far". */
	unsigned row[3][64];
	size_t la = strlen(a), lb = strlen(b);

	if (la > 63 || lb > 63)
		return 255;
	for (size_t j = 0; j <= lb; j++)
		row[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned *cur = row[i % 3], *prev = row[(i - 1) % 3], *prev2 = row[(i + 1) % 3];

		cur[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned best = prev[j - 1] + (a[i - 1] != b[j - 1]);

			if (prev[j] + 1 < best)
				best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    prev2[j - 2] + 1 < best)
				best = prev2[j - 2] + 1;
			cur[j] = best;
		}
	}
	return row[la % 3][lb] > 255 ? 255 : row[la % 3][lb];
}

const char *phx_yaml_suggest(const char *word, const char *const *choices, size_t n)
{
	const char *best = NULL;
	unsigned best_d = 3;

	for (size_t i = 0; i < n; i++) {
		unsigned d = strcasecmp(word, choices[i]) ? phx_yaml_distance(word, choices[i]) : 0;

		/* Short words: one edit at most, or "off" would suggest "on". */
		if (d < best_d && (d <= 1 || strlen(choices[i]) > 4)) {
			best = choices[i];
			best_d = d;
		}
	}
	return best;
}

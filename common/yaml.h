/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A strict YAML document tree on top of libyaml. Every Phalanx file that a
 * human writes (phalanx.yaml, fabric files) is read through it, so all of
 * them refuse the same things (aliases, several documents, duplicate keys,
 * oversized input) and report errors the same way: "FILE:LINE:COL: ...".
 *
 * Refused when loading: anchors and aliases, a second document, duplicate
 * or empty or non-scalar mapping keys, tags other than !!str/!!seq/!!map,
 * nesting over PHX_YAML_MAX_DEPTH, more than PHX_YAML_MAX_NODES values,
 * input over PHX_YAML_MAX_BYTES, NUL bytes (inside the input or from a
 * "\0" escape), anything but UTF-8 (a UTF-8 BOM is skipped).
 *
 * Typing: a quoted (or block, or !!str) scalar is always a string, so a
 * quoted number for an integer key is an error; unquoted "", ~ and null
 * are null and no string. Integers are decimal only: no 0x, no leading
 * zeros (octal in YAML 1.1), no fractions. Booleans are unquoted
 * true/false/yes/no/on/off in any case.
 */
#ifndef PHX_YAML_H
#define PHX_YAML_H

#include <stdbool.h>
#include <stddef.h>

/* Refuse bigger files: config and fabric files are never this large. */
#define PHX_YAML_MAX_BYTES (16u << 20)
#define PHX_YAML_MAX_DEPTH 32
/* Bounds the tree's memory: a 16 MiB flow list would be 8M nodes. */
#define PHX_YAML_MAX_NODES (1u << 20)

enum phx_ynode_type {
	PHX_YSCALAR,
	PHX_YSEQ,
	PHX_YMAP,
};

struct phx_ynode {
	enum phx_ynode_type type;
	unsigned line; /* 1-based, where the node starts */
	unsigned column; /* 1-based */
	char *key; /* set when the node is a value in a mapping; NULL for
		    * sequence items (messages call them "list[3]") */
	char *value; /* scalars only */
	bool quoted; /* scalar was not plain: never a bool/number/null */
	struct phx_ynode **items; /* sequence items or mapping values, in order */
	size_t n_items;
	struct phx_ynode *parent; /* NULL for the root */
	size_t index; /* position in parent->items */
	unsigned key_line; /* where the key starts, when key is set */
	unsigned key_column;
};

struct phx_ydoc {
	char *name; /* file name used in messages */
	struct phx_ynode *root; /* NULL for an empty document */
};

/* Error text goes to err ("FILE:LINE:COL: what"); return 0 or -1. */
int phx_ydoc_load_file(const char *path, struct phx_ydoc **doc, char *err, size_t errlen);
int phx_ydoc_load_buffer(const char *name, const char *buf, size_t len, struct phx_ydoc **doc,
			 char *err, size_t errlen);
void phx_ydoc_free(struct phx_ydoc *doc);

/*
 * Writes the node's place in the document, e.g. "placement.mode" or
 * "switches[3].nodes" ("" for the root); returns out.
 */
char *phx_ynode_path(const struct phx_ynode *node, char *out, size_t outlen);

/* Child of a mapping by key, or NULL. */
const struct phx_ynode *phx_ynode_get(const struct phx_ynode *map, const char *key);
const char *phx_ynode_type_name(enum phx_ynode_type type);

/*
 * Typed scalar conversions. On failure they leave *out alone and write
 * "FILE:LINE:COL: key 'KEY': expected ..., got '...'[; hint]" into err,
 * KEY being the node's path ("placement.mode", "switches[2].name").
 * phx_ynode_string refuses null; the string lives as long as the doc.
 */
int phx_ynode_string(const struct phx_ydoc *doc, const struct phx_ynode *node, const char **out,
		     char *err, size_t errlen);
int phx_ynode_bool(const struct phx_ydoc *doc, const struct phx_ynode *node, bool *out, char *err,
		   size_t errlen);
int phx_ynode_int(const struct phx_ydoc *doc, const struct phx_ynode *node, long long min,
		  long long max, long long *out, char *err, size_t errlen);
/* A duration in seconds (phx_duration_parse(): "90", "10:00", "1-00:00:00"), quoted or not. */
int phx_ynode_seconds(const struct phx_ydoc *doc, const struct phx_ynode *node, long long min,
		      long long max, long long *out, char *err, size_t errlen);
int phx_ynode_double(const struct phx_ydoc *doc, const struct phx_ynode *node, double min,
		     double max, double *out, char *err, size_t errlen);
/* choices is NULL-terminated; *out is the index of the match. */
int phx_ynode_enum(const struct phx_ydoc *doc, const struct phx_ynode *node,
		   const char *const *choices, int *out, char *err, size_t errlen);
/*
 * Formats "FILE:LINE:COL: key 'KEY': " + fmt into err; always returns -1.
 * The root node gives "FILE:LINE:COL: ", a NULL node "FILE: ".
 */
int phx_ynode_error(const struct phx_ydoc *doc, const struct phx_ynode *node, char *err,
		    size_t errlen, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Like phx_ynode_error but at the key's position, without the key prefix. */
int phx_ynode_key_error(const struct phx_ydoc *doc, const struct phx_ynode *node, char *err,
			size_t errlen, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Edit distance (capped at 255), for "did you mean" hints. */
unsigned phx_yaml_distance(const char *a, const char *b);
/* The choice closest to word (distance <= 2 or same letters' case), or NULL. */
const char *phx_yaml_suggest(const char *word, const char *const *choices, size_t n);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/yaml.h"

static char err[1024];

static struct phx_ydoc *load_len(const char *text, size_t len)
{
	struct phx_ydoc *doc = (struct phx_ydoc *)1;

	err[0] = '\0';
	if (phx_ydoc_load_buffer("t.yaml", text, len, &doc, err, sizeof(err)) < 0) {
		assert_null(doc);
		assert_true(err[0] != '\0');
		return NULL;
	}
	assert_non_null(doc);
	return doc;
}

static struct phx_ydoc *load(const char *text)
{
	return load_len(text, strlen(text));
}

/* Asserts text is refused with a message that starts with want. */
static void refused_len(const char *text, size_t len, const char *want)
{
	struct phx_ydoc *doc = load_len(text, len);

	if (doc) {
		phx_ydoc_free(doc);
		fail_msg("accepted: %s", text);
	}
	if (strncmp(err, want, strlen(want)))
		fail_msg("error '%s' does not start with '%s'", err, want);
}

static void refused(const char *text, const char *want)
{
	refused_len(text, strlen(text), want);
}

static void has(const char *s, const char *part)
{
	if (!strstr(s, part))
		fail_msg("'%s' does not contain '%s'", s, part);
}

static void test_empty_documents(void **state)
{
	static const char *const empty[] = {
		"",	      "\n\n",	      "# only a comment\n  # and another\n",
		"---\n",      "--- ~\n",      "null\n",
		"---\n...\n", "\xef\xbb\xbf", "\xef\xbb\xbf# bom and comment\n",
	};

	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		struct phx_ydoc *doc = load(empty[i]);

		assert_non_null(doc);
		assert_null(doc->root);
		assert_string_equal(doc->name, "t.yaml");
		phx_ydoc_free(doc);
	}
	phx_ydoc_free(NULL);
}

static void test_tree_shape(void **state)
{
	struct phx_ydoc *doc = load("# c\n"
				    "top: 1\n"
				    "sec:\n"
				    "  list:\n"
				    "    - a\n"
				    "    - {x: 'q', y: \"\"}\n"
				    "  flow: [1, 2]\n"
				    "lit: |\n"
				    "  two\n"
				    "  lines\n");
	const struct phx_ynode *root, *sec, *list, *item, *y;
	char path[64];

	assert_non_null(doc);
	root = doc->root;
	assert_int_equal(root->type, PHX_YMAP);
	assert_int_equal(root->n_items, 3);
	assert_null(root->parent);
	assert_int_equal(root->line, 2);
	assert_int_equal(root->column, 1);

	assert_string_equal(phx_ynode_get(root, "top")->value, "1");
	assert_false(phx_ynode_get(root, "top")->quoted);
	assert_int_equal(phx_ynode_get(root, "top")->line, 2);
	assert_int_equal(phx_ynode_get(root, "top")->column, 6);
	assert_null(phx_ynode_get(root, "nope"));
	assert_null(phx_ynode_get(NULL, "top"));
	assert_null(phx_ynode_get(phx_ynode_get(root, "top"), "x"));

	sec = phx_ynode_get(root, "sec");
	assert_int_equal(sec->type, PHX_YMAP);
	assert_int_equal(sec->key_line, 3);
	assert_int_equal(sec->key_column, 1);
	list = phx_ynode_get(sec, "list");
	assert_int_equal(list->type, PHX_YSEQ);
	assert_int_equal(list->n_items, 2);
	assert_int_equal(list->key_line, 4);
	assert_int_equal(list->key_column, 3);
	assert_string_equal(list->items[0]->value, "a");
	assert_null(list->items[0]->key);
	assert_ptr_equal(list->items[0]->parent, list);
	item = list->items[1];
	assert_int_equal(item->index, 1);
	assert_int_equal(item->line, 6);
	assert_int_equal(item->column, 7);
	assert_true(phx_ynode_get(item, "x")->quoted);
	y = phx_ynode_get(item, "y");
	assert_true(y->quoted);
	assert_string_equal(y->value, "");
	assert_string_equal(phx_ynode_path(y, path, sizeof(path)), "sec.list[1].y");
	assert_string_equal(phx_ynode_path(root, path, sizeof(path)), "");
	assert_string_equal(phx_ynode_path(y, path, 6), "sec.l");
	assert_int_equal(phx_ynode_get(sec, "flow")->n_items, 2);
	assert_string_equal(phx_ynode_get(root, "lit")->value, "two\nlines\n");
	assert_true(phx_ynode_get(root, "lit")->quoted);
	assert_string_equal(phx_ynode_type_name(PHX_YSCALAR), "scalar");
	assert_string_equal(phx_ynode_type_name(PHX_YSEQ), "sequence");
	assert_string_equal(phx_ynode_type_name(PHX_YMAP), "mapping");
	phx_ydoc_free(doc);
}

static void test_root_kinds(void **state)
{
	struct phx_ydoc *doc = load("- 1\n- 2\n");

	assert_int_equal(doc->root->type, PHX_YSEQ);
	phx_ydoc_free(doc);
	doc = load("just a value");
	assert_int_equal(doc->root->type, PHX_YSCALAR);
	assert_string_equal(doc->root->value, "just a value");
	phx_ydoc_free(doc);
	doc = load("'~'");
	assert_non_null(doc->root);
	assert_true(doc->root->quoted);
	phx_ydoc_free(doc);
}

static void test_aliases_and_anchors(void **state)
{
	refused("a: &x 1\nb: *x\n", "t.yaml:1:4: anchor '&x' is not allowed");
	refused("a: &x [1, 2]\n", "t.yaml:1:4: anchor '&x'");
	refused("a: &x {k: v}\n", "t.yaml:1:4: anchor '&x'");
	refused("&top\na: 1\n", "t.yaml:1:1: anchor '&top'");
	refused("a: 1\nb: *x\n", "t.yaml:2:4: alias '*x' is not allowed");
	/* The billion laughs: refused at the first anchor, nothing expanded. */
	refused("a: &a [\"lol\",\"lol\",\"lol\"]\n"
		"b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
		"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
		"t.yaml:1:4: anchor");
	refused("<<: *base\n", "t.yaml:1:5: alias");
}

static void test_documents(void **state)
{
	struct phx_ydoc *doc;

	refused("a: 1\n---\nb: 2\n", "t.yaml:2:1: a second document");
	refused("---\na: 1\n...\n---\n", "t.yaml:4:1: a second document");
	refused("a: 1\n...\n--- x\n", "t.yaml:3:1: a second document");
	doc = load("---\na: 1\n...\n");
	assert_int_equal(doc->root->n_items, 1);
	phx_ydoc_free(doc);
	doc = load("%YAML 1.1\n---\na: 1\n");
	assert_non_null(doc->root);
	phx_ydoc_free(doc);
}

static void test_duplicate_keys(void **state)
{
	refused("a: 1\nb: 2\na: 3\n", "t.yaml:3:1: duplicate key 'a' (first at line 1)");
	refused("s:\n  x: 1\n  y: 2\n  x: 3\n", "t.yaml:4:3: duplicate key 'x' (first at line 2)");
	refused("{a: 1, 'a': 2}", "t.yaml:1:8: duplicate key 'a'");
	/* The first repeat in the file is the one reported. */
	refused("b: 1\na: 1\na: 2\nb: 2\n", "t.yaml:3:1: duplicate key 'a' (first at line 2)");
	/* Same key in different mappings is fine. */
	phx_ydoc_free(load("a: {x: 1}\nb: {x: 1}\nl: [{x: 1}, {x: 2}]\n"));
}

static char *many_keys(size_t n, bool dup)
{
	size_t cap = n * 16 + 32, used = 0;
	char *buf = malloc(cap);

	assert_non_null(buf);
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, cap - used, "key%zu: %zu\n", i, i);
	if (dup)
		used += (size_t)snprintf(buf + used, cap - used, "key0: again\n");
	return buf;
}

static void test_many_keys(void **state)
{
	char *buf = many_keys(10000, false);
	struct phx_ydoc *doc = load(buf);

	assert_int_equal(doc->root->n_items, 10000);
	assert_string_equal(phx_ynode_get(doc->root, "key9999")->value, "9999");
	phx_ydoc_free(doc);
	free(buf);
	buf = many_keys(10000, true);
	refused_len(buf, strlen(buf), "t.yaml:10001:1: duplicate key 'key0' (first at line 1)");
	free(buf);
}

static void test_keys_must_be_scalars(void **state)
{
	refused("? [a, b]\n: 1\n", "t.yaml:1:3: a mapping key must be a plain word, not a list");
	refused("{{a: 1}: 2}", "t.yaml:1:2: a mapping key must be a plain word, not a mapping");
	refused("?\n: 1\n", "t.yaml:1:2: empty key");
	refused("{? : 1}", "t.yaml:1:4: empty key");
	refused("'': 1\n", "t.yaml:1:1: empty key");
	refused("!!int a: 1\n", "t.yaml:1:1: tag");
	refused("&k a: 1\n", "t.yaml:1:1: anchor");
}

static void nest(char *buf, size_t depth, bool block)
{
	size_t used = 0;

	for (size_t i = 0; i < depth; i++) {
		if (block)
			used += (size_t)sprintf(buf + used, "%*sk:\n", (int)(2 * i), "");
		else
			buf[used++] = '[';
	}
	if (block) {
		sprintf(buf + used, "%*sv", (int)(2 * depth), "");
		return;
	}
	for (size_t i = 0; i < depth; i++)
		buf[used++] = ']';
	buf[used] = '\0';
}

static void test_depth(void **state)
{
	static char buf[200000];
	struct phx_ydoc *doc;

	nest(buf, PHX_YAML_MAX_DEPTH, false);
	doc = load(buf);
	assert_non_null(doc);
	phx_ydoc_free(doc);
	nest(buf, PHX_YAML_MAX_DEPTH + 1, false);
	refused_len(buf, strlen(buf), "t.yaml:1:33: nested more than 32 levels deep");
	/* Block mappings: the scalar at the bottom is no extra level. */
	nest(buf, PHX_YAML_MAX_DEPTH, true);
	doc = load(buf);
	assert_non_null(doc);
	phx_ydoc_free(doc);
	nest(buf, PHX_YAML_MAX_DEPTH + 1, true);
	refused_len(buf, strlen(buf), "t.yaml:33:");
	has(err, "nested more than 32 levels");
	/* 100k open brackets stop at level 33, long before libyaml's stacks grow. */
	memset(buf, '[', 100000);
	buf[100000] = '\0';
	refused_len(buf, strlen(buf), "t.yaml:1:33: nested");
}

static void test_size_limit(void **state)
{
	size_t len = PHX_YAML_MAX_BYTES + 1;
	char *buf = malloc(len);

	assert_non_null(buf);
	memset(buf, '#', len);
	refused_len(buf, len, "t.yaml: 16777217 bytes, more than the 16 MiB limit");
	/* Exactly the limit is fine: a comment-only document. */
	phx_ydoc_free(load_len(buf, PHX_YAML_MAX_BYTES));
	free(buf);
}

static void test_node_limit(void **state)
{
	size_t n = PHX_YAML_MAX_NODES + 1, len = 2 * n + 2;
	char *buf = malloc(len + 1);

	assert_non_null(buf);
	buf[0] = '[';
	for (size_t i = 0; i < n; i++) {
		buf[1 + 2 * i] = '1';
		buf[2 + 2 * i] = ',';
	}
	buf[len - 2] = ']';
	buf[len - 1] = '\n';
	buf[len] = '\0';
	refused_len(buf, len, "t.yaml:1:");
	has(err, "more than 1048576 values");
	free(buf);
}

static void test_bytes(void **state)
{
	refused_len("a: 1\0\n", 6, "t.yaml:1:5: NUL byte");
	refused_len("a: 1\nb: x\0y\n", 12, "t.yaml:2:5: NUL byte");
	/* UTF-16 text (here with a BOM) has NUL bytes everywhere. */
	refused_len("\xff\xfe"
		    "a\0:\0 \0"
		    "1\0",
		    10, "t.yaml:1:4: NUL byte");
	refused_len("a: \"x\\0y\"\n", 10, "t.yaml:1:4: a value holds a NUL character");
	refused_len("\"k\\0\": 1\n", 9, "t.yaml:1:1: a key holds a NUL character");
	refused("a: \xff\xfe\n", "t.yaml:1:4: invalid leading UTF-8 octet");
	refused("abc: d\xc3\n", "t.yaml:1:");
	refused("a: \x01\n", "t.yaml:1:4: control characters are not allowed");
	refused("a:\n\tb: 1\n", "t.yaml:2:1: tab character; YAML indents with spaces only");
}

static void test_bom_and_utf8(void **state)
{
	struct phx_ydoc *doc = load("\xef\xbb\xbf"
				    "a: 1\nname: \"h\xc3\xa9llo \xe2\x9c\x93\"\n");

	assert_non_null(doc);
	assert_string_equal(phx_ynode_get(doc->root, "a")->value, "1");
	assert_string_equal(phx_ynode_get(doc->root, "name")->value, "h\xc3\xa9llo \xe2\x9c\x93");
	phx_ydoc_free(doc);
	/* Positions count characters, not bytes. */
	refused("a: [\xc3\xa9\xc3\xa9, *x]\n", "t.yaml:1:9: alias '*x'");
	refused("a: \xc3\xa9\xc3\xa9\xff\n", "t.yaml:1:6: invalid leading UTF-8 octet");
	/* The BOM takes no column. */
	refused("\xef\xbb\xbf"
		"a: *x\n",
		"t.yaml:1:4: alias");
	refused_len("\xef\xbb\xbf"
		    "a: 1\0",
		    8, "t.yaml:1:5: NUL byte");
}

static void test_syntax_errors(void **state)
{
	refused("a: [1, 2\n", "t.yaml:2:1: did not find expected ',' or ']'");
	has(err, "line 1");
	refused("a: 1\n b: 2\n", "t.yaml:2:3: mapping values are not allowed");
	refused("a: 'open\n", "t.yaml:2:1: found unexpected end of stream");
	refused("- a\nb: 1\n", "t.yaml:2:1:");
	refused("a: @x\n", "t.yaml:1:4: found character that cannot start any token");
}

static void test_tags(void **state)
{
	struct phx_ydoc *doc = load("a: !!str 5\nb: !!map {x: 1}\nc: !!seq [1]\n");

	assert_true(phx_ynode_get(doc->root, "a")->quoted);
	assert_string_equal(phx_ynode_get(doc->root, "a")->value, "5");
	phx_ydoc_free(doc);
	refused("a: !!int 5\n", "t.yaml:1:4: tag 'tag:yaml.org,2002:int' is not supported");
	refused("a: !!binary aGk=\n", "t.yaml:1:4: tag");
	refused("a: !local x\n", "t.yaml:1:4: tag '!local'");
	refused("a: !!map [1]\n", "t.yaml:1:4: tag");
	refused("a: !!seq {x: 1}\n", "t.yaml:1:4: tag");
	refused("!!python/object:os.system x\n", "t.yaml:1:1: tag");
}

/*
 * The message for "k: TEXT" is at line 1 (libyaml puts an empty value at
 * column 3, any other at 4) and names the key.
 */
static void msg_is(const char *text, const char *what)
{
	char want[256];

	snprintf(want, sizeof(want), "t.yaml:1:%d: key 'k': %s", text[0] ? 4 : 3, what);
	if (strncmp(err, want, strlen(want)))
		fail_msg("'%s': '%s' does not start with '%s'", text, err, want);
}

/* One-key document "k: TEXT"; the node of k. */
static struct phx_ydoc *one(const char *text, const struct phx_ynode **node)
{
	static char buf[4096];
	struct phx_ydoc *doc;

	snprintf(buf, sizeof(buf), "k: %s\n", text);
	doc = load(buf);
	assert_non_null(doc);
	*node = phx_ynode_get(doc->root, "k");
	assert_non_null(*node);
	return doc;
}

static void test_int(void **state)
{
	static const struct {
		const char *text;
		long long want;
	} good[] = {
		{ "0", 0 },
		{ "-0", 0 },
		{ "+0", 0 },
		{ "7", 7 },
		{ "+42", 42 },
		{ "-42", -42 },
		{ "9223372036854775807", LLONG_MAX },
		{ "-9223372036854775808", LLONG_MIN },
	};
	static const struct {
		const char *text;
		const char *why;
	} bad[] = {
		{ "9223372036854775808", "got '9223372036854775808'; out of range" },
		{ "-9223372036854775809", "out of range" },
		{ "99999999999999999999999999999", "out of range" },
		{ "1.5", "got '1.5'; whole numbers only" },
		{ "1e3", "whole numbers only" },
		{ "1.", "whole numbers only" },
		{ "0x10", "decimal digits only" },
		{ "0o7", "decimal digits only" },
		{ "1_000", "decimal digits only" },
		{ "12abc", "decimal digits only" },
		{ "010", "leading zeros" },
		{ "-00", "leading zeros" },
		{ "-a", "decimal digits only" },
		{ "+", "whole numbers only" },
		{ "", "got nothing (null)" },
		{ "~", "got nothing (null)" },
		{ "null", "got nothing (null)" },
		{ "\"5\"", "got the string \"5\"; remove the quotes" },
		{ "'5'", "remove the quotes" },
		{ "[5]", "got a list" },
		{ "{a: 5}", "got a mapping" },
		{ "true", "got 'true'" },
		{ ".inf", "got '.inf'" },
	};
	const struct phx_ynode *node;
	struct phx_ydoc *doc;
	long long v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		doc = one(good[i].text, &node);
		v = 1234;
		assert_int_equal(
			phx_ynode_int(doc, node, LLONG_MIN, LLONG_MAX, &v, err, sizeof(err)), 0);
		assert_true(v == good[i].want);
		phx_ydoc_free(doc);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = one(bad[i].text, &node);
		v = 1234;
		assert_int_equal(
			phx_ynode_int(doc, node, LLONG_MIN, LLONG_MAX, &v, err, sizeof(err)), -1);
		assert_true(v == 1234);
		msg_is(bad[i].text, "expected an integer, got ");
		has(err, bad[i].why);
		phx_ydoc_free(doc);
	}
	doc = one("0", &node);
	assert_int_equal(phx_ynode_int(doc, node, 1, 3600, &v, err, sizeof(err)), -1);
	assert_string_equal(err, "t.yaml:1:4: key 'k': expected an integer from 1 to 3600, "
				 "got '0'; out of range");
	assert_int_equal(phx_ynode_int(doc, node, 1, LLONG_MAX, &v, NULL, 0), -1);
	assert_int_equal(phx_ynode_int(doc, node, 1, LLONG_MAX, &v, err, sizeof(err)), -1);
	has(err, "expected an integer >= 1, got '0'");
	assert_int_equal(phx_ynode_int(doc, node, LLONG_MIN, -1, &v, err, sizeof(err)), -1);
	has(err, "expected an integer <= -1, got '0'");
	assert_int_equal(phx_ynode_int(doc, node, 0, 0, &v, err, sizeof(err)), 0);
	phx_ydoc_free(doc);
}

static void test_double(void **state)
{
	static const struct {
		const char *text;
		double want;
	} good[] = {
		{ "0", 0 },
		{ "-0", 0 },
		{ "1.5", 1.5 },
		{ "-2.25", -2.25 },
		{ "1e3", 1000 },
		{ "2.5E-1", 0.25 },
		{ ".5", 0.5 },
		{ "+7", 7 },
		{ "1.7976931348623157e308", 1.7976931348623157e308 },
	};
	static const char *const bad[] = {
		"1e999", "-1e999", "1e-999",  "inf", ".inf",   "-.inf", "nan",
		".nan",	 "0x1p3",  "1.5.5",   "e5",  "-e",     ".",	"1,5",
		"",	 "~",	   "\"1.5\"", "[1]", "{a: 1}", "1.5 m",
	};
	const struct phx_ynode *node;
	struct phx_ydoc *doc;
	double v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		doc = one(good[i].text, &node);
		assert_int_equal(
			phx_ynode_double(doc, node, -HUGE_VAL, HUGE_VAL, &v, err, sizeof(err)), 0);
		assert_true(v == good[i].want);
		phx_ydoc_free(doc);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = one(bad[i], &node);
		v = 42;
		if (phx_ynode_double(doc, node, -HUGE_VAL, HUGE_VAL, &v, err, sizeof(err)) != -1)
			fail_msg("'%s' accepted", bad[i]);
		assert_true(v == 42);
		msg_is(bad[i], "expected a number, got ");
		phx_ydoc_free(doc);
	}
	doc = one("0.5", &node);
	assert_int_equal(phx_ynode_double(doc, node, 1, 2, &v, err, sizeof(err)), -1);
	assert_string_equal(err, "t.yaml:1:4: key 'k': expected a number from 1 to 2, "
				 "got '0.5'; out of range");
	assert_int_equal(phx_ynode_double(doc, node, 1, HUGE_VAL, &v, err, sizeof(err)), -1);
	has(err, "a number >= 1,");
	assert_int_equal(phx_ynode_double(doc, node, -HUGE_VAL, 0, &v, err, sizeof(err)), -1);
	has(err, "a number <= 0,");
	phx_ydoc_free(doc);
}

static void test_bool(void **state)
{
	static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "on", "ON" };
	static const char *const no[] = { "false", "False", "no", "NO", "off", "Off" };
	static const char *const bad[] = {
		"1", "0", "y", "n", "t", "truth", "\"true\"", "'no'", "", "~", "[true]", "{a: 1}",
	};
	const struct phx_ynode *node;
	struct phx_ydoc *doc;
	bool v;

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		doc = one(yes[i], &node);
		v = false;
		assert_int_equal(phx_ynode_bool(doc, node, &v, err, sizeof(err)), 0);
		assert_true(v);
		phx_ydoc_free(doc);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		doc = one(no[i], &node);
		v = true;
		assert_int_equal(phx_ynode_bool(doc, node, &v, err, sizeof(err)), 0);
		assert_false(v);
		phx_ydoc_free(doc);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = one(bad[i], &node);
		if (phx_ynode_bool(doc, node, &v, err, sizeof(err)) != -1)
			fail_msg("'%s' accepted", bad[i]);
		msg_is(bad[i], "expected true or false, got ");
		phx_ydoc_free(doc);
	}
	doc = one("\"yes\"", &node);
	phx_ynode_bool(doc, node, &v, err, sizeof(err));
	assert_string_equal(err, "t.yaml:1:4: key 'k': expected true or false, got the string "
				 "\"yes\"; remove the quotes");
	phx_ydoc_free(doc);
}

static void test_enum(void **state)
{
	static const char *const modes[] = { "topo", "block", "off", NULL };
	const struct phx_ynode *node;
	struct phx_ydoc *doc;
	int v;

	doc = one("block", &node);
	assert_int_equal(phx_ynode_enum(doc, node, modes, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 1);
	phx_ydoc_free(doc);
	doc = one("\"off\"", &node);
	assert_int_equal(phx_ynode_enum(doc, node, modes, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 2);
	phx_ydoc_free(doc);
	doc = one("tpoo", &node);
	v = 9;
	assert_int_equal(phx_ynode_enum(doc, node, modes, &v, err, sizeof(err)), -1);
	assert_int_equal(v, 9);
	assert_string_equal(err, "t.yaml:1:4: key 'k': expected one of topo, block, off, "
				 "got 'tpoo'; did you mean 'topo'?");
	phx_ydoc_free(doc);
	doc = one("Block", &node);
	assert_int_equal(phx_ynode_enum(doc, node, modes, &v, err, sizeof(err)), -1);
	has(err, "did you mean 'block'?");
	phx_ydoc_free(doc);
	doc = one("weird", &node);
	assert_int_equal(phx_ynode_enum(doc, node, modes, &v, err, sizeof(err)), -1);
	assert_null(strstr(err, "did you mean"));
	phx_ydoc_free(doc);
	doc = one("", &node);
	assert_int_equal(phx_ynode_enum(doc, node, modes, &v, err, sizeof(err)), -1);
	has(err, "got nothing (null)");
	phx_ydoc_free(doc);
	doc = one("[topo]", &node);
	assert_int_equal(phx_ynode_enum(doc, node, modes, &v, err, sizeof(err)), -1);
	has(err, "got a list");
	phx_ydoc_free(doc);
}

static void test_string(void **state)
{
	static const struct {
		const char *text;
		const char *want;
	} good[] = {
		{ "plain words", "plain words" },
		{ "\"\"", "" },
		{ "''", "" },
		{ "\"a\\tb\"", "a\tb" },
		{ "'it''s'", "it's" },
		{ "yes", "yes" },
		{ "007", "007" },
		{ "\"null\"", "null" },
		{ "!!str ~", "~" },
		{ "/a/b:c", "/a/b:c" },
	};
	static const char *const bad[] = { "", "~", "null", "NULL", "[a]", "{a: b}" };
	const struct phx_ynode *node;
	struct phx_ydoc *doc;
	const char *s;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		doc = one(good[i].text, &node);
		assert_int_equal(phx_ynode_string(doc, node, &s, err, sizeof(err)), 0);
		assert_string_equal(s, good[i].want);
		phx_ydoc_free(doc);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = one(bad[i], &node);
		if (phx_ynode_string(doc, node, &s, err, sizeof(err)) != -1)
			fail_msg("'%s' accepted", bad[i]);
		msg_is(bad[i], "expected a string, got ");
		phx_ydoc_free(doc);
	}
	doc = one("~", &node);
	phx_ynode_string(doc, node, &s, err, sizeof(err));
	assert_string_equal(err, "t.yaml:1:4: key 'k': expected a string, got nothing (null); "
				 "write \"\" for an empty string");
	phx_ydoc_free(doc);
}

static void test_long_values(void **state)
{
	size_t n = 1 << 20;
	char *buf = malloc(n + 16);
	struct phx_ydoc *doc;
	long long v;

	assert_non_null(buf);
	memcpy(buf, "k: ", 3);
	memset(buf + 3, '7', n);
	strcpy(buf + 3 + n, "\n");
	doc = load(buf);
	assert_non_null(doc);
	assert_int_equal(strlen(doc->root->items[0]->value), n);
	/* The message quotes a bounded part of the value. */
	assert_int_equal(phx_ynode_int(doc, doc->root->items[0], 0, 10, &v, err, sizeof(err)), -1);
	has(err, "...'; out of range");
	assert_true(strlen(err) < 200);
	phx_ydoc_free(doc);
	/* A long key in a message is cut too (libyaml allows 1024 bytes). */
	memset(buf, 'k', 1000);
	strcpy(buf + 1000, ": 1\n");
	doc = load(buf);
	assert_non_null(doc);
	phx_ynode_error(doc, doc->root->items[0], err, sizeof(err), "bad");
	assert_true(strlen(err) < 200);
	has(err, "...': bad");
	phx_ydoc_free(doc);
	free(buf);
}

static void test_error_messages(void **state)
{
	struct phx_ydoc *doc = load("a:\n  - 1\n  - x: \"\\x01\"\n");
	const struct phx_ynode *a = phx_ynode_get(doc->root, "a");
	const struct phx_ynode *x = phx_ynode_get(a->items[1], "x");

	assert_int_equal(phx_ynode_error(doc, a->items[0], err, sizeof(err), "no %d", 5), -1);
	assert_string_equal(err, "t.yaml:2:5: key 'a[0]': no 5");
	phx_ynode_error(doc, x, err, sizeof(err), "bad");
	assert_string_equal(err, "t.yaml:3:8: key 'a[1].x': bad");
	phx_ynode_key_error(doc, x, err, sizeof(err), "unknown key");
	assert_string_equal(err, "t.yaml:3:5: unknown key");
	phx_ynode_error(doc, doc->root, err, sizeof(err), "top");
	assert_string_equal(err, "t.yaml:1:1: top");
	phx_ynode_error(doc, NULL, err, sizeof(err), "whole file");
	assert_string_equal(err, "t.yaml: whole file");
	phx_ynode_error(NULL, NULL, err, sizeof(err), "no doc");
	assert_string_equal(err, "(yaml): no doc");
	/* Tiny and absent buffers are respected. */
	phx_ynode_error(doc, x, err, 5, "bad");
	assert_string_equal(err, "t.ya");
	assert_int_equal(phx_ynode_error(doc, x, NULL, 0, "bad"), -1);
	phx_ydoc_free(doc);
	assert_int_equal(phx_ydoc_load_buffer("n", "a: [", 4, &doc, NULL, 0), -1);
	assert_null(doc);
	assert_int_equal(phx_ydoc_load_buffer(NULL, "a: [", 4, &doc, err, sizeof(err)), -1);
	has(err, "(yaml):");
}

static void test_suggest(void **state)
{
	static const char *const words[] = { "mode", "topology_conf", "on", "off" };
	char longw[100];

	assert_int_equal(phx_yaml_distance("", ""), 0);
	assert_int_equal(phx_yaml_distance("abc", ""), 3);
	assert_int_equal(phx_yaml_distance("kitten", "sitting"), 3);
	assert_int_equal(phx_yaml_distance("mdoe", "mode"), 1);
	assert_int_equal(phx_yaml_distance("ab", "ba"), 1);
	assert_int_equal(phx_yaml_distance(words[1], "topology_cnof"), 1);
	memset(longw, 'a', 99);
	longw[99] = '\0';
	assert_int_equal(phx_yaml_distance(longw, "a"), 255);
	assert_string_equal(phx_yaml_suggest("mdoe", words, 4), "mode");
	assert_string_equal(phx_yaml_suggest("MODE", words, 4), "mode");
	assert_string_equal(phx_yaml_suggest("topolgy_conf", words, 4), "topology_conf");
	assert_string_equal(phx_yaml_suggest("topology", words, 4) ? "x" : "none", "none");
	assert_string_equal(phx_yaml_suggest("of", words, 4), "on");
	assert_null(phx_yaml_suggest("xyz", words, 4));
	assert_null(phx_yaml_suggest("mode", words, 0));
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/phx-test-yaml.XXXXXX";
	struct phx_ydoc *doc = (struct phx_ydoc *)1;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "a: 1\nb: [\n", 10), 10);
	assert_int_equal(phx_ydoc_load_file(path, &doc, err, sizeof(err)), -1);
	assert_null(doc);
	assert_true(!strncmp(err, path, strlen(path)) && !strncmp(err + strlen(path), ":3:1: ", 6));
	/* Just over the limit, sparse: refused before it is read. */
	assert_int_equal(ftruncate(fd, PHX_YAML_MAX_BYTES + 1), 0);
	assert_int_equal(phx_ydoc_load_file(path, &doc, err, sizeof(err)), -1);
	has(err, "larger than the 16 MiB limit");
	assert_int_equal(ftruncate(fd, 5), 0);
	assert_int_equal(phx_ydoc_load_file(path, &doc, err, sizeof(err)), 0);
	assert_string_equal(doc->name, path);
	assert_string_equal(phx_ynode_get(doc->root, "a")->value, "1");
	phx_ydoc_free(doc);
	close(fd);
	unlink(path);
	assert_int_equal(phx_ydoc_load_file(path, &doc, err, sizeof(err)), -1);
	has(err, ": cannot read: No such file or directory");
	assert_int_equal(phx_ydoc_load_file("/tmp", &doc, err, sizeof(err)), -1);
	assert_string_equal(err, "/tmp: not a regular file");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_documents),
		cmocka_unit_test(test_tree_shape),
		cmocka_unit_test(test_root_kinds),
		cmocka_unit_test(test_aliases_and_anchors),
		cmocka_unit_test(test_documents),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_many_keys),
		cmocka_unit_test(test_keys_must_be_scalars),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_size_limit),
		cmocka_unit_test(test_node_limit),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_bom_and_utf8),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_tags),
		cmocka_unit_test(test_int),
		cmocka_unit_test(test_double),
		cmocka_unit_test(test_bool),
		cmocka_unit_test(test_enum),
		cmocka_unit_test(test_string),
		cmocka_unit_test(test_long_values),
		cmocka_unit_test(test_error_messages),
		cmocka_unit_test(test_suggest),
		cmocka_unit_test(test_load_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "placement/layout.h"

static const char *const dim_names[PHX_DIM_COUNT] = { "tp", "cp", "ep", "dp", "pp" };

/* Megatron's default: tensor parallel varies fastest, pipeline slowest. */
static const enum phx_dim default_order[PHX_DIM_COUNT] = {
	PHX_DIM_TP, PHX_DIM_CP, PHX_DIM_EP, PHX_DIM_DP, PHX_DIM_PP,
};

/* Index of "order" next to the dimensions in the seen[] bookkeeping. */
#define KEY_ORDER PHX_DIM_COUNT

struct item {
	const char *spec; /* whole spec, for columns */
	const char *key, *value, *eq;
	size_t key_len, value_len;
};

const char *phx_dim_name(enum phx_dim dim)
{
	return (unsigned)dim < PHX_DIM_COUNT ? dim_names[dim] : "?";
}

int phx_dim_parse(const char *name, size_t len)
{
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		if (len == 2 && !strncmp(name, dim_names[d], 2))
			return d;
	}
	return -1;
}

static size_t column(const struct item *it, const char *at)
{
	return (size_t)(at - it->spec) + 1;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *len)
{
	while (*len && is_blank(**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && is_blank((*s)[*len - 1]))
		(*len)--;
}

static int parse_size(const struct item *it, unsigned long *out, char *err, size_t errlen)
{
	unsigned long v = 0;
	size_t i;

	if (it->value_len == 0) {
		snprintf(err, errlen,
			 "'%.*s=' at column %zu has no value; give a size such as '%.*s=8' or "
			 "'%.*s=*'",
			 (int)it->key_len, it->key, column(it, it->key), (int)it->key_len, it->key,
			 (int)it->key_len, it->key);
		return -1;
	}
	for (i = 0; i < it->value_len; i++) {
		char c = it->value[i];

		if (c < '0' || c > '9')
			break;
		if (v <= PHX_LAYOUT_MAX_SIZE)
			v = v * 10 + (unsigned long)(c - '0');
	}
	if (i < it->value_len) {
		snprintf(err, errlen,
			 "%.*s='%.*s' at column %zu: the size must be a positive integer or '*'",
			 (int)it->key_len, it->key,
			 (int)it->value_len > 40 ? 40 : (int)it->value_len, it->value,
			 column(it, it->value));
		return -1;
	}
	if (v == 0) {
		snprintf(err, errlen, "%.*s=%.*s at column %zu: the size must be at least 1",
			 (int)it->key_len, it->key,
			 (int)it->value_len > 40 ? 40 : (int)it->value_len, it->value,
			 column(it, it->value));
		return -1;
	}
	if (v > PHX_LAYOUT_MAX_SIZE) {
		snprintf(err, errlen, "%.*s=%.*s at column %zu: the size is larger than %lu",
			 (int)it->key_len, it->key,
			 (int)it->value_len > 40 ? 40 : (int)it->value_len, it->value,
			 column(it, it->value), PHX_LAYOUT_MAX_SIZE);
		return -1;
	}
	*out = v;
	return 0;
}

/* "tp-cp-ep-dp-pp": every name once; left-out names are filled in later. */
static int parse_order(const struct item *it, struct phx_layout *l, unsigned *listed, char *err,
		       size_t errlen)
{
	const char *p = it->value, *end = it->value + it->value_len;
	size_t n = 0;

	*listed = 0;
	if (p == end) {
		snprintf(err, errlen, "'order=' at column %zu has no value; write e.g. 'order=%s'",
			 column(it, it->key), PHX_LAYOUT_DEFAULT_ORDER);
		return -1;
	}
	for (;;) {
		const char *dash = memchr(p, '-', (size_t)(end - p));
		const char *stop = dash ? dash : end;
		int d = phx_dim_parse(p, (size_t)(stop - p));

		if (d < 0) {
			snprintf(err, errlen,
				 "order: '%.*s' at column %zu is not a dimension; use tp, cp, ep, "
				 "dp and pp separated by '-', e.g. '%s'",
				 (int)(stop - p) > 20 ? 20 : (int)(stop - p), p, column(it, p),
				 PHX_LAYOUT_DEFAULT_ORDER);
			return -1;
		}
		if (*listed & (1u << d)) {
			snprintf(err, errlen,
				 "order: '%s' appears twice (column %zu); name each dimension once",
				 dim_names[d], column(it, p));
			return -1;
		}
		*listed |= 1u << d;
		l->order[n++] = (enum phx_dim)d;
		if (!dash)
			break;
		p = dash + 1;
	}
	/* Dimensions left out go after the listed ones, in the default order. */
	for (int i = 0; i < PHX_DIM_COUNT; i++) {
		if (!(*listed & (1u << default_order[i])))
			l->order[n++] = default_order[i];
	}
	return 0;
}

static int split_item(struct item *it, const char *start, const char *stop, char *err,
		      size_t errlen)
{
	const char *eq = memchr(start, '=', (size_t)(stop - start));
	size_t len = (size_t)(stop - start);

	trim(&start, &len);
	if (len == 0) {
		snprintf(err, errlen,
			 "empty item at column %zu (two commas in a row, or one at an end)",
			 column(it, start));
		return -1;
	}
	if (!eq) {
		snprintf(err, errlen, "'%.*s' at column %zu is not KEY=VALUE; write e.g. 'tp=8'",
			 (int)len > 40 ? 40 : (int)len, start, column(it, start));
		return -1;
	}
	it->eq = eq;
	it->key = start;
	it->key_len = (size_t)(eq - start);
	trim(&it->key, &it->key_len);
	it->value = eq + 1;
	it->value_len = (size_t)(start + len - it->value);
	trim(&it->value, &it->value_len);
	return 0;
}

static int key_index(const struct item *it, char *err, size_t errlen)
{
	int d = phx_dim_parse(it->key, it->key_len);

	if (d >= 0)
		return d;
	if (it->key_len == 0) {
		snprintf(err, errlen, "'=' at column %zu has no key before it; write e.g. 'tp=8'",
			 column(it, it->eq));
		return -1;
	}
	if (it->key_len == 5 && !strncmp(it->key, "order", 5))
		return KEY_ORDER;
	snprintf(err, errlen,
		 "unknown key '%.*s' at column %zu; the keys are tp, cp, ep, dp, pp and order",
		 (int)it->key_len > 40 ? 40 : (int)it->key_len, it->key, column(it, it->key));
	return -1;
}

static int parse_item(struct item *it, struct phx_layout *l, size_t *seen_at, unsigned *listed,
		      char *err, size_t errlen)
{
	int k = key_index(it, err, errlen);

	if (k < 0)
		return -1;
	if (seen_at[k]) {
		snprintf(err, errlen,
			 "'%s' is given twice (columns %zu and %zu); give each key once",
			 k == KEY_ORDER ? "order" : dim_names[k], seen_at[k], column(it, it->key));
		return -1;
	}
	seen_at[k] = column(it, it->key);
	if (k == KEY_ORDER)
		return parse_order(it, l, listed, err, errlen);
	if (it->value_len == 1 && it->value[0] == '*') {
		if (l->star >= 0) {
			snprintf(err, errlen,
				 "both %s and %s are '*'; only one size can be solved from the "
				 "world size",
				 dim_names[l->star], dim_names[k]);
			return -1;
		}
		l->star = k;
		l->size[k] = 0;
		return 0;
	}
	return parse_size(it, &l->size[k], err, errlen);
}

static int check_order(const struct phx_layout *l, unsigned listed, char *err, size_t errlen)
{
	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		if (listed & (1u << d) || l->size[d] == 1)
			continue;
		if (l->star == d)
			snprintf(err, errlen,
				 "order leaves out %s=*; list every dimension that is not 1",
				 dim_names[d]);
		else
			snprintf(err, errlen,
				 "order leaves out %s=%lu; list every dimension that is not 1",
				 dim_names[d], l->size[d]);
		return -1;
	}
	return 0;
}

int phx_layout_parse(const char *spec, struct phx_layout *l, char *err, size_t errlen)
{
	size_t seen_at[PHX_DIM_COUNT + 1] = { 0 };
	unsigned listed = ~0u;
	struct item it = { .spec = spec };
	const char *p = spec;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		l->size[d] = 1;
		l->order[d] = default_order[d];
	}
	l->star = -1;
	l->world = 0;
	if (!spec || !spec[strspn(spec, " \t")]) {
		snprintf(err, errlen, "the layout is empty; give sizes such as 'tp=8,pp=4,dp=*'");
		return -1;
	}
	for (;;) {
		const char *comma = strchr(p, ',');
		const char *stop = comma ? comma : p + strlen(p);

		if (split_item(&it, p, stop, err, errlen) < 0 ||
		    parse_item(&it, l, seen_at, &listed, err, errlen) < 0)
			return -1;
		if (!comma)
			break;
		p = comma + 1;
	}
	/* dp is what is left over when nothing else is solved. */
	if (l->star < 0 && !seen_at[PHX_DIM_DP]) {
		l->star = PHX_DIM_DP;
		l->size[PHX_DIM_DP] = 0;
	}
	return seen_at[KEY_ORDER] ? check_order(l, listed, err, errlen) : 0;
}

static int product(const struct phx_layout *l, unsigned long *out, char *err, size_t errlen)
{
	unsigned long prod = 1;

	for (int d = 0; d < PHX_DIM_COUNT; d++) {
		if (d == l->star)
			continue;
		prod *= l->size[d]; /* both factors <= 2^22: no overflow in 64 bits */
		if (prod > PHX_LAYOUT_MAX_WORLD) {
			snprintf(err, errlen, "the sizes multiply to more than %lu ranks",
				 PHX_LAYOUT_MAX_WORLD);
			return -1;
		}
	}
	*out = prod;
	return 0;
}

static void describe(const struct phx_layout *l, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int d = 0; d < PHX_DIM_COUNT && off < len; d++) {
		if (d == l->star || l->size[d] == 1)
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%s%s=%lu", off ? " x " : "",
					dim_names[d], l->size[d]);
	}
	if (!buf[0])
		snprintf(buf, len, "all 1");
}

int phx_layout_resolve(struct phx_layout *l, unsigned long world, char *err, size_t errlen)
{
	char what[128];
	unsigned long prod;

	if (product(l, &prod, err, errlen) < 0)
		return -1;
	if (world == 0 || world > PHX_LAYOUT_MAX_WORLD) {
		snprintf(err, errlen, "world size %lu is out of range (1 to %lu ranks)", world,
			 PHX_LAYOUT_MAX_WORLD);
		return -1;
	}
	describe(l, what, sizeof(what));
	if (l->star >= 0) {
		if (world % prod) {
			snprintf(err, errlen,
				 "%s=* cannot be solved: the other sizes (%s) make %lu ranks, "
				 "which does not divide the world size of %lu",
				 dim_names[l->star], what, prod, world);
			return -1;
		}
		l->size[l->star] = world / prod;
		if (l->size[l->star] > PHX_LAYOUT_MAX_SIZE) {
			snprintf(err, errlen, "%s=* solves to %lu, larger than %lu",
				 dim_names[l->star], world / prod, PHX_LAYOUT_MAX_SIZE);
			l->size[l->star] = 0;
			return -1;
		}
		l->star = -1;
	} else if (prod != world) {
		snprintf(err, errlen,
			 "the sizes (%s) make %lu ranks but the world size is %lu; change a size "
			 "or write one as '*'",
			 what, prod, world);
		return -1;
	}
	l->world = world;
	return 0;
}

int phx_layout_format(const struct phx_layout *l, char *buf, size_t len)
{
	char order[32];
	size_t off = 0;

	for (int i = 0; i < PHX_DIM_COUNT; i++)
		off += (size_t)snprintf(order + off, sizeof(order) - off, "%s%s", i ? "-" : "",
					dim_names[l->order[i]]);
	/* "%.0lu" prints nothing for 0, the unresolved '*'. */
	return snprintf(buf, len, "tp=%.0lu%s,cp=%.0lu%s,ep=%.0lu%s,dp=%.0lu%s,pp=%.0lu%s,order=%s",
			l->size[0], l->star == 0 ? "*" : "", l->size[1], l->star == 1 ? "*" : "",
			l->size[2], l->star == 2 ? "*" : "", l->size[3], l->star == 3 ? "*" : "",
			l->size[4], l->star == 4 ? "*" : "", order);
}

unsigned long phx_layout_stride(const struct phx_layout *l, enum phx_dim dim)
{
	unsigned long stride = 1;

	for (int i = 0; i < PHX_DIM_COUNT && l->order[i] != dim; i++)
		stride *= l->size[l->order[i]];
	return stride;
}

void phx_layout_coords(const struct phx_layout *l, unsigned long rank,
		       unsigned long coord[PHX_DIM_COUNT])
{
	for (int i = 0; i < PHX_DIM_COUNT; i++) {
		enum phx_dim d = l->order[i];

		coord[d] = rank % l->size[d];
		rank /= l->size[d];
	}
}

unsigned long phx_layout_rank(const struct phx_layout *l, const unsigned long coord[PHX_DIM_COUNT])
{
	unsigned long rank = 0;

	for (int i = PHX_DIM_COUNT - 1; i >= 0; i--) {
		enum phx_dim d = l->order[i];

		rank = rank * l->size[d] + coord[d];
	}
	return rank;
}

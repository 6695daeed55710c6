/* SPDX-License-Identifier: Apache-2.0 */
/* The pure decisions of checkpoint staging; see ckpt.h. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/node/ckpt.h"

static const char tier_letter[PHX_TIER_COUNT] = { 'm', 'l', 's' };

const char *phx_ckpt_tier_name(enum phx_ckpt_tier t)
{
	static const char *const names[] = { "memory", "local", "shared" };

	return t < PHX_TIER_COUNT ? names[t] : "?";
}

unsigned phx_ckpt_tiers_due(unsigned long save_no, const int every[PHX_TIER_COUNT], bool requested)
{
	unsigned due = 1u << PHX_TIER_MEMORY;

	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		if (every[t] > 0 && (requested || save_no % (unsigned long)every[t] == 0))
			due |= 1u << t;
	}
	return due;
}

void phx_ckpt_state_add(struct phx_ckpt_state *s, enum phx_ckpt_tier t, long step)
{
	unsigned i, n = s->n[t];

	for (i = 0; i < n; i++) {
		if (s->steps[t][i] == step)
			return;
		if (s->steps[t][i] < step)
			break;
	}
	if (i >= PHX_CKPT_STATE_MAX)
		return;
	if (n == PHX_CKPT_STATE_MAX)
		n--;
	memmove(&s->steps[t][i + 1], &s->steps[t][i], (n - i) * sizeof(long));
	s->steps[t][i] = step;
	s->n[t] = n + 1;
}

int phx_ckpt_state_format(const struct phx_ckpt_state *s, char *buf, size_t len)
{
	size_t off = 0;
	int w = snprintf(buf, len, "ck1");

	for (int t = 0; t < PHX_TIER_COUNT && w >= 0; t++) {
		off += (size_t)w;
		w = snprintf(buf + (off < len ? off : len), off < len ? len - off : 0,
			     " %c=", tier_letter[t]);
		for (unsigned i = 0; i < s->n[t] && w >= 0; i++) {
			off += (size_t)w;
			w = snprintf(buf + (off < len ? off : len), off < len ? len - off : 0,
				     i ? ",%ld" : "%ld", s->steps[t][i]);
		}
	}
	if (w >= 0 && (s->published[PHX_TIER_LOCAL] >= 0 || s->published[PHX_TIER_SHARED] >= 0)) {
		off += (size_t)w;
		w = snprintf(buf + (off < len ? off : len), off < len ? len - off : 0, " p=%ld,%ld",
			     s->published[PHX_TIER_LOCAL], s->published[PHX_TIER_SHARED]);
	}
	return w < 0 ? w : (int)(off + (size_t)w);
}

/* "S,S,S" (possibly empty) up to the next space; strictly decreasing steps. */
static const char *parse_list(const char *p, struct phx_ckpt_state *out, int t)
{
	while (*p && *p != ' ') {
		char *end;
		long v;

		/* Digits only, no leading zero: one text per state. */
		if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9') ||
		    out->n[t] >= PHX_CKPT_STATE_MAX)
			return NULL;
		errno = 0;
		v = strtol(p, &end, 10);
		if (errno || (out->n[t] && v >= out->steps[t][out->n[t] - 1]))
			return NULL;
		out->steps[t][out->n[t]++] = v;
		p = end;
		if (*p == ',' && (p[1] < '0' || p[1] > '9'))
			return NULL;
		if (*p == ',')
			p++;
	}
	return p;
}

/* "-1" or a step without a leading zero, up to end; NULL when not one. */
static const char *parse_published(const char *p, char end, long *out)
{
	char *stop;

	if (!strncmp(p, "-1", 2) && p[2] == end) {
		*out = -1;
		return p + 2;
	}
	if (*p < '0' || *p > '9' || (*p == '0' && p[1] != end))
		return NULL;
	errno = 0;
	*out = strtol(p, &stop, 10);
	return errno || *stop != end ? NULL : stop;
}

int phx_ckpt_state_parse(const char *s, struct phx_ckpt_state *out)
{
	const char *p = s;

	memset(out, 0, sizeof(*out));
	for (int t = 0; t < PHX_TIER_COUNT; t++)
		out->published[t] = -1;
	if (strncmp(p, "ck1", 3))
		return -1;
	p += 3;
	for (int t = 0; t < PHX_TIER_COUNT; t++) {
		if (p[0] != ' ' || p[1] != tier_letter[t] || p[2] != '=')
			return -1;
		p = parse_list(p + 3, out, t);
		if (!p)
			return -1;
	}
	if (!*p)
		return 0;
	if (strncmp(p, " p=", 3))
		return -1;
	p = parse_published(p + 3, ',', &out->published[PHX_TIER_LOCAL]);
	if (p)
		p = parse_published(p + 1, '\0', &out->published[PHX_TIER_SHARED]);
	/* Both -1 is written as no p= at all: one text per state. */
	if (!p || (out->published[PHX_TIER_LOCAL] < 0 && out->published[PHX_TIER_SHARED] < 0))
		return -1;
	return 0;
}

long phx_ckpt_published_everywhere(const struct phx_ckpt_state *s, size_t n, enum phx_ckpt_tier t)
{
	long low = n ? LONG_MAX : -1;

	for (size_t i = 0; i < n; i++)
		low = s[i].published[t] < low ? s[i].published[t] : low;
	return low;
}

static bool holds(const struct phx_ckpt_state *s, enum phx_ckpt_tier t, long step)
{
	for (unsigned i = 0; i < s->n[t]; i++) {
		if (s->steps[t][i] == step)
			return true;
	}
	return false;
}

long phx_ckpt_common_newest(const struct phx_ckpt_state *s, size_t n, enum phx_ckpt_tier t)
{
	if (!n)
		return -1;
	/* Candidates come from the first state, newest first. */
	for (unsigned i = 0; i < s[0].n[t]; i++) {
		long step = s[0].steps[t][i];
		size_t k;

		for (k = 1; k < n && holds(&s[k], t, step); k++)
			;
		if (k == n)
			return step;
	}
	return -1;
}

struct gc_gen {
	long step;
	bool published;
};

static int by_step_desc(const void *a, const void *b)
{
	long x = ((const struct gc_gen *)a)->step, y = ((const struct gc_gen *)b)->step;

	return x < y ? 1 : x > y ? -1 : 0;
}

size_t phx_ckpt_gc_pick(const long *steps, const bool *published, size_t n, long committed,
			unsigned keep, long *drop)
{
	struct gc_gen *sorted = malloc(n * sizeof(*sorted) + 1);
	size_t kept = 0, nd = 0;
	bool newer_published = false;

	if (!sorted)
		return 0;
	for (size_t i = 0; i < n; i++)
		sorted[i] = (struct gc_gen){ .step = steps[i], .published = published[i] };
	qsort(sorted, n, sizeof(*sorted), by_step_desc);
	for (size_t i = 0; i < n; i++) {
		if (sorted[i].step > committed)
			continue;
		if (!sorted[i].published) {
			if (newer_published)
				drop[nd++] = sorted[i].step;
			continue;
		}
		newer_published = true;
		if (kept < keep)
			kept++;
		else
			drop[nd++] = sorted[i].step;
	}
	free(sorted);
	return nd;
}

void phx_ckpt_gen_name(long step, char *buf, size_t len)
{
	snprintf(buf, len, "gen-%012ld", step);
}

long phx_ckpt_gen_parse(const char *name)
{
	char *end;
	long v;

	if (strncmp(name, "gen-", 4) || name[4] < '0' || name[4] > '9' || strlen(name) != 16)
		return -1;
	errno = 0;
	v = strtol(name + 4, &end, 10);
	return errno || *end ? -1 : v;
}

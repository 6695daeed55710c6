/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/gpulist.h"

/* Decimal digits at p; saturates instead of wrapping so "99999999999" is out of range. */
static const char *parse_num(const char *p, unsigned long *v)
{
	unsigned long x = 0;

	if (*p < '0' || *p > '9')
		return NULL;
	for (; *p >= '0' && *p <= '9'; p++)
		x = x > 1000000 ? x : x * 10 + (unsigned long)(*p - '0');
	*v = x;
	return p;
}

static int add(struct phx_gpus *out, bool *seen, unsigned long id, const char *s, char *err,
	       size_t errlen)
{
	if (id >= PHX_GPU_MAX)
		return phx_errf(err, errlen, "GPU %lu in '%.64s' is out of range (0 to %d)", id, s,
				PHX_GPU_MAX - 1);
	if (seen[id])
		return phx_errf(err, errlen, "GPU %lu is listed twice in '%.64s'", id, s);
	seen[id] = true;
	out->id[out->n++] = (unsigned)id;
	return 0;
}

static int parse_items(const char *s, struct phx_gpus *out, char *err, size_t errlen)
{
	bool seen[PHX_GPU_MAX] = { false };
	const char *p = s;

	while (*p) {
		unsigned long lo, hi;

		p = parse_num(p, &lo);
		if (!p)
			goto syntax;
		hi = lo;
		if (*p == '-' && !(p = parse_num(p + 1, &hi)))
			goto syntax;
		if (hi < lo)
			return phx_errf(err, errlen, "range %lu-%lu in '%.64s' runs backwards", lo,
					hi, s);
		for (unsigned long id = lo; id <= hi; id++) {
			if (add(out, seen, id, s, err, errlen) < 0)
				return -1;
		}
		if (*p == ',' && p[1])
			p++;
		else if (*p)
			goto syntax;
	}
	return 0;
syntax:
	return phx_errf(err, errlen, "'%.64s' is not a list of GPU numbers like 0,2-3", s);
}

int phx_gpus_parse(const char *s, struct phx_gpus *out, char *err, size_t errlen)
{
	out->n = 0;
	if (!s)
		return phx_errf(err, errlen, "no GPU list");
	if (parse_items(s, out, err, errlen) < 0) {
		out->n = 0;
		return -1;
	}
	return 0;
}

int phx_gpus_format(const struct phx_gpus *g, char *buf, size_t len)
{
	size_t used = 0;

	if (!len)
		return -1;
	buf[0] = '\0';
	for (unsigned i = 0; i < g->n; i++) {
		int n = snprintf(buf + used, len - used, "%s%u", i ? "," : "", g->id[i]);

		if (n < 0 || (size_t)n >= len - used)
			return -1;
		used += (size_t)n;
	}
	return 0;
}

bool phx_gpus_has(const struct phx_gpus *g, unsigned id)
{
	for (unsigned i = 0; i < g->n; i++) {
		if (g->id[i] == id)
			return true;
	}
	return false;
}

int phx_gpus_rank(const struct phx_gpus *g, unsigned id)
{
	int below = 0;

	if (!phx_gpus_has(g, id))
		return -1;
	for (unsigned i = 0; i < g->n; i++)
		below += g->id[i] < id;
	return below;
}

int phx_gpus_select(enum phx_isolate_mode mode, const struct phx_gpus *alloc, unsigned task,
		    unsigned ntasks, struct phx_gpus *visible)
{
	unsigned long long n = alloc->n, first, end;

	visible->n = 0;
	if (task >= ntasks)
		return -1;
	if (mode != PHX_ISOLATE_TASK) {
		*visible = *alloc;
		return 0;
	}
	if (!n)
		return 0;
	first = task * n / ntasks;
	end = (task + 1ULL) * n / ntasks;
	/* Fewer GPUs than tasks: neighbours share one, never none. */
	if (end == first)
		end = first + 1;
	for (unsigned long long i = first; i < end; i++)
		visible->id[visible->n++] = alloc->id[i];
	return 0;
}

void phx_gpus_hidden(const struct phx_gpus *present, const struct phx_gpus *visible,
		     struct phx_gpus *hidden)
{
	hidden->n = 0;
	for (unsigned i = 0; i < present->n; i++) {
		if (!phx_gpus_has(visible, present->id[i]))
			hidden->id[hidden->n++] = present->id[i];
	}
}

int phx_gpus_cuda(const char *cvd, const char *slurm_cvd, const struct phx_gpus *alloc,
		  const struct phx_gpus *visible, char *out, size_t len)
{
	struct phx_gpus want, slurm, ord = { 0 };
	int rc;

	if (phx_gpus_parse(cvd, &want, NULL, 0) < 0 ||
	    phx_gpus_parse(slurm_cvd, &slurm, NULL, 0) < 0 || slurm.n != alloc->n)
		return -1;
	for (unsigned i = 0; i < want.n; i++) {
		unsigned k;
		int r;

		for (k = 0; k < slurm.n && slurm.id[k] != want.id[i]; k++)
			;
		if (k == slurm.n)
			return -1;
		r = phx_gpus_rank(visible, alloc->id[k]);
		if (r >= 0)
			ord.id[ord.n++] = (unsigned)r;
	}
	rc = phx_gpus_format(&ord, out, len);
	return rc < 0 ? -1 : (int)ord.n;
}

static const char *next_line(const char *s)
{
	s = strchr(s, '\n');
	return s ? s + 1 : NULL;
}

int phx_gpu_info_minor(const char *text, unsigned *minor)
{
	static const char key[] = "Device Minor:";
	const char *line, *p;
	unsigned long v;

	for (line = text; line; line = next_line(line)) {
		if (strncmp(line, key, sizeof(key) - 1))
			continue;
		p = line + sizeof(key) - 1;
		p += strspn(p, " \t");
		p = parse_num(p, &v);
		if (!p || v >= PHX_GPU_MAX)
			return -1;
		p += strspn(p, " \t\r");
		if (*p && *p != '\n')
			return -1;
		*minor = (unsigned)v;
		return 0;
	}
	return -1;
}

/* Copies tmpl into buf at *used, "%%" as '%' and "%<letter>" as value. */
static int expand(const char *tmpl, char letter, const char *value, char *buf, size_t len,
		  size_t *used)
{
	for (const char *p = tmpl; *p; p++) {
		const char *s = p;
		size_t n = 1;

		if (*p == '%') {
			p++;
			if (*p == letter && value) {
				s = value;
				n = strlen(value);
			} else if (*p != '%') {
				return -1;
			}
		}
		if (*used + n >= len)
			return -1;
		memcpy(buf + *used, s, n);
		*used += n;
	}
	buf[*used] = '\0';
	return 0;
}

int phx_gpu_path(const char *root, const char *pattern, const char *node, unsigned index, char *buf,
		 size_t len)
{
	char num[16];
	size_t used = 0;

	if (!len)
		return -1;
	buf[0] = '\0';
	if (root && root[0] && strcmp(root, "/")) {
		if (expand(root, 'n', node, buf, len, &used) < 0)
			return -1;
		/* "/srv/fake/" + "/dev/nvidia0" */
		while (used && buf[used - 1] == '/')
			buf[--used] = '\0';
	}
	snprintf(num, sizeof(num), "%u", index);
	return expand(pattern, 'u', num, buf, len, &used);
}

int phx_cuda_entry(const char *list, unsigned index, char *out, size_t len)
{
	const char *p = list;

	for (unsigned i = 0; p; i++) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (i == index) {
			if (!n || n + 1 > len)
				return -1;
			memcpy(out, p, n);
			out[n] = '\0';
			return 0;
		}
		p = end ? end + 1 : NULL;
	}
	return -1;
}

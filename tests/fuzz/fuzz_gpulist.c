/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU lists and driver files are read as root in slurmstepd: from the
 * task's environment and from /proc/driver/nvidia. Lines of the input:
 * a GPU list, Slurm's CUDA_VISIBLE_DEVICES, a per-task one, a path pattern;
 * the whole input is also read as an 'information' file.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/gpulist.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "gpulist";

/* The next line of *p (cut off in place), "" when there is none. */
static const char *next_line(char **p)
{
	char *line = *p, *nl;

	if (!line)
		return "";
	nl = strchr(line, '\n');
	*p = nl ? nl + 1 : NULL;
	if (nl)
		*nl = '\0';
	return line;
}

static void round_trip(const struct phx_gpus *g)
{
	struct phx_gpus again;
	char buf[2048];

	if (phx_gpus_format(g, buf, sizeof(buf)) < 0 || phx_gpus_parse(buf, &again, NULL, 0) < 0 ||
	    again.n != g->n || memcmp(again.id, g->id, g->n * sizeof(g->id[0])))
		abort();
}

/* What isolation decides from them never breaks its own rules. */
static void decide(const struct phx_gpus *alloc, const char *slurm_cvd, const char *cvd,
		   unsigned seed)
{
	struct phx_gpus visible, hidden, node;
	unsigned ntasks = seed % 9 + 1;
	char out[2048];

	if (phx_gpus_parse("0-255", &node, NULL, 0) < 0)
		abort();
	for (int mode = PHX_ISOLATE_JOB; mode <= PHX_ISOLATE_OFF; mode++) {
		if (phx_gpus_select((enum phx_isolate_mode)mode, alloc, seed % ntasks, ntasks,
				    &visible) < 0)
			abort();
		if (visible.n > alloc->n || (alloc->n && !visible.n))
			abort();
		phx_gpus_hidden(&node, &visible, &hidden);
		if (hidden.n + visible.n != node.n)
			abort();
		if (phx_gpus_cuda(cvd, slurm_cvd, alloc, &visible, out, sizeof(out)) >
		    (int)visible.n)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *list, *slurm_cvd, *cvd, *pattern;
	struct phx_gpus alloc;
	char err[256], path[4096];
	char *text, *copy, *p;
	unsigned minor;

	if (size > 8192)
		return 0;
	text = malloc(size + 1);
	copy = malloc(size + 1);
	if (!text || !copy)
		goto out;
	memcpy(text, data, size);
	text[size] = '\0';
	memcpy(copy, text, size + 1);
	phx_gpu_info_minor(text, &minor);
	p = copy;
	list = next_line(&p);
	slurm_cvd = next_line(&p);
	cvd = next_line(&p);
	pattern = next_line(&p);
	if (phx_gpus_parse(list, &alloc, err, sizeof(err)) == 0) {
		round_trip(&alloc);
		decide(&alloc, slurm_cvd, cvd, (unsigned)size);
	}
	phx_gpu_path(slurm_cvd, pattern, cvd, (unsigned)size, path, sizeof(path));
out:
	free(text);
	free(copy);
	return 0;
}

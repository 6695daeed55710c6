/* SPDX-License-Identifier: Apache-2.0 */
/* The driver's options and the agents' command line made from them; pure. */
#include "config.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "launcher/options.h"

const struct option phx_driver_long_opts[PHX_DRIVER_NOPTS] = {
	{ "spares", required_argument, NULL, PHX_DOPT_SPARES },
	{ "elastic", no_argument, NULL, PHX_DOPT_ELASTIC },
	{ "max-relaunches", required_argument, NULL, PHX_DOPT_RELAUNCHES },
	{ "same-failure-limit", required_argument, NULL, PHX_DOPT_SAME },
	{ "drain-bad-nodes", no_argument, NULL, PHX_DOPT_DRAIN },
	{ "no-drain-bad-nodes", no_argument, NULL, PHX_DOPT_NO_DRAIN },
	{ "srun", required_argument, NULL, PHX_DOPT_SRUN },
	{ "preflight", no_argument, NULL, PHX_DOPT_PREFLIGHT },
	{ "no-preflight", no_argument, NULL, PHX_DOPT_NO_PREFLIGHT },
	{ "preflight-results", required_argument, NULL, PHX_DOPT_PREFLIGHT_RESULTS },
	{ "srun-arg", required_argument, NULL, PHX_DOPT_SRUN_ARG },
};

void phx_driver_defaults(struct phx_driver_opts *d)
{
	memset(d, 0, sizeof(*d));
	d->spares = -1;
	d->max_relaunches = -1;
	d->same_failure_limit = -1;
	d->drain = -1;
	d->preflight = -1;
}

void phx_driver_usage(FILE *out)
{
	fprintf(out,
		"\nDriver mode (in a batch script: phalanx-launch [OPTIONS] -- COMMAND):\n"
		"  --spares N              nodes of the allocation held back for relaunches\n"
		"  --elastic               with too few nodes left, shrink dp instead of "
		"requeueing\n"
		"  --max-relaunches N      relaunches of the step before giving up\n"
		"  --same-failure-limit K  the same exception at the same step K times stops\n"
		"  --drain-bad-nodes       drain nodes found bad (needs Slurm operator rights)\n"
		"  --no-drain-bad-nodes    do not, whatever phalanx.yaml says\n"
		"  --srun PATH             the srun to run (default: srun from PATH)\n"
		"  --srun-arg OPT          an option for the srun of each step, e.g.\n"
		"                          --srun-arg=--container-image=IMG (repeatable)\n"
		"  --preflight             GPU/NCCL check of the nodes before they are used\n"
		"  --no-preflight          no check, whatever phalanx.yaml says\n"
		"  --preflight-results F   judge the check results recorded in F (implies "
		"--preflight)\n");
}

static int count(const char *opt, const char *s, long min, long max, int *out, char *err,
		 size_t errlen)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < min || v > max)
		return phx_errf(err, errlen, "--%s '%s' is not a whole number in %ld..%ld", opt, s,
				min, max);
	*out = (int)v;
	return 0;
}

/*
 * The srun options that shape the step: the driver sets them for each
 * step (its nodes, one agent per node), so a user's would break it.
 */
static const char *const step_shape[] = {
	"-N",	      "--nodes", "-n",	      "--ntasks",  "--ntasks-per-node", "-w",
	"--nodelist", "-x",	 "--exclude", "--overlap", "--jobid",		NULL
};

static int add_srun_arg(struct phx_driver_opts *d, const char *arg, char *err, size_t errlen)
{
	size_t len = strcspn(arg, "=");

	if (arg[0] != '-')
		return phx_errf(
			err, errlen,
			"--srun-arg '%s' is not an srun option; write --srun-arg=--opt=value", arg);
	for (size_t i = 0; step_shape[i]; i++) {
		size_t n = strlen(step_shape[i]);

		/* "-N2" as well as "--nodes=2". */
		if (!strncmp(arg, step_shape[i], n) && (arg[1] != '-' || len == n))
			return phx_errf(
				err, errlen,
				"--srun-arg '%s': phalanx-launch sets %s for each step itself; "
				"size the step with sbatch and --spares",
				arg, step_shape[i]);
	}
	if (d->n_srun_args == PHX_DRIVER_MAX_SRUN_ARGS)
		return phx_errf(err, errlen, "more than %d --srun-arg options",
				PHX_DRIVER_MAX_SRUN_ARGS);
	d->srun_args[d->n_srun_args++] = arg;
	return 0;
}

int phx_driver_parse_one(int c, const char *arg, struct phx_driver_opts *d, char *err,
			 size_t errlen)
{
	d->any = true;
	switch (c) {
	case PHX_DOPT_SPARES:
		return count("spares", arg, 0, 100000, &d->spares, err, errlen);
	case PHX_DOPT_ELASTIC:
		d->elastic = true;
		return 0;
	case PHX_DOPT_RELAUNCHES:
		return count("max-relaunches", arg, 0, 1000, &d->max_relaunches, err, errlen);
	case PHX_DOPT_SAME:
		return count("same-failure-limit", arg, 1, 1000, &d->same_failure_limit, err,
			     errlen);
	case PHX_DOPT_DRAIN:
		d->drain = 1;
		return 0;
	case PHX_DOPT_NO_DRAIN:
		d->drain = 0;
		return 0;
	case PHX_DOPT_SRUN:
		if (!*arg)
			return phx_errf(err, errlen, "--srun needs the path of srun");
		d->srun = arg;
		return 0;
	case PHX_DOPT_PREFLIGHT:
		d->preflight = 1;
		return 0;
	case PHX_DOPT_NO_PREFLIGHT:
		d->preflight = 0;
		return 0;
	case PHX_DOPT_PREFLIGHT_RESULTS:
		if (!*arg)
			return phx_errf(err, errlen,
					"--preflight-results needs a file of phalanx check "
					"results (phalanx check --json)");
		d->preflight_results = arg;
		d->preflight = 1;
		return 0;
	case PHX_DOPT_SRUN_ARG:
		return add_srun_arg(d, arg, err, errlen);
	}
	return phx_errf(err, errlen, "unknown option; run 'phalanx-launch --help'");
}

/* Index of the driver option named by s ("--name" or "--name=value"), -1. */
static int driver_opt(const char *s)
{
	size_t len;

	if (strncmp(s, "--", 2) != 0)
		return -1;
	s += 2;
	len = strcspn(s, "=");
	for (size_t i = 0; i < PHX_DRIVER_NOPTS; i++) {
		if (strlen(phx_driver_long_opts[i].name) == len &&
		    !strncmp(phx_driver_long_opts[i].name, s, len))
			return (int)i;
	}
	return -1;
}

/*
 * Options end at "--". Without it, a value word of an agent option is
 * copied as it is, and so is the command, unless it spells a driver
 * option (phalanx-launch(1) asks for "--").
 */
char **phx_driver_agent_args(int argc, char **argv, const char *layout, int *out_argc)
{
	char **v = calloc((size_t)argc + 3, sizeof(*v));
	bool opts = true;
	int n = 0;

	if (!v)
		return NULL;
	/* getopt takes the last --layout: the new one replaces the user's. */
	if (layout) {
		v[n++] = "--layout";
		v[n++] = (char *)layout;
	}
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		int k;

		if (opts && !strcmp(s, "--")) {
			opts = false;
		} else if (opts && (k = driver_opt(s)) >= 0) {
			/* Its value too, when it is the next word. */
			if (phx_driver_long_opts[k].has_arg == required_argument && !strchr(s, '='))
				i++;
			continue;
		} else if (opts && layout && !strncmp(s, "--layout", 8) &&
			   (s[8] == '\0' || s[8] == '=')) {
			if (s[8] == '\0')
				i++;
			continue;
		}
		v[n++] = argv[i];
	}
	v[n] = NULL;
	*out_argc = n;
	return v;
}

int phx_launch_mode(bool agent, const char *job_id, const char *step_id, char *err, size_t errlen)
{
	if (agent)
		return 0;
	if (job_id && *job_id && (!step_id || !*step_id))
		return 1;
	if (job_id && *job_id)
		return phx_errf(err, errlen,
				"phalanx-launch without --agent runs in a batch script, not inside "
				"a step (SLURM_STEP_ID=%s): call it from the script itself, or "
				"use 'srun --mpi=pmix --ntasks-per-node=1 phalanx-launch --agent'",
				step_id);
	return phx_errf(err, errlen,
			"phalanx-launch runs inside a Slurm allocation (no SLURM_JOB_ID here): "
			"put it in an sbatch script, or run 'salloc -N NODES phalanx-launch ...'");
}

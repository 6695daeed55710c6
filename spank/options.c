/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "spank/options.h"

struct phx_job_opts phx_opts;

enum phx_opt_id { OPT_LAYOUT = 1, OPT_PLACE, OPT_ISOLATE, OPT_EXPLAIN };

/* Longest layout spec accepted; longer is a typo or an attack. */
#define PHX_LAYOUT_MAX 256

static int set_layout(const char *val)
{
	if (!val || !*val || strlen(val) > PHX_LAYOUT_MAX) {
		phx_error("--phx-layout needs a spec such as 'tp=8,pp=4,dp=*' (at most %d "
			  "characters)",
			  PHX_LAYOUT_MAX);
		return -1;
	}
	free(phx_opts.layout);
	phx_opts.layout = strdup(val);
	return phx_opts.layout ? 0 : -1;
}

static int set_place(const char *val)
{
	if (phx_place_mode_parse(val, &phx_opts.place) < 0) {
		phx_error("--phx-place='%s' is not known; use topo, block or off", val ? val : "");
		return -1;
	}
	phx_opts.place_set = true;
	return 0;
}

static int set_isolate(const char *val)
{
	if (phx_isolate_mode_parse(val, &phx_opts.isolate) < 0) {
		phx_error("--phx-isolate='%s' is not known; use job, task or off", val ? val : "");
		return -1;
	}
	phx_opts.isolate_set = true;
	return 0;
}

static int set_explain(const char *val)
{
	/* The flag takes no value; its twin PHX_EXPLAIN takes 0/1. */
	if (val && strcmp(val, "1") && strcmp(val, "0") && strcmp(val, "yes") &&
	    strcmp(val, "no")) {
		phx_error("PHX_EXPLAIN='%s' is not known; use 1 or 0", val);
		return -1;
	}
	phx_opts.explain = !val || !strcmp(val, "1") || !strcmp(val, "yes");
	phx_opts.explain_set = true;
	return 0;
}

struct phx_opt_desc {
	enum phx_opt_id id;
	const char *env;
	int (*set)(const char *val);
};

static const struct phx_opt_desc opt_desc[] = {
	{ OPT_LAYOUT, "PHX_LAYOUT", set_layout },
	{ OPT_PLACE, "PHX_PLACE", set_place },
	{ OPT_ISOLATE, "PHX_ISOLATE", set_isolate },
	{ OPT_EXPLAIN, "PHX_EXPLAIN", set_explain },
};

static bool opt_given[sizeof(opt_desc) / sizeof(opt_desc[0])];

static int opt_cb(int val, const char *optarg, int remote)
{
	for (size_t i = 0; i < sizeof(opt_desc) / sizeof(opt_desc[0]); i++) {
		if (opt_desc[i].id != (enum phx_opt_id)val)
			continue;
		opt_given[i] = true;
		/* Callbacks may run twice per step: setting is idempotent. */
		return opt_desc[i].set(optarg) ? -1 : 0;
	}
	return -1;
}

static struct spank_option spank_opts[] = {
	{ "phx-layout", "SPEC",
	  "[phalanx] Parallel layout, e.g. tp=8,pp=4,dp=* (env PHX_LAYOUT); ranks are placed "
	  "so the heaviest traffic stays on the fastest links",
	  1, OPT_LAYOUT, opt_cb },
	{ "phx-place", "MODE",
	  "[phalanx] Rank placement: topo (default), block (Slurm order) or off (env PHX_PLACE)", 1,
	  OPT_PLACE, opt_cb },
	{ "phx-isolate", "MODE",
	  "[phalanx] GPU isolation: job (default: tasks see the job's GPUs), task (each task "
	  "only its own) or off (env PHX_ISOLATE)",
	  1, OPT_ISOLATE, opt_cb },
	{ "phx-explain", NULL,
	  "[phalanx] Print the rank map and binding at launch (env PHX_EXPLAIN=1)", 0, OPT_EXPLAIN,
	  opt_cb },
};

void phx_opts_defaults(const struct phx_conf *conf)
{
	phx_opts_free();
	phx_opts.place = conf->placement.mode;
	phx_opts.isolate = conf->isolation.mode;
}

int phx_opts_register(spank_t sp)
{
	for (size_t i = 0; i < sizeof(spank_opts) / sizeof(spank_opts[0]); i++) {
		spank_err_t rc = spank_option_register(sp, &spank_opts[i]);

		if (rc != ESPANK_SUCCESS) {
			phx_error("cannot register --%s: %s; check that no other plugin in "
				  "plugstack.conf defines it",
				  spank_opts[i].name, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

static const char *twin_value(spank_t sp, const char *name, char *buf, size_t len)
{
	/* In slurmstepd the job's environment is not ours: ask Slurm for it. */
	if (spank_remote(sp)) {
		if (spank_getenv(sp, name, buf, (int)len) != ESPANK_SUCCESS)
			return NULL;
		return buf;
	}
	return getenv(name);
}

int phx_opts_apply_env(spank_t sp)
{
	char buf[PHX_LAYOUT_MAX + 2];

	for (size_t i = 0; i < sizeof(opt_desc) / sizeof(opt_desc[0]); i++) {
		const char *val;

		if (opt_given[i])
			continue;
		val = twin_value(sp, opt_desc[i].env, buf, sizeof(buf));
		if (val && *val && opt_desc[i].set(val) < 0)
			return -1;
	}
	return 0;
}

void phx_opts_free(void)
{
	free(phx_opts.layout);
	memset(&phx_opts, 0, sizeof(phx_opts));
	memset(opt_given, 0, sizeof(opt_given));
}

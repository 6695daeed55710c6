/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spank_phalanx.so entry points. Each context (srun, sbatch/salloc,
 * slurmd, slurmstepd) only does its own part; see spank(7).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "common/conf.h"
#include "common/log.h"
#include "spank/options.h"

SPANK_PLUGIN(phalanx, 1);

static struct phx_conf site_conf;

static void slurm_sink(enum phx_log_level level, const char *line)
{
	switch (level) {
	case PHX_LOG_ERROR:
	case PHX_LOG_WARN:
		slurm_error("%s", line);
		break;
	case PHX_LOG_INFO:
		slurm_info("%s", line);
		break;
	default:
		slurm_debug("%s", line);
		break;
	}
}

static int load_site_conf(const char *path, bool given)
{
	char err[512];

	if (!given && access(path, F_OK) < 0 && errno == ENOENT)
		return phx_conf_defaults(&site_conf);
	if (phx_conf_load_file(path, &site_conf, err, sizeof(err)) < 0) {
		phx_error("%s; fix the file or the config= argument in plugstack.conf", err);
		return -1;
	}
	return 0;
}

/* plugstack.conf: required spank_phalanx.so [config=PATH] [place=M] [isolate=M] */
static int parse_args(int ac, char **av)
{
	const char *conf_path = PHX_CONF_DEFAULT_PATH;
	bool conf_given = false;
	int i;

	for (i = 0; i < ac; i++) {
		if (!strncmp(av[i], "config=", 7)) {
			conf_path = av[i] + 7;
			conf_given = true;
		}
	}
	if (load_site_conf(conf_path, conf_given) < 0)
		return -1;
	phx_log_set_level(site_conf.log_level);
	for (i = 0; i < ac; i++) {
		if (!strncmp(av[i], "config=", 7))
			continue;
		if (!strncmp(av[i], "place=", 6) &&
		    !phx_place_mode_parse(av[i] + 6, &site_conf.placement.mode))
			continue;
		if (!strncmp(av[i], "isolate=", 8) &&
		    !phx_isolate_mode_parse(av[i] + 8, &site_conf.isolation.mode))
			continue;
		phx_error("plugstack.conf argument '%s' is not known; use config=PATH, "
			  "place=topo|block|off or isolate=job|task|off",
			  av[i]);
		return -1;
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	phx_log_set_sink(slurm_sink);
	if (parse_args(ac, av) < 0)
		return -1;
	phx_opts_defaults(&site_conf);
	/* slurmd itself has no options; every other context does. */
	if (spank_context() == S_CTX_SLURMD)
		return 0;
	return phx_opts_register(sp);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_SLURMD || spank_context() == S_CTX_JOB_SCRIPT)
		return 0;
	return phx_opts_apply_env(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	phx_opts_free();
	phx_conf_free(&site_conf);
	return 0;
}

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
#include "spank/isolate.h"
#include "spank/job_token.h"
#include "spank/local.h"
#include "spank/options.h"
#include "spank/prolog.h"
#include "spank/rootcause.h"
#include "spank/rundirs.h"
#include "spank/step.h"
#include "spank/task.h"

SPANK_PLUGIN(phalanx, 1);

/*
 * Return values: Slurm fails the step on any nonzero return of a required
 * plugin's callback (since 23.11 also of user_init and task_post_fork, and
 * srun's local_user_init); only what must stop the step returns -1.
 */
#if HAVE_DECL_SLURM_SPANK_INIT_FAILURE_MODE
/* 25.05: init fails only when the site's configuration does not load: the node's fault. */
int slurm_spank_init_failure_mode = ESPANK_NODE_FAILURE;
#endif

static struct phx_conf site_conf;
/* slurmstepd: worked out in user_init, inherited by every forked task. */
static struct phx_step step;
/* slurmstepd: the step's directory for torch's error files. */
static struct phx_rootcause rootcause = { .lock_fd = -1 };

static void slurm_sink(enum phx_log_level level, const char *line)
{
	static const char error_prefix[] = "phalanx: error: ";

	switch (level) {
	case PHX_LOG_ERROR:
		/* Slurm says "error:" itself. */
		if (!strncmp(line, error_prefix, sizeof(error_prefix) - 1))
			line += sizeof(error_prefix) - 1;
		slurm_error("phalanx: %s", line);
		break;
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
	if (phx_opts_apply_env(sp) < 0)
		return -1;
	/* srun and sbatch refuse a bad spec before anything is queued. */
	if (!spank_remote(sp))
		return phx_local_check_spec(&phx_opts);
	return 0;
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	return phx_local_check_step(sp, &phx_opts);
}

/* What goes wrong here is reported and the tasks check again; never fail the step. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	phx_step_prepare(sp, &site_conf, &phx_opts, &step);
	/* Runs as the job's user here, so the directory is the user's. */
	if (step.active && !step.error[0])
		phx_rootcause_prepare(sp, &rootcause);
	return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	/* A task that cannot be fenced in does not start. */
	if (phx_isolate_task(sp, &site_conf, &phx_opts) < 0)
		return -1;
	return phx_job_token_set(sp, &site_conf);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	/* First: the binding below reads CUDA_VISIBLE_DEVICES. */
	if (phx_isolate_task_env(sp) < 0)
		return -1;
	/* In task isolation a task sees its own GPUs only; else all the step's on the node. */
	return phx_task_init(sp, &step, &phx_opts,
			     phx_opts.isolate == PHX_ISOLATE_TASK ? NULL : phx_isolate_node_cvd(),
			     &rootcause);
}

/* slurmstepd, as root, for each task forked and placed in Slurm's cgroups. */
int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	return phx_isolate_task_post_fork(sp, &site_conf, &phx_opts);
}

/* slurmstepd, as root, for each task that ends. */
int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	phx_isolate_task_exit(sp);
	phx_rootcause_task_exit(sp, &rootcause, &step);
	return 0;
}

/*
 * slurmd's prolog, as root: a node that fails a health check is drained.
 * Slurm (22.05) calls no slurm_spank_init before it in this context, so
 * the configuration is read here.
 */
int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	phx_log_set_sink(slurm_sink);
	phx_conf_free(&site_conf);
	if (parse_args(ac, av) < 0)
		return phx_prolog_bad_config();
	return phx_prolog_run(sp, &site_conf);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	phx_spank_sweep_rundirs(sp);
	phx_isolate_step_end();
	phx_rootcause_remove(sp, &rootcause);
	phx_step_free(&step);
	phx_opts_free();
	phx_conf_free(&site_conf);
	return 0;
}

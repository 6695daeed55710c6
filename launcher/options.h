/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-launch's options (options.c) and the driver's among them
 * (options_driver.c), and which mode the command line and the environment
 * ask for. Pure, so every rule is unit tested.
 */
#ifndef PHX_LAUNCHER_OPTIONS_H
#define PHX_LAUNCHER_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/conf.h"
#include "launcher/role.h"

/* The driver's options (parsed with the agent's, see options.c). */
/* --srun-arg options one driver takes. */
#define PHX_DRIVER_MAX_SRUN_ARGS 32

struct phx_driver_opts {
	int spares; /* nodes held back; -1: launcher.spares */
	bool elastic; /* shrink dp when too few nodes are left */
	int max_relaunches; /* -1: launcher.max_relaunches */
	int same_failure_limit; /* K; -1: launcher.same_failure_limit */
	int drain; /* --drain-bad-nodes: 1, --no-drain-bad-nodes: 0, -1: phalanx.yaml */
	const char *srun; /* NULL: "srun" */
	const char *srun_args[PHX_DRIVER_MAX_SRUN_ARGS]; /* --srun-arg, in order */
	size_t n_srun_args;
	int preflight; /* --preflight: 1, --no-preflight: 0, -1: launcher.preflight */
	const char *preflight_results; /* judge these recorded results instead of measuring */
	bool any; /* a driver option was given */
};

/* Driver options in getopt's table (values from 0x200 up, beside the agent's). */
enum {
	PHX_DOPT_SPARES = 0x200,
	PHX_DOPT_ELASTIC,
	PHX_DOPT_RELAUNCHES,
	PHX_DOPT_SAME,
	PHX_DOPT_DRAIN,
	PHX_DOPT_NO_DRAIN,
	PHX_DOPT_SRUN,
	PHX_DOPT_PREFLIGHT,
	PHX_DOPT_NO_PREFLIGHT,
	PHX_DOPT_PREFLIGHT_RESULTS,
	PHX_DOPT_SRUN_ARG,
};

/* The driver's entries of getopt's table (no terminator). */
#define PHX_DRIVER_NOPTS 11
extern const struct option phx_driver_long_opts[PHX_DRIVER_NOPTS];

/* One driver option; 0, or -1 with the reason in err. */
int phx_driver_parse_one(int c, const char *arg, struct phx_driver_opts *d, char *err,
			 size_t errlen);
void phx_driver_defaults(struct phx_driver_opts *d);
void phx_driver_usage(FILE *out);

/*
 * The agent's command line from the driver's: argv[0..argc) as given,
 * less the driver's own options, with --layout replaced by layout when
 * that is not NULL. The result points into argv (and at layout); free
 * only the array. NULL when out of memory.
 */
char **phx_driver_agent_args(int argc, char **argv, const char *layout, int *out_argc);

/*
 * Mode from the environment: 1 driver (in an allocation, outside a step),
 * 0 agent (--agent), -1 neither: err says how to run it.
 */
int phx_launch_mode(bool agent, const char *job_id, const char *step_id, char *err, size_t errlen);

struct phx_launch_opts {
	bool agent;
	unsigned nproc_per_node; /* 0: one per GPU of the step, at least 1 */
	const char *layout; /* NULL: "dp=*" */
	enum phx_place_mode place;
	int hang_timeout_s; /* -1: launcher.hang_timeout */
	int peer_timeout_ms; /* -1: launcher.peer_timeout_ms; 0: off */
	int max_restarts; /* -1: launcher.max_restarts */
	int term_timeout_s; /* TERM to KILL */
	int sync_ms; /* between agreement rounds */
	int evidence_timeout_s; /* per hang evidence tool */
	const char *log_dir; /* per-rank logs and error files; NULL: none */
	const char *run_id; /* NULL: JOBID.STEPID */
	const char *config; /* NULL: the default phalanx.yaml when present */
	int preempt_sig; /* 0: none */
	int preempt_grace_s; /* after the preemption signal, until workers are stopped */
	int straggler_pct; /* slower than the median by; -1: launcher.straggler_threshold; 0: off */
	int straggler_window_s; /* -1: launcher.straggler_window */
	int straggler_min_steps; /* -1: launcher.straggler_min_steps */
	const char *slow_nodes; /* host list placement keeps off the critical path; NULL */
	const char *stand_ins; /* LOST=SPARE,...: spares placed as the nodes they replace; NULL */
	const char *step_role; /* --step-role: this step runs that role alone (the driver's) */
	/* The job's checkpoint settings over the site's; NULL: phalanx.yaml's. */
	const char *ckpt_dir, *save_interval, *keep;
	int log_time; /* -1: launcher.log_time */
	bool startup_times; /* log when each start-up phase ended */
	struct phx_role roles[PHX_ROLE_MAX]; /* --role, else one role "default" */
	size_t nroles;
	bool explicit_roles; /* --role was given */
	char **argv; /* the worker command; may be empty when every role has cmd= */
	int argc;
	struct phx_driver_opts driver; /* driver mode only */
};

/* Frees what the options hold (the roles' commands). */
void phx_launch_opts_free(struct phx_launch_opts *o);

/* 0: run; 1: --help or --version was asked (printed to out); -1: err says why. */
int phx_launch_parse(int argc, char **argv, struct phx_launch_opts *o, char *err, size_t errlen);
void phx_launch_usage(FILE *out);
/* Fills what the options left to phalanx.yaml. */
void phx_launch_apply_conf(struct phx_launch_opts *o, const struct phx_conf *conf);
/*
 * Sets the job's own checkpoint settings over the site's: --ckpt-dir
 * (checkpoint.shared_dir), --save-interval (checkpoint.interval), --keep
 * (checkpoint.keep), checked as in phalanx.yaml. 0 or -1 with err.
 */
int phx_launch_override_conf(const struct phx_launch_opts *o, struct phx_conf *conf, char *err,
			     size_t errlen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node health checks, run as root once per node and job by the job prolog
 * (spank/prolog.c) and by hand with 'phalanx health'. Each check reads the
 * hardware through an injected root (health.sysfs_root, health.dev_root),
 * so tests can feed it broken fake hardware, and gives one result: passed,
 * failed with a reason and a hint, or skipped (not configured, no such
 * hardware, nothing to check).
 *
 * Running as root on a node that users share, the checks never write a
 * file, never create a directory and never follow a symlink that a user
 * owns. A path a user could have tampered with is reported as "not
 * checked", never as a failure: no user can drain a node on purpose.
 * The NVML and free-space checks run in a child process bounded by
 * health.timeout, so a hung file system or a crashing driver library
 * costs the check, never the caller (slurmstepd).
 */
#ifndef PHX_HEALTH_H
#define PHX_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/conf.h"

#define PHX_HEALTH_MAX_CHECKS 8
#define PHX_HEALTH_TEXT 256
/* GPU indices 0 .. PHX_HEALTH_MAX_GPUS - 1, as health.gpu_count allows. */
#define PHX_HEALTH_MAX_GPUS 1024

enum phx_health_status { PHX_HEALTH_PASS, PHX_HEALTH_FAIL, PHX_HEALTH_SKIP };

struct phx_health_result {
	char name[16]; /* "gpu", "nvml", "ib", "disk", "command" */
	enum phx_health_status status;
	char reason[PHX_HEALTH_TEXT]; /* what was found, also when it passed */
	char hint[PHX_HEALTH_TEXT]; /* what to do about it; "" unless failed */
};

struct phx_health_report {
	struct phx_health_result results[PHX_HEALTH_MAX_CHECKS];
	size_t n;
	size_t failed;
};

struct phx_health_ctx {
	const char *node; /* %n in the roots, SLURMD_NODENAME of the command */
	const char *job_gpus; /* SLURM_JOB_GPUS, e.g. "0,1,3"; NULL or "" = none */
	bool all_gpus; /* no job: NVML checks every GPU it sees */
	uint32_t job_id; /* 0 = no job: paths with %j are not checked */
	uid_t uid; /* the job's user, for %u in paths */
	bool have_uid; /* false: paths with %u are not checked */
	const char *nvml_lib; /* NULL = libnvidia-ml.so.1; tests load a fake */
};

/* Runs every check into rep; returns how many failed. */
size_t phx_health_run(const struct phx_conf *conf, const struct phx_health_ctx *ctx,
		      struct phx_health_report *rep);
/* The result of the check called name, or NULL. */
const struct phx_health_result *phx_health_find(const struct phx_health_report *rep,
						const char *name);
const char *phx_health_status_name(enum phx_health_status status);

/*
 * Expands a health.paths pattern: %u the job's uid, %j its job id, %n the
 * node name, %% a percent sign. Returns 0, -ENOENT when the pattern needs
 * a value ctx does not have, -EINVAL for a bad escape or an unsafe node
 * name, -ENAMETOOLONG when out is too small.
 */
int phx_health_expand(const char *pattern, const struct phx_health_ctx *ctx, char *out, size_t len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's own state and its srun steps, shared by its files:
 * driver_nodes.c (the allocation's nodes as Slurm sees them),
 * driver_srun.c (starting, watching and stopping steps), driver_requeue.c
 * (requeueing the job), driver.c (one step for the whole job) and
 * driver_steps.c (a step per role).
 */
#ifndef PHX_LAUNCHER_DRIVER_DRIVER_INT_H
#define PHX_LAUNCHER_DRIVER_DRIVER_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <slurm/slurm.h>

#include "common/clock.h"
#include "common/hostlist.h"
#include "launcher/liveness.h"
#include "launcher/output.h"
#include "launcher/result.h"
#include "launcher/driver/driver_plan.h"

struct driver {
	struct phx_launch_opts *o;
	int argc; /* the driver's arguments, without argv[0] */
	char **argv;
	uint32_t job_id;
	struct phx_hostnames alloc;
	struct phx_drv_state st;
	bool drain;
	const char *srun;
	const char *const *srun_args; /* the user's, for each step's srun */
	size_t n_srun_args;
	char self[PATH_MAX];
	int sig_fd;
	int stop_sig;
	int preempt_sig; /* --preempt-signal: forwarded to the agents' step */
	bool preempted; /* it came */
	const struct phx_conf *conf;
	bool preflight;
	const char *pf_results; /* NULL: measure live */
	bool *trusted; /* [alloc]: passed the check since it last joined a step */
	bool *slow; /* [alloc]: the check found it slow */
	bool *suspect; /* [alloc]: Slurm has it NOT_RESPONDING, not (yet) DOWN */
	bool *unconfirmed; /* [alloc]: bad by its agent's silence alone, Slurm not told yet */
	bool *drained; /* [alloc]: bad, and drained by the driver (--drain-bad-nodes) */
	size_t *prev; /* the nodes of the last step */
	size_t nprev;
	size_t *last; /* the nodes of the last step started, in order */
	size_t nlast;
	size_t *placed_as; /* [alloc]: the node whose place in the placement it takes */
	node_info_msg_t *nodes; /* the last node table, for update-time caching */
	struct phx_drv_ckptd *ckptd; /* NULL: no phalanx-ckptd configured */
	struct phx_drv_lost *lost; /* the agents' lost-node reports; NULL: stderr only */
	const char *lost_env; /* role steps: one report key for all their steps */
	struct phx_drv_xrdv *xrdv; /* role steps: the cross-role rendezvous */
	uint64_t *alive_ms; /* [alloc], role steps: a lone agent's last beat; 0: none yet */
	enum phx_beat *alive_state; /* [alloc]: what it said */
	struct phx_drv_ledger *ledger; /* role steps: the roles' goodput */
};

/* One attempt: srun and what it said. */
struct step {
	size_t *idx; /* allocation indices of its nodes */
	size_t n;
	pid_t pid;
	int err_fd;
	struct phx_linebuf lb;
	struct phx_result result;
	bool have_result;
	char vanished[256]; /* a node whose agent was killed, "" */
	unsigned new_bad;
	bool killed; /* by the driver, for a bad node */
	bool ended; /* srun exited: status holds its exit */
	bool lost; /* srun reported an agent killed or a node failure */
	bool silent; /* ... or an agent reported the vanished node's agent silent */
	bool launch_failed; /* srun said the step's launch failed */
	bool stop; /* a node of it is gone: the step must end */
	uint64_t kill_at; /* killed: srun too, if it still runs then */
	int status;
	/* A role's step (driver_steps.c); role NULL: every role in one step. */
	const char *role;
	unsigned long epoch, role_epoch; /* the job's and the role's, at its start */
};

static inline uint64_t phx_drv_now_ms(void)
{
	return phx_now_ns(CLOCK_MONOTONIC) / 1000000u;
}

/* driver_nodes.c */
long phx_drv_alloc_index(const struct driver *dr, const char *name);
void phx_drv_node_bad(struct driver *dr, struct step *s, size_t i, const char *reason,
		      const char *failed_check);
bool phx_drv_check_nodes(struct driver *dr, struct step **steps, size_t nsteps);
/* Nodes the driver drained that an admin resumed while the job holds them: good again; how many. */
size_t phx_drv_repaired(struct driver *dr, size_t *idx);
uint64_t phx_drv_verdict_wait_ms(void);
void phx_drv_settle_suspects(struct driver *dr);
size_t phx_drv_pick_healthy(struct driver *dr, size_t *idx);
char *phx_drv_node_list(const struct driver *dr, const size_t *idx, size_t n);
char *phx_drv_flagged_list(const struct driver *dr, const bool *flag, const size_t *idx, size_t n);
/* The preflight check of a step's nodes not trusted yet; -1: stop the job. */
int phx_drv_preflight(struct driver *dr, const size_t *next, size_t nnext, bool first);

/* driver_srun.c */
int phx_drv_step_start(struct driver *dr, struct step *s);
void phx_drv_step_kill(struct driver *dr, struct step *s, const char *why);
void phx_drv_step_report(struct driver *dr, struct step *s);
/* Until one of the steps ends (returned), or until_ms (0: no limit) passes (NULL). */
struct step *phx_drv_steps_watch(struct driver *dr, struct step **steps, size_t n,
				 uint64_t until_ms);

/* driver_requeue.c */
int phx_drv_requeue(struct driver *dr, const char *why);
int phx_drv_finish(struct driver *dr, const struct phx_drv_decision *d);

/* driver_steps.c: the job's roles each in a step of its own; the exit code. */
int phx_drv_steps_run(struct driver *dr);

#endif

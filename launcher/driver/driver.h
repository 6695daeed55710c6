/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-launch driver mode: in the batch script, it runs the agents'
 * step with srun, watches it, and relaunches it on the allocation's
 * healthy nodes when it fails for a node reason. The decisions (which
 * nodes, what after a failure, is it the same failure again) and the
 * agents' result line are pure and unit tested; driver.c does the
 * processes and libslurm.
 */
#ifndef PHX_LAUNCH_DRIVER_H
#define PHX_LAUNCH_DRIVER_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct phx_launch_opts;
struct phx_conf;
/* Driver mode: the exit code of phalanx-launch. argv: its whole command line. */
int phx_driver_main(struct phx_launch_opts *o, const struct phx_conf *conf, int argc, char **argv);

/* The driver's options (parsed with the agent's, see options.c). */
struct phx_driver_opts {
	int spares; /* nodes held back; -1: launcher.spares */
	bool elastic; /* shrink dp when too few nodes are left */
	int max_relaunches; /* -1: launcher.max_relaunches */
	int same_failure_limit; /* K; -1: launcher.same_failure_limit */
	int drain; /* --drain-bad-nodes: 1, --no-drain-bad-nodes: 0, -1: phalanx.yaml */
	const char *srun; /* NULL: "srun" */
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
};

/* The driver's entries of getopt's table (no terminator). */
#define PHX_DRIVER_NOPTS 10
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

/* ------------------------------------------------------------ result line */

/*
 * The line an agent prints on stderr when its workers gave up, so the
 * driver (reading srun's stderr) learns the root cause:
 *   phalanx: result 1 workers-failed rank=R node=N kind=K code=C step=S
 *   restarts=E msg=TEXT
 * all on one line; N and TEXT are percent-encoded (no spaces, no '%', no
 * control bytes, at most PHX_RESULT_MSG_MAX bytes of message).
 */
#define PHX_RESULT_PREFIX "phalanx: result "
#define PHX_RESULT_MSG_MAX 512

struct phx_result {
	long rank; /* global rank of the root cause, -1 */
	char node[256];
	int kind; /* enum phx_fail_kind */
	int code;
	uint64_t step; /* last step the rank reported; 0: none */
	unsigned restarts; /* in-step restarts that were made */
	char msg[PHX_RESULT_MSG_MAX + 1]; /* first line of the exception, "" */
};

/* The whole line with a newline; returns snprintf's value. */
int phx_result_format(const struct phx_result *r, char *buf, size_t len);
/* A line (without or with its newline); 0, or -1 when it is not a result line. */
int phx_result_parse(const char *line, size_t len, struct phx_result *r);

/*
 * srun's reports: 1 "Node failure on NODE", 2 the agent on NODE was
 * killed by a signal (node gets the names of these two), 3 the step's
 * launch failed, 0 any other line.
 */
int phx_srun_line_parse(const char *line, size_t len, char *node, size_t nodelen);

/* ------------------------------------------------------------ decisions */

enum phx_drv_action {
	PHX_DRV_DONE = 0, /* the step succeeded */
	PHX_DRV_RELAUNCH, /* run the step again on d->nodes nodes */
	PHX_DRV_REPEATED, /* the same failure K times: stop */
	PHX_DRV_REQUEUE, /* too few healthy nodes */
	PHX_DRV_STOP, /* give up with the step's exit code */
};

#define PHX_DRV_SIG_MAX (PHX_RESULT_MSG_MAX + 64)

/* What the driver carries from one attempt to the next. */
struct phx_drv_state {
	size_t nalloc; /* nodes of the allocation */
	bool *bad; /* [nalloc]: excluded for the rest of the job */
	unsigned want; /* nodes a step runs on */
	unsigned nproc; /* workers per node, for --elastic */
	const char *layout; /* the user's layout spec; NULL: dp=* */
	char layout_now[256]; /* the spec the agents get now; "" = the user's */
	bool elastic;
	unsigned relaunches, max_relaunches;
	unsigned same_limit; /* K */
	char last_sig[PHX_DRV_SIG_MAX];
	unsigned same_count;
};

/* How one step ended, as seen by the driver. */
struct phx_drv_outcome {
	int status; /* srun's exit code; 128+N when killed by signal N */
	unsigned new_bad; /* nodes marked bad in state.bad during this step */
	bool stopped; /* the driver was told to stop (TERM, INT) */
	const struct phx_result *result; /* the agents' result line, NULL */
};

struct phx_drv_decision {
	enum phx_drv_action action;
	int exit_code; /* for REPEATED, REQUEUE, STOP */
	unsigned nodes; /* for RELAUNCH: nodes of the next step */
	char why[1024];
};

/*
 * The first `want` nodes of the allocation that are not bad, in
 * allocation order, their indices in idx[]. Returns how many there were
 * (less than want when too few are healthy).
 */
size_t phx_drv_pick(const bool *bad, size_t n, unsigned want, size_t *idx);
size_t phx_drv_healthy(const bool *bad, size_t n);

/* "MESSAGE @ step S": what makes two failures the same. */
void phx_drv_signature(const struct phx_result *r, char *buf, size_t len);

/*
 * The largest node count m <= healthy for which the layout resolves with
 * m * nproc ranks when only dp changes; its spec into buf. 0: none does
 * (or the layout's '*' is not dp), err says why.
 */
unsigned phx_drv_elastic(const char *layout, unsigned healthy, unsigned nproc, char *buf,
			 size_t len, char *err, size_t errlen);

/* Whether a step on the healthy nodes can start (RELAUNCH) or the job must shrink or requeue. */
void phx_drv_fit(struct phx_drv_state *s, struct phx_drv_decision *d);

/* What to do after a step ended; updates s (counters, want, layout_now). */
void phx_drv_decide(struct phx_drv_state *s, const struct phx_drv_outcome *o,
		    struct phx_drv_decision *d);

/* ------------------------------------------------------------ preflight */

struct phx_check_verdict;

/*
 * The nodes to check before a step: healthy ones not trusted yet, in
 * allocation order, into idx. A node is trusted once it passed a check;
 * prev[0..nprev) are the nodes of the step before (NULL, 0: none), and a
 * node of next[0..nnext) that was not in it (a spare brought in) is
 * trusted again only after another check.
 */
size_t phx_drv_to_check(const bool *bad, bool *trusted, size_t n, const size_t *prev, size_t nprev,
			const size_t *next, size_t nnext, size_t *idx);

/*
 * The verdict of each of hosts[0..n) out of all[0..nall) (by node name)
 * into out; a host without one is FAILED, "no result for it in SOURCE":
 * a node is never passed without a measurement.
 */
void phx_drv_verdicts_for(const struct phx_check_verdict *all, size_t nall, char *const *hosts,
			  size_t n, const char *source, struct phx_check_verdict *out);

/*
 * The preemption signal reached the driver: whether the step ended
 * because the agents were preempted (they exit PHX_EXIT_REQUEUE), so the
 * job is requeued rather than relaunched.
 */
bool phx_drv_preempted(bool signalled, int status);

struct phx_conf;
/*
 * The check of hosts[0..n): verdicts into out[0..n), judged from the
 * results recorded in results, or measured live when it is NULL. -1 (err
 * says why) when there is no verdict at all.
 */
int phx_drv_preflight_run(const struct phx_conf *conf, const char *results, char *const *hosts,
			  size_t n, struct phx_check_verdict *out, char *err, size_t errlen);

#endif

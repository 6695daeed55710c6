/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-launch agent mode: one agent per node of a step, wired up over
 * PMIx, each starting and watching its node's workers. See
 * phalanx-launch(1) for the user's view. The pure parts (options, worker
 * environment, restart decisions, output lines, error files) are kept free
 * of system state so they are unit tested.
 */
#ifndef PHX_LAUNCH_AGENT_H
#define PHX_LAUNCH_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/conf.h"
#include "placement/rankmap.h"
#include "placement/topo.h"
#include "placement/torchenv.h"
#include "launcher/driver/driver.h"

/* Exit codes of phalanx-launch; see phalanx-launch(1). */
enum phx_launch_exit {
	PHX_EXIT_OK = 0,
	PHX_EXIT_WORKERS = 1, /* workers failed and no restart was left */
	PHX_EXIT_USAGE = 2, /* bad options or configuration */
	PHX_EXIT_PMIX = 3, /* PMIx wire-up or agreement failed */
	PHX_EXIT_SETUP = 4, /* placement, environment or spawning failed */
	PHX_EXIT_REPEATED = 5, /* driver: the same worker failure K times, a user error */
	PHX_EXIT_NO_NODES = 6, /* driver: too few usable nodes left for a requeue to run */
	/*
	 * Requeue the job (EX_TEMPFAIL; slurm.conf RequeueExit=75): the driver
	 * found too few healthy nodes, or the agents were preempted and their
	 * workers have saved.
	 */
	PHX_EXIT_REQUEUE = 75,
};

/* ------------------------------------------------------------ roles */

#define PHX_ROLE_MAX 16
#define PHX_ROLE_NAME_MAX 32
#define PHX_ROLE_LAYOUT_MAX 128

enum phx_restart_policy {
	PHX_RESTART_GROUP = 0, /* the role's workers restart together */
	PHX_RESTART_SELF, /* only the failed worker restarts */
};

/*
 * One role of an MPMD job (--role NAME[:FIELD]...): its own command,
 * layout, nodes and restart policy. Roles take the step's nodes in Slurm's
 * order, in the order they were given; global ranks follow the same order.
 */
struct phx_role {
	char name[PHX_ROLE_NAME_MAX];
	char layout[PHX_ROLE_LAYOUT_MAX]; /* "": --layout, else dp=* */
	unsigned nodes; /* 0: the nodes the other roles leave */
	unsigned nproc; /* 0: --nproc-per-node */
	enum phx_restart_policy restart;
	int max_restarts; /* -1: --max-restarts */
	char *cmd; /* run with /bin/sh -c; NULL: the command after -- */
	/* Resolved for a step by phx_roles_assign(): */
	unsigned first_node; /* agent rank of its first node */
};

/* "trainer:tp=8,pp=2:nodes=6", "rollout:nodes=2:restart=self:cmd=python r.py". 0 or -1. */
int phx_role_parse(const char *spec, struct phx_role *r, char *err, size_t errlen);
void phx_role_free(struct phx_role *r);
/* Gives each role its nodes among nagents agents (nodes=0: the rest). 0 or -1. */
int phx_roles_assign(struct phx_role *roles, size_t n, unsigned nagents, char *err, size_t errlen);
/* The role an agent runs, after phx_roles_assign(). */
unsigned phx_role_of_agent(const struct phx_role *roles, size_t n, unsigned agent);
const char *phx_restart_policy_name(enum phx_restart_policy p);

#define PHX_ROLE_ARGV_MAX 256
/*
 * The argv of a role's cmd=: its words when it is a plain command line, so
 * the worker is the program itself (its exit status and signals are its
 * own), else /bin/sh -c CMD. *buf holds the words; free it. 0 or -1.
 */
int phx_role_argv(const char *cmd, char **buf, char *argv[PHX_ROLE_ARGV_MAX + 1]);

/* ------------------------------------------------------------ options */

struct phx_launch_opts {
	bool agent;
	unsigned nproc_per_node; /* 0: one per GPU of the step, at least 1 */
	const char *layout; /* NULL: "dp=*" */
	enum phx_place_mode place;
	int hang_timeout_s; /* -1: launcher.hang_timeout */
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

/* ------------------------------------------------------------ environment */

/* An environment block under construction: "NAME=VALUE" strings, NULL-terminated. */
struct phx_envv {
	char **v;
	size_t n, cap;
};

/* A copy of env without the agent's own PMIx variables. 0 or -1. */
int phx_envv_from(struct phx_envv *e, char *const *env);
int phx_envv_get(void *ctx, const char *name, char *buf, size_t len);
int phx_envv_set(void *ctx, const char *name, const char *value, int overwrite);
const char *phx_envv_value(const struct phx_envv *e, const char *name);
void phx_envv_free(struct phx_envv *e);

/* GPUs in a CUDA_VISIBLE_DEVICES value (NULL, "" and "NoDevFiles": 0). */
unsigned phx_cuda_count(const char *cvd);

/* What every worker of one node and epoch shares. */
struct phx_worker_ctx {
	const struct phx_rankmap *map;
	const struct phx_node_topo *topo; /* NULL: no binding beyond GPUs */
	const char *master_addr;
	unsigned master_port;
	unsigned restart_count, max_restarts;
	const char *run_id;
	const char *run_dir; /* error files go here */
	int hb_fd; /* the heartbeat page */
	pid_t agent_pid;
	const char *node;
	const cpu_set_t *cpus; /* the agent's CPUs, NULL: no CPU binding */
	const struct phx_role_env *role; /* map is this role's */
};

/* The error file of a rank in an epoch, into buf. */
void phx_worker_error_file(const struct phx_worker_ctx *c, unsigned long rank, char *buf,
			   size_t len);
/* The full environment of local slot `slot`; b receives the binding. 0 or -1. */
int phx_worker_env(struct phx_envv *env, const struct phx_worker_ctx *c, unsigned slot,
		   struct phx_binding *b);

/* ------------------------------------------------------------ restart protocol */

enum phx_node_state {
	PHX_NODE_RUNNING = 0,
	PHX_NODE_DONE, /* every local worker exited 0 */
	PHX_NODE_FAILED, /* a local worker failed or hung */
	PHX_NODE_SHUTDOWN, /* the agent was told to stop (TERM, INT) */
	PHX_NODE_PREEMPTING, /* asked to save (the preemption signal); workers still run */
	PHX_NODE_PREEMPTED, /* after the preemption signal its workers are gone */
};

enum phx_fail_kind { PHX_FAIL_NONE = 0, PHX_FAIL_EXIT, PHX_FAIL_SIGNAL, PHX_FAIL_HANG };

/* One agent's state in one agreement round. */
struct phx_report {
	unsigned role; /* index of the role the agent runs */
	/* group roles: restart count of the role; self roles: of the failed worker */
	unsigned epoch;
	enum phx_node_state state;
	uint64_t fail_ns; /* CLOCK_REALTIME of its first failure (hang: the last beat) */
	long fail_rank; /* global rank, -1 */
	enum phx_fail_kind kind;
	int code; /* exit status or signal */
	/*
	 * A hang of a worker that sleeps, likely waiting in a collective for
	 * the real culprit: ordered after every other failure.
	 */
	bool waiting;
	/* Offset of the step rates in the parsed string (phx_rates_parse), 0: none. */
	size_t rates_at;
};

enum phx_action {
	PHX_ACT_CONTINUE = 0,
	PHX_ACT_RESTART,
	PHX_ACT_GIVE_UP,
	PHX_ACT_SUCCESS,
	PHX_ACT_SHUTDOWN,
	PHX_ACT_PREEMPTED, /* every node's workers are gone after the preemption signal */
};

/* What every agent knows of a role: the same on all agents. */
struct phx_role_state {
	enum phx_restart_policy policy;
	unsigned epoch; /* group roles: restarts so far */
	unsigned max_restarts;
};

struct phx_decision {
	enum phx_action action;
	long first; /* index of the report with the root cause, -1 */
	/* Per role: CONTINUE, RESTART or GIVE_UP, and the report of its first failure. */
	enum phx_action role_action[PHX_ROLE_MAX];
	long role_first[PHX_ROLE_MAX];
	bool barrier; /* a group role restarts: every agent joins one barrier fence */
	bool preempt; /* an agent got the preemption signal: every agent saves and stops */
};

/*
 * The decision of a round from every agent's report (index = agent rank)
 * and the roles' states. Every agent gets the same reports from the fence
 * and so the same answer. A report of a group role in another epoch counts
 * as running: a late failure of workers that were already being stopped
 * cannot cause a second restart. A role that restarts does so alone: the
 * workers of the other roles keep running. A self role restarts the failed
 * workers only, each up to its max_restarts. Any role out of restarts ends
 * the job; so does a shutdown; the preemption signal suspends restarts.
 */
void phx_restart_decide(const struct phx_report *r, size_t n, const struct phx_role_state *roles,
			size_t nroles, struct phx_decision *d);
/*
 * "2 ROLE EPOCH STATE FAIL_NS RANK KIND CODE WAITING" and, when rates is
 * not NULL, " | " and the step rates; returns snprintf's value.
 */
int phx_report_format(const struct phx_report *r, const char *rates, char *buf, size_t len);
/* 0, or -1 when s is not a version 2 report; nroles bounds the role index. */
int phx_report_parse(const char *s, size_t nroles, struct phx_report *r);
const char *phx_fail_describe(const struct phx_report *r, char *buf, size_t len);

/* ------------------------------------------------------------ stragglers */

/* One worker's mean step time over the straggler window. */
struct phx_rate {
	unsigned long rank; /* global */
	unsigned role;
	unsigned agent; /* whose report it came in */
	uint64_t step_ns;
	uint64_t steps; /* in the window */
};

/* Appends "RANK:STEP_US:STEPS" to buf at *off (space separated); 0, or -1 when full. */
int phx_rate_format(const struct phx_rate *r, char *buf, size_t len, size_t *off);
/*
 * The rates of one report (the text at rates_at), appended to out[*n]
 * (at most cap entries in all) with role and agent set. 0, or -1 when the
 * text is not rates, a rank is out of [0, world) or out is full.
 */
int phx_rates_parse(const char *s, unsigned role, unsigned agent, unsigned long world,
		    struct phx_rate *out, size_t cap, size_t *n);
/*
 * Marks in slow[i] each rate whose step time is at least pct percent
 * above the median (the lower one) of its role's rates, when the role has
 * at least two rates (pct 0: none is); median[i] and peers[i] receive that
 * median and the number of rates of the role. Roles are below PHX_ROLE_MAX.
 * The number marked.
 */
size_t phx_straggler_detect(const struct phx_rate *r, size_t n, unsigned pct, uint64_t *median,
			    unsigned *peers, bool *slow);

/* ------------------------------------------------------------ output */

#define PHX_LINE_MAX 8192

/* Splits a pipe's bytes into lines; a longer line is cut at PHX_LINE_MAX. */
struct phx_linebuf {
	char buf[PHX_LINE_MAX];
	size_t len;
};

typedef void (*phx_line_fn)(void *arg, const char *line, size_t len);
void phx_linebuf_feed(struct phx_linebuf *lb, const char *data, size_t n, phx_line_fn fn,
		      void *arg);
/* The unfinished last line at end of file. */
void phx_linebuf_flush(struct phx_linebuf *lb, phx_line_fn fn, void *arg);

/*
 * The root cause from a TORCHELASTIC_ERROR_FILE (torch's @record JSON):
 * message and traceback. Text that is not that JSON is taken as the
 * message. 0, or -1 when there is nothing in it.
 */
int phx_errfile_parse(const char *text, char *msg, size_t msglen, char *trace, size_t tracelen);

/*
 * The message is a collective's error for a peer that went away (gloo's
 * "Connection closed by peer", NCCL's "remote process exited"): a
 * failure that follows another's, not a root cause.
 */
bool phx_errfile_peer_lost(const char *msg);

/*
 * Reads and parses a rank's error file of one epoch (restart): path gets
 * its name, msg and trace what phx_errfile_parse() finds. 0, or -1 when
 * the file is missing, larger than 4 MiB or says nothing.
 */
int phx_worker_error_read(const char *run_dir, unsigned restart, unsigned long rank, char *path,
			  size_t pathlen, char *msg, size_t msglen, char *trace, size_t tracelen);

#endif

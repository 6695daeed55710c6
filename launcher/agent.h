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
#include "common/rankmap.h"
#include "common/topo.h"
#include "common/torchenv.h"
#include "launcher/driver.h"

/* Exit codes of phalanx-launch; see phalanx-launch(1). */
enum phx_launch_exit {
	PHX_EXIT_OK = 0,
	PHX_EXIT_WORKERS = 1, /* workers failed and no restart was left */
	PHX_EXIT_USAGE = 2, /* bad options or configuration */
	PHX_EXIT_PMIX = 3, /* PMIx wire-up or agreement failed */
	PHX_EXIT_SETUP = 4, /* placement, environment or spawning failed */
};

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
	char **argv; /* the worker command */
	int argc;
	struct phx_driver_opts driver; /* driver mode only */
};

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
};

enum phx_fail_kind { PHX_FAIL_NONE = 0, PHX_FAIL_EXIT, PHX_FAIL_SIGNAL, PHX_FAIL_HANG };

/* One agent's state in one agreement round. */
struct phx_report {
	unsigned epoch; /* restart count of its workers */
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
};

enum phx_action {
	PHX_ACT_CONTINUE = 0,
	PHX_ACT_RESTART,
	PHX_ACT_GIVE_UP,
	PHX_ACT_SUCCESS,
	PHX_ACT_SHUTDOWN,
};

struct phx_decision {
	enum phx_action action;
	long first; /* index of the report with the root cause, -1 */
};

/*
 * The decision of a round from every agent's report (index = agent rank).
 * Every agent gets the same reports from the fence and so the same answer.
 * Reports of another epoch count as running: a late failure of workers
 * that were already being stopped cannot cause a second restart.
 */
void phx_restart_decide(const struct phx_report *r, size_t n, unsigned epoch, unsigned max_restarts,
			struct phx_decision *d);
/* "1 EPOCH STATE FAIL_NS RANK KIND CODE WAITING"; returns snprintf's value. */
int phx_report_format(const struct phx_report *r, char *buf, size_t len);
int phx_report_parse(const char *s, struct phx_report *r);
const char *phx_fail_describe(const struct phx_report *r, char *buf, size_t len);

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

#endif

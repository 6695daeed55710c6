/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The running agent: its state, shared by the agent's parts (each has its
 * own header), the main loop's round with the event sources the parts
 * register, and the supervision loop.
 */
#ifndef PHX_LAUNCHER_AGENT_AGENT_H
#define PHX_LAUNCHER_AGENT_AGENT_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/conf.h"
#include "placement/rankmap.h"
#include "placement/torchenv.h"
#include "launcher/output.h"
#include "launcher/restart.h"
#include "launcher/role.h"
#include "launcher/agent/agent_pmix.h"

struct phx_launch_opts;
struct phx_node_topo;
struct phx_rate;
struct phx_ckpt;
struct phx_agent_ckptd;
struct phx_xid_watch;
struct phx_agent_wake;

#define PHX_RATE_SAMPLES 64

struct phx_worker {
	unsigned slot;
	unsigned long rank;
	pid_t pid; /* also the process group; 0 before the first start */
	bool running; /* not reaped yet */
	/* Got SIGTERM already (forwarded): a stop does not send a second one,
	 * which many training scripts take as "exit now, skip the save". */
	bool term_sent;
	int status; /* waitpid's, once reaped */
	int out_fd, err_fd; /* -1 when closed */
	struct phx_linebuf out, err;
	int log_fd; /* -1 without --log-dir */
	uint64_t start_ns; /* CLOCK_MONOTONIC */
	bool failed_reported;
	unsigned restarts; /* of this worker: its TORCHELASTIC_RESTART_COUNT */
	bool failed; /* exited non-zero, died or hung, not restarted yet */
	uint64_t fail_ns; /* CLOCK_REALTIME of that */
	enum phx_fail_kind kind;
	int code;
	bool waiting;
	/* Heartbeat samples for the step time: (beat_ns, step), oldest first. */
	struct {
		uint64_t beat_ns, step;
	} samples[PHX_RATE_SAMPLES];
	unsigned nsamples;
	uint64_t wait_seen_ns; /* its slot's wait_ns counted so far (agent_wake.c) */
};

/*
 * A source of events for the agent's main loop: the checkpoint socket, the
 * phalanx-ckptd link, the Xid watch. Each registers itself at its setup
 * (phx_agent_pump_add), so the loop knows none of them by name; every
 * pump round polls each one's fd, lets it shorten the wait, and calls it
 * in the order they were added.
 */
struct phx_agent_source {
	/* The fd to poll and its events (-1: none now); NULL: the source has no fd. */
	int (*fd)(void *ctx, short *events);
	/* After the poll, with the fd's revents. */
	void (*handle)(void *ctx, short revents);
	/* The longest the poll may wait for it, in ms (-1: any); NULL: any. */
	int (*timeout_ms)(void *ctx);
	/* handle is called every round, also without revents (it has work on a clock). */
	bool every_round;
	void *ctx;
};

#define PHX_AGENT_SOURCES_MAX 8

/* The agent's start-up, in order: each phase's end is stamped (--startup-times). */
enum phx_startup_phase {
	PHX_UP_EXEC, /* the agent runs */
	PHX_UP_PMIX, /* PMIx_Init returned */
	PHX_UP_WIRED, /* every agent's facts are here (the wire-up fence) */
	PHX_UP_PLACED, /* this node's rank map is computed */
	PHX_UP_SPAWNED, /* this node's workers are started */
	PHX_UP_AGREED, /* the first agreement round ended: every node runs */
	PHX_UP_PHASES
};

struct phx_agent {
	struct phx_launch_opts *o;
	struct phx_conf conf;
	struct phx_pmix pmix;
	char node[256];
	struct phx_rankmap map;
	struct phx_node_topo *topo;
	char master_addr[256];
	unsigned master_agent; /* agent rank of the node with global rank 0 */
	unsigned master_port;
	unsigned nproc;
	char **hosts; /* [pmix.size]: node of each agent rank */
	char **addrs; /* [pmix.size]: its first IPv4 address (or the node name) */
	struct phx_worker *w; /* [nproc] */
	int hb_fd;
	void *hb;
	size_t hb_len;
	int sig_fd;
	char run_dir[4096];
	bool run_dir_owned; /* made here, removed at exit */
	int run_dir_lock; /* held while this agent lives: see common/rundir.h */
	char run_id[256];
	unsigned epoch;
	unsigned long rounds; /* agreement rounds so far */
	struct phx_report local; /* this agent's report in the current epoch */
	int shutdown_sig; /* TERM or INT received */
	bool stopping; /* workers are being stopped: their exits are not failures */
	cpu_set_t cpus;
	bool have_cpus;
	/* Roles: the one this agent runs, and what every agent knows of all. */
	unsigned role;
	char **argv; /* the role's command */
	char *cmd_argv[PHX_ROLE_ARGV_MAX + 1];
	char *cmd_buf;
	struct phx_role_env role_env;
	char job_master[256]; /* node of global rank 0 when another role runs there */
	char role_master_addr[256];
	unsigned role_master_agent;
	unsigned role_master_port;
	unsigned long world; /* ranks of all roles */
	unsigned long role_offset[PHX_ROLE_MAX], role_world[PHX_ROLE_MAX];
	struct phx_role_state roles[PHX_ROLE_MAX];
	/* Preemption: the signal came (to this agent), and when its workers are stopped. */
	bool preempt_signal;
	bool preempting;
	uint64_t preempt_deadline; /* CLOCK_MONOTONIC */
	/* Stragglers: every rank's rate in a round, and who was reported already. */
	struct phx_rate *rates;
	uint64_t *rate_median;
	unsigned *rate_peers;
	bool *rate_slow;
	bool *straggler_reported; /* [world] */
	struct phx_ckpt *ckpt; /* checkpoint staging, agent_ckpt.c */
	/* The checkpoint step the workers resume from (agent_ckpt.c, at start); 0: none. */
	uint64_t resumed_step;
	struct phx_agent_ckptd *ckptd; /* phalanx-ckptd client, agent_ckptd.c; NULL: none */
	struct phx_xid_watch *xid; /* the kernel log's Xid watch, agent_xid.c; NULL: none */
	struct phx_agent_xrdv *xrdv; /* a role's step: its rendezvous copy, agent_xrdv.c */
	struct phx_agent_wake *wake; /* the agents' wake-up, agent_wake.c; NULL: none */
	/* What the main loop polls besides signals and the workers' output. */
	struct phx_agent_source sources[PHX_AGENT_SOURCES_MAX];
	unsigned nsources;
	uint64_t up_ns[PHX_UP_PHASES]; /* CLOCK_REALTIME at the end of each phase */
};

/*
 * One poll round: output, signals, reaping, the registered sources;
 * timeout_ms may be 0. extra_fd: also watched.
 */
int phx_agent_pump(struct phx_agent *a, int timeout_ms, int extra_fd, bool *extra_ready);
/* Adds a source (copied) to every pump round from now on; 0, or -1 when the table is full. */
int phx_agent_pump_add(struct phx_agent *a, const struct phx_agent_source *s);

/* The supervision loop with the agreement rounds. The exit code. */
int phx_agent_supervise(struct phx_agent *a);

#endif

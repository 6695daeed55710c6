/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents' result line (result.c), printed by an agent, read by the
 * driver from srun's stderr, and srun's own lines the driver looks for.
 * Pure; the parsers take any bytes (they are fuzzed).
 */
#ifndef PHX_LAUNCHER_RESULT_H
#define PHX_LAUNCHER_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/liveness.h"

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

/*
 * The line an agent prints when an agent it watches stopped beating
 * (launcher/liveness.h):
 *   phalanx: lost NODE: no beat from its agent for MS ms (watched from BY) ...
 * NODE and BY are host names as Slurm gives them.
 */
#define PHX_LOST_PREFIX "phalanx: lost "
/* The whole line with a newline; returns snprintf's value. */
int phx_lost_format(const char *node, unsigned long ms, const char *by, char *buf, size_t len);
/* A line (without or with its newline): 0 and the lost node, or -1. */
int phx_lost_parse(const char *line, size_t len, char *node, size_t nodelen);

/*
 * The same report sent straight to the driver in one UDP datagram, so it
 * does not queue behind the workers' output in srun's: "KEY LINE", KEY
 * the step's report key (PHX_LOST_KEY_HEX hex digits, from the driver).
 */
#define PHX_LOST_KEY_HEX 32
/* Where the agents send it: "ADDR:PORT:KEY" in their environment, from the driver. */
#define PHX_LOST_ENV "PHALANX_LOST_REPORT"
#define PHX_LOST_REPORT_MAX 1024
/* A datagram: 0 and the lost node when it carries key and a lost line, or -1. */
int phx_lost_report_parse(const char *d, size_t n, const char *key, char *node, size_t nodelen);

/*
 * An agent alone in its step (an elastic pool's node, a one-node role) has
 * no peer to watch it: it beats to the driver instead, in the same kind of
 * datagram, every --peer-timeout-ms / PHX_LIVENESS_BEATS:
 *   KEY phalanx: alive NODE steady|settling|end
 */
#define PHX_ALIVE_PREFIX "phalanx: alive "
/* The line, without key or newline; returns snprintf's value. */
int phx_alive_format(const char *node, enum phx_beat state, char *buf, size_t len);
/* A datagram: 0, the node and its state when it carries key and a beat, or -1. */
int phx_alive_report_parse(const char *d, size_t n, const char *key, char *node, size_t nodelen,
			   enum phx_beat *state);

/*
 * Every agent of a role's step tells the driver how its workers progress,
 * for the role's goodput ledger, with its beats (at most once a second):
 *   KEY phalanx: progress NODE STEP WAIT_MS RESUMED
 * STEP: the lowest step its running workers reported, "-" before any did;
 * WAIT_MS: the time its workers said they waited on another role
 * (phx_wait_begin(3)), summed over them since the agent started;
 * RESUMED: the saved step its workers resumed from, "-" when none.
 */
#define PHX_PROGRESS_PREFIX "phalanx: progress "
struct phx_progress {
	bool stepped; /* a worker reported a step: step holds the lowest */
	uint64_t step;
	uint64_t wait_ms;
	bool resumed; /* the workers restored a checkpoint: of step resumed_step */
	uint64_t resumed_step;
};
int phx_progress_format(const char *node, const struct phx_progress *p, char *buf, size_t len);
/* A datagram: 0, the node and its progress when it carries key and a report, or -1. */
int phx_progress_report_parse(const char *d, size_t n, const char *key, char *node, size_t nodelen,
			      struct phx_progress *p);

#endif

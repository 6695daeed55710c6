/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a role's GPU time went, in a job whose roles run in steps of their
 * own (phalanx-launch(1), "Roles in steps of their own"). The driver keeps
 * the ledger (launcher/driver/driver_ledger.c) and sends it to
 * phalanx-ckptd as an event of kind "role" whose reason is one record:
 *
 *   ROLE run=RUN ranks=N productive=MS waiting=MS restart=MS lost=MS
 *        detect=MS failures=N
 *
 * Every time is in rank-milliseconds (a rank is one GPU): a node the role
 * holds counts its ranks for each millisecond. productive: its workers
 * made progress; waiting: they said they waited on another role
 * (phx_wait_begin(3)); restart: from a launch to the workers' first
 * step, and while a lost node's role waits to run again; lost: steps
 * redone after a relaunch that resumed from a saved step; detect: from a
 * node's last sign of life to the driver's noticing its loss. RUN names
 * the driver's run: a requeued job's new driver starts a new one, and the
 * daemon adds the old run's totals to the new one's.
 *
 * The record is outside input to the daemon (a job's own driver, but any
 * user's): the parser takes only this grammar and bounded numbers.
 */
#ifndef PHX_ROLE_LEDGER_H
#define PHX_ROLE_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#define PHX_RL_NAME_MAX 31 /* a role's name: a letter, then letters, digits, _ and - */
#define PHX_RL_ROLES_MAX 16 /* roles a job's ledger holds */
#define PHX_RL_VALUE_MAX (1ull << 52) /* rank-ms: 142 years on a million GPUs */

enum phx_rl_part {
	PHX_RL_PRODUCTIVE,
	PHX_RL_WAITING,
	PHX_RL_RESTART,
	PHX_RL_LOST,
	PHX_RL_DETECT,
	PHX_RL_PARTS
};

struct phx_role_ledger {
	char name[PHX_RL_NAME_MAX + 1];
	uint64_t run;
	uint32_t ranks; /* the ranks the role holds now */
	uint32_t failures; /* node losses and worker failures */
	uint64_t part_ms[PHX_RL_PARTS];
};

/* A part's name in reports (phalanx goodput): "lost_work" and "detection" for lost and detect. */
const char *phx_rl_part_name(enum phx_rl_part p);
/*
 * The record; its length, or -1 when it does not fit len (any record fits
 * PHX_WIRE_REASON_MAX + 1). l is not checked: a name or value outside the
 * grammar gives a record phx_rl_parse refuses.
 */
int phx_rl_format(const struct phx_role_ledger *l, char *buf, size_t len);
/* 0, or -1 with a reason in err for anything but the grammar above. */
int phx_rl_parse(const char *text, struct phx_role_ledger *l, char *err, size_t errlen);

#endif

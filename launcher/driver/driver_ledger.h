/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The goodput ledger of a job whose roles run in steps of their own, by
 * role, in rank-milliseconds (checkpoint/proto/role_ledger.h names the
 * parts). Each node of the allocation is held by at most one role; a held
 * node counts its ranks as productive from the first step its workers
 * report after a launch, and as restart before that and while it waits
 * for its role's next step. The agents' progress reports move waits out
 * of productive time; a failure moves the time since the lost node's last
 * sign of life into detection, and the steps a relaunch redoes into
 * lost_work. Pure: every call takes the time, so tests drive the clock.
 */
#ifndef PHX_LAUNCHER_DRIVER_DRIVER_LEDGER_H
#define PHX_LAUNCHER_DRIVER_DRIVER_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/proto/role_ledger.h"
#include "launcher/result.h"

#define PHX_DRV_LEDGER_NO_NODE ((size_t)-1)

struct phx_drv_ledger;

/* Roles names[0..nroles) over nodes 0..nnodes); run names this driver's run. */
struct phx_drv_ledger *phx_drv_ledger_new(const char *const *names, size_t nroles, size_t nnodes,
					  uint64_t run);
void phx_drv_ledger_free(struct phx_drv_ledger *l);

/* Node i runs a new step of role r with nproc ranks on it: restart until its first step. */
void phx_drv_ledger_launch(struct phx_drv_ledger *l, size_t i, size_t r, unsigned nproc,
			   uint64_t now_ms);
/* Node i's step of role r ended; the node waits for the role's next one (restart). */
void phx_drv_ledger_idle(struct phx_drv_ledger *l, size_t i, size_t r, uint64_t now_ms);
/* Node i is role r's no more (lost, given to another role, the role ended there). */
void phx_drv_ledger_release(struct phx_drv_ledger *l, size_t i, size_t r, uint64_t now_ms);
/*
 * A failure of role r: node i lost (PHX_DRV_LEDGER_NO_NODE: its workers
 * failed on healthy nodes). A lost node's time since its last report
 * (hung: since its step last moved) is detection.
 */
void phx_drv_ledger_fault(struct phx_drv_ledger *l, size_t r, size_t i, bool hung, uint64_t now_ms);
/* An agent's progress report from node i. */
void phx_drv_ledger_progress(struct phx_drv_ledger *l, size_t i, const struct phx_progress *p,
			     uint64_t now_ms);
/* Role r's ledger as of now. */
void phx_drv_ledger_get(const struct phx_drv_ledger *l, size_t r, uint64_t now_ms,
			struct phx_role_ledger *out);

#endif

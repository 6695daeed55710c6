/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's reports to phalanx-ckptd: which node the job relaunches
 * without ("restart"), preflight results ("check"), and, about the whole
 * job (no node), a requeue that waits for nodes ("wait") or the driver
 * stopping it ("stop"). Without a daemon configured every call does
 * nothing.
 */
#ifndef PHX_DRIVER_CKPTD_H
#define PHX_DRIVER_CKPTD_H

#include <stdint.h>

struct phx_conf;
struct phx_drv_ckptd;

/* NULL when no daemon is configured or the job lacks its token (said once). */
struct phx_drv_ckptd *phx_drv_ckptd_open(const struct phx_conf *conf, uint32_t job);
/*
 * Sends report kind about node (NULL: the job), waiting at most
 * PHX_DRV_CKPTD_WAIT_MS for it to be written (PHX_DRV_CKPTD_AWAY_MS
 * once a wait found the daemon away); a report not written by then stays
 * queued and goes on reconnection.
 */
void phx_drv_ckptd_report(struct phx_drv_ckptd *dd, const char *kind, const char *node,
			  uint64_t value, const char *reason);
/* Gives queued reports one last bounded wait, then closes. */
void phx_drv_ckptd_close(struct phx_drv_ckptd *dd);

#define PHX_DRV_CKPTD_WAIT_MS 1000
#define PHX_DRV_CKPTD_AWAY_MS 50 /* after a wait that found the daemon away */

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's end of the cross-role rendezvous (agent_xrdv.c, protocol in
 * launcher/xrdv.h): a thread of its own long-polls the driver
 * (PHX_XRDV_ENV) and keeps a node-local file at the latest document of
 * where each role runs, for the workers to read. A document counts only
 * with the job's key and this request's nonce; the file only moves forward
 * in epoch.
 */
#ifndef PHX_LAUNCHER_AGENT_AGENT_XRDV_H
#define PHX_LAUNCHER_AGENT_AGENT_XRDV_H

struct phx_agent_xrdv;

/*
 * NULL when env (the PHX_XRDV_ENV value) is NULL or bad (logged). Starts a
 * thread that long-polls the driver and keeps `file` (written atomically:
 * temp file in the same directory + rename, mode 0600) at the latest document.
 */
struct phx_agent_xrdv *phx_agent_xrdv_start(const char *env, const char *file);
/*
 * Waits up to timeout_ms for the first document to be written; 0 when the
 * file exists, -1 otherwise.
 */
int phx_agent_xrdv_wait_first(struct phx_agent_xrdv *x, int timeout_ms);
/* The epoch of the last document written (0: none). */
unsigned long phx_agent_xrdv_epoch(struct phx_agent_xrdv *x);
/* NULL ok; stops promptly (wakes the thread out of any wait), joins. */
void phx_agent_xrdv_stop(struct phx_agent_xrdv *x);

#endif

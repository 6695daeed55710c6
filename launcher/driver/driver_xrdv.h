/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's end of the cross-role rendezvous (driver_xrdv.c, protocol in
 * launcher/xrdv.h): a TCP service on the driver's node that hands every
 * agent the latest document of where each role runs, long-polled. One
 * thread of its own; bounded against strangers: at most 512 connections,
 * 2 s to send a request, 10 s of holding, 5 s to read the answer, and no
 * answer at all without the job's key.
 */
#ifndef PHX_DRIVER_XRDV_H
#define PHX_DRIVER_XRDV_H

struct phx_drv_xrdv;

/*
 * Binds a TCP listener on the node's address (any port), a fresh random
 * key, a server thread. NULL (logged) on failure.
 */
struct phx_drv_xrdv *phx_drv_xrdv_open(void);
/* "ADDR:PORT:KEYHEX" for the agents' environment (PHX_XRDV_ENV). */
const char *phx_drv_xrdv_env(const struct phx_drv_xrdv *x);
/*
 * The new document; wakes every client waiting for an epoch below it. body
 * is copied. An epoch not above the last one, or a body over
 * PHX_XRDV_BODY_MAX, is refused (logged).
 */
void phx_drv_xrdv_publish(struct phx_drv_xrdv *x, unsigned long epoch, const char *body);
void phx_drv_xrdv_close(struct phx_drv_xrdv *x); /* NULL ok; joins the thread */

#endif

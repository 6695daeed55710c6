/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's end of the agents' lost-node reports (driver_lost.c): a UDP
 * socket on the driver's node, which also hears the beats of agents alone
 * in their step (role steps). Each step (role steps: the job) gets a
 * fresh key in its agents' environment (PHX_LOST_ENV of launcher/result.h,
 * not on the command line, which every user of the node can read), so a
 * report from an earlier step or from a stranger is dropped. The agents
 * also print the report on stderr; the datagram does not wait behind the
 * workers' output in srun's.
 */
#ifndef PHX_DRIVER_LOST_H
#define PHX_DRIVER_LOST_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/liveness.h"
#include "launcher/result.h"

struct phx_drv_lost;

/* NULL when there is no socket or no address (said why): the stderr lines remain. */
struct phx_drv_lost *phx_drv_lost_open(void);
/* A new key for the next step; the value of PHX_LOST_ENV for its agents. */
const char *phx_drv_lost_rekey(struct phx_drv_lost *l);
int phx_drv_lost_fd(const struct phx_drv_lost *l);
struct phx_drv_lost_ops {
	void (*found)(void *arg, const char *node); /* an agent reports node lost */
	void (*alive)(void *arg, const char *node, enum phx_beat state); /* a lone agent beats */
	/* An agent of a role's step reports its workers' progress. */
	void (*progress)(void *arg, const char *node, const struct phx_progress *p);
};

/*
 * Each pending datagram with the current key, to ops. Bounded per call;
 * true once the socket is empty (only then is a silence a silence).
 */
bool phx_drv_lost_read(struct phx_drv_lost *l, const struct phx_drv_lost_ops *ops, void *arg);
void phx_drv_lost_close(struct phx_drv_lost *l);

/*
 * The node's first IPv4 address that is up and not loopback, where the
 * agents reach the driver (here and driver_xrdv.c); 0 or -1.
 */
int phx_drv_own_address(char *buf, size_t len);

#endif

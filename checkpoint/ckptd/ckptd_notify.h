/* SPDX-License-Identifier: Apache-2.0 */
/*
 * systemd's service notifications (sd_notify(3)) for Type=notify and
 * WatchdogSec=, spoken on NOTIFY_SOCKET directly: the protocol is one
 * datagram of "KEY=VALUE" lines, not worth a library on every node.
 */
#ifndef PHX_CKPTD_NOTIFY_H
#define PHX_CKPTD_NOTIFY_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>

struct ckptd_notify {
	int fd; /* -1: not started by a service manager that listens */
	struct sockaddr_un addr;
	socklen_t addr_len;
	double watchdog_s; /* ping interval, half of WATCHDOG_USEC; 0: no watchdog */
	double next_ping;
};

/*
 * Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID (and removes them,
 * so no child takes them for its own). A socket that cannot be used is
 * logged and notifications are off: 0 either way.
 */
int ckptd_notify_open(struct ckptd_notify *n);

/* Sends one notification ("READY=1\nSTATUS=...", "STOPPING=1"); does nothing when off. */
void ckptd_notify_send(struct ckptd_notify *n, const char *text);

/* From the event loop: "WATCHDOG=1" when half the watchdog time has passed since the last. */
void ckptd_notify_watchdog(struct ckptd_notify *n, double now);

void ckptd_notify_close(struct ckptd_notify *n);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/ckptd/ckptd_notify.h"
#include "common/log.h"

/* WATCHDOG_PID names the process the watchdog is meant for, when it is set. */
static double watchdog_interval(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	char *end;
	unsigned long long us;

	if (!usec)
		return 0;
	if (pid && strtol(pid, NULL, 10) != getpid())
		return 0;
	errno = 0;
	us = strtoull(usec, &end, 10);
	if (errno || *end || !us) {
		phx_warn("WATCHDOG_USEC='%s' is not a number of microseconds; no watchdog "
			 "pings. Check WatchdogSec= in the service's unit",
			 usec);
		return 0;
	}
	return (double)us / 2e6;
}

/* "/path" or "@abstract" into a sockaddr_un. */
static int notify_addr(const char *path, struct ckptd_notify *n)
{
	size_t len = strlen(path);

	if ((path[0] != '/' && path[0] != '@') || len < 2 || len >= sizeof(n->addr.sun_path))
		return -1;
	memset(&n->addr, 0, sizeof(n->addr));
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, path, len);
	if (path[0] == '@')
		n->addr.sun_path[0] = '\0';
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
				  (path[0] == '/' ? 1 : 0));
	return 0;
}

int ckptd_notify_open(struct ckptd_notify *n)
{
	const char *path = getenv("NOTIFY_SOCKET");

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	if (!path)
		return 0;
	n->watchdog_s = watchdog_interval();
	if (notify_addr(path, n) < 0) {
		phx_warn("NOTIFY_SOCKET='%s' is not a socket path; systemd is not told when the "
			 "daemon is ready. Use Type=simple in the unit if it is not started by "
			 "systemd",
			 path);
	} else {
		n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (n->fd < 0)
			phx_warn("cannot make a socket for systemd's notifications: %s",
				 strerror(errno));
	}
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	return 0;
}

void ckptd_notify_send(struct ckptd_notify *n, const char *text)
{
	if (n->fd < 0)
		return;
	if (sendto(n->fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&n->addr,
		   n->addr_len) < 0)
		phx_debug("notification '%.20s' not sent to systemd: %s", text, strerror(errno));
}

void ckptd_notify_watchdog(struct ckptd_notify *n, double now)
{
	if (n->fd < 0 || n->watchdog_s <= 0 || now < n->next_ping)
		return;
	ckptd_notify_send(n, "WATCHDOG=1");
	n->next_ping = now + n->watchdog_s;
}

void ckptd_notify_close(struct ckptd_notify *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}

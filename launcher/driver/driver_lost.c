/* SPDX-License-Identifier: Apache-2.0 */
/* The driver's end of the agents' lost-node reports: see driver_lost.h. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hex.h"
#include "common/log.h"
#include "launcher/result.h"
#include "launcher/driver/driver_lost.h"

struct phx_drv_lost {
	int fd;
	char addr[INET_ADDRSTRLEN];
	unsigned port;
	char key[PHX_LOST_KEY_HEX + 1];
	char env[INET_ADDRSTRLEN + 8 + PHX_LOST_KEY_HEX];
};

int phx_drv_own_address(char *buf, size_t len)
{
	struct ifaddrs *ifa, *i;
	int rc = -1;

	if (getifaddrs(&ifa) < 0)
		return -1;
	for (i = ifa; i && rc < 0; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
			continue;
		if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
			      (socklen_t)len))
			rc = 0;
	}
	freeifaddrs(ifa);
	return rc;
}

struct phx_drv_lost *phx_drv_lost_open(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct phx_drv_lost *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	errno = 0;
	l->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(l->fd, (struct sockaddr *)&sa, &len) < 0 ||
	    phx_drv_own_address(l->addr, sizeof(l->addr)) < 0) {
		phx_info("no socket for the agents' lost-node reports (%s): the driver reads them "
			 "from srun's output, behind the workers' lines",
			 errno ? strerror(errno) : "no IPv4 address");
		phx_drv_lost_close(l);
		return NULL;
	}
	l->port = ntohs(sa.sin_port);
	return l;
}

const char *phx_drv_lost_rekey(struct phx_drv_lost *l)
{
	unsigned char raw[PHX_LOST_KEY_HEX / 2];

	if (!l || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return NULL;
	phx_hex_encode(raw, sizeof(raw), l->key);
	snprintf(l->env, sizeof(l->env), "%s:%u:%s", l->addr, l->port, l->key);
	return l->env;
}

int phx_drv_lost_fd(const struct phx_drv_lost *l)
{
	return l ? l->fd : -1;
}

bool phx_drv_lost_read(struct phx_drv_lost *l, const struct phx_drv_lost_ops *ops, void *arg)
{
	char d[PHX_LOST_REPORT_MAX + 1], node[256];
	struct phx_progress prog;
	enum phx_beat state;

	/* Bounded: a flood is read in batches, one datagram costs one compare. */
	for (int i = 0; l && l->key[0] && i < 64; i++) {
		ssize_t n = recv(l->fd, d, sizeof(d), MSG_TRUNC);

		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK;
		if (n > PHX_LOST_REPORT_MAX)
			continue;
		if (phx_lost_report_parse(d, (size_t)n, l->key, node, sizeof(node)) == 0)
			ops->found(arg, node);
		else if (phx_alive_report_parse(d, (size_t)n, l->key, node, sizeof(node), &state) ==
				 0 &&
			 ops->alive)
			ops->alive(arg, node, state);
		else if (ops->progress && phx_progress_report_parse(d, (size_t)n, l->key, node,
								    sizeof(node), &prog) == 0)
			ops->progress(arg, node, &prog);
	}
	return !l || !l->key[0];
}

void phx_drv_lost_close(struct phx_drv_lost *l)
{
	if (!l)
		return;
	if (l->fd >= 0)
		close(l->fd);
	free(l);
}

// SPDX-License-Identifier: Apache-2.0
/*
 * The driver's connection to phalanx-ckptd, as the job's driver (protocol
 * version 3): it never registers, so the agents alone give the job its
 * shape. A node the driver drops is reported before the relaunch, so the
 * daemon does not take the node's silence for a loss and requeue the job
 * while the driver already runs it on a spare. The driver is single
 * threaded: each report waits a bounded time for the socket, then the
 * driver goes on and the report waits in the client's queue.
 */
#include "config.h"

#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/proto/ckpt_client.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "launcher/driver/driver_ckptd.h"

struct phx_drv_ckptd {
	struct phx_ckpt_client *client;
	char address[256];
	int said_refused;
	int away; /* the last wait ended without a connection: do not wait again */
};

static int64_t mono_ms(void)
{
	return (int64_t)(phx_now_ns(CLOCK_MONOTONIC) / 1000000u);
}

static void on_refused(void *arg, const char *reason)
{
	struct phx_drv_ckptd *dd = arg;

	if (dd->said_refused++)
		return;
	phx_warn("phalanx-ckptd at %s refused the driver: %s; the job goes on, the daemon may "
		 "take a dropped node for lost",
		 dd->address, reason);
}

/* Lets the client work until everything is written or wait_ms have passed. */
static void pump(struct phx_drv_ckptd *dd, int wait_ms)
{
	int64_t end = mono_ms() + wait_ms;

	while (!phx_ckpt_client_idle(dd->client)) {
		int64_t left = end - mono_ms();
		struct pollfd p = { phx_ckpt_client_fd(dd->client),
				    phx_ckpt_client_events(dd->client), 0 };
		int t = phx_ckpt_client_timeout_ms(dd->client);

		if (left <= 0)
			return;
		if (t < 0 || t > left)
			t = (int)left;
		if (poll(&p, p.fd < 0 ? 0 : 1, t) < 0)
			p.revents = 0;
		phx_ckpt_client_handle(dd->client, p.revents);
	}
}

struct phx_drv_ckptd *phx_drv_ckptd_open(const struct phx_conf *conf, uint32_t job)
{
	const char *addr = phx_ckptd_address(conf), *token = getenv("PHALANX_JOB_TOKEN");
	struct phx_ckpt_client_ops ops = { .refused = on_refused };
	struct phx_ckpt_client_conf cc = { .driver = 1 };
	struct phx_drv_ckptd *dd;
	char host[256], err[512];

	if (!addr[0])
		return NULL;
	if (!token || !job) {
		phx_warn("phalanx-ckptd at %s is configured but PHALANX_JOB_TOKEN is not set; the "
			 "driver does not report to it (run under Slurm with the Phalanx plugin)",
			 addr);
		return NULL;
	}
	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "driver");
	host[sizeof(host) - 1] = '\0';
	dd = calloc(1, sizeof(*dd));
	if (!dd)
		return NULL;
	snprintf(dd->address, sizeof(dd->address), "%s", addr);
	cc.address = addr;
	cc.job = job;
	cc.uid = (uint32_t)getuid();
	cc.token = token;
	cc.node = host;
	dd->client = phx_ckpt_client_new(&cc, &ops, dd, err, sizeof(err));
	if (!dd->client) {
		phx_warn("phalanx-ckptd at %s: %s; the driver does not report to it", addr, err);
		free(dd);
		return NULL;
	}
	/* Connected now, so that the first report, a lost node's, goes at once. */
	pump(dd, PHX_DRV_CKPTD_WAIT_MS);
	dd->away = !phx_ckpt_client_ready(dd->client);
	phx_debug("the driver reports to phalanx-ckptd at %s%s", addr,
		  dd->away ? " (not connected yet)" : "");
	return dd;
}

void phx_drv_ckptd_report(struct phx_drv_ckptd *dd, const char *kind, const char *node,
			  uint64_t value, const char *reason)
{
	char why[PHX_WIRE_REASON_MAX + 1], about[300];
	bool was_away;

	if (!dd)
		return;
	snprintf(about, sizeof(about), "%s%s", node ? "node " : "the job", node ? node : "");
	/* The protocol's limit on reasons; the driver's own log has all of it. */
	snprintf(why, sizeof(why), "%s", reason ? reason : "");
	if (phx_ckpt_client_report(dd->client, kind, node, 0, value, why) < 0) {
		phx_warn("cannot queue the %s report of %s for phalanx-ckptd", kind, about);
		return;
	}
	/* While the daemon is away one full wait is enough: later reports only
	 * give the client a moment to reconnect, and queue. */
	was_away = dd->away && !phx_ckpt_client_ready(dd->client);
	pump(dd, was_away ? PHX_DRV_CKPTD_AWAY_MS : PHX_DRV_CKPTD_WAIT_MS);
	dd->away = !phx_ckpt_client_ready(dd->client);
	if (!was_away && !phx_ckpt_client_idle(dd->client))
		phx_warn("phalanx-ckptd at %s did not take the %s report of %s within %d ms; "
			 "it stays queued and the driver goes on",
			 dd->address, kind, about, PHX_DRV_CKPTD_WAIT_MS);
}

void phx_drv_ckptd_close(struct phx_drv_ckptd *dd)
{
	if (!dd)
		return;
	pump(dd, PHX_DRV_CKPTD_WAIT_MS);
	phx_ckpt_client_free(dd->client);
	free(dd);
}

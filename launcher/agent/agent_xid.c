/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent watches its node's kernel log (launcher.kernel_log, by default
 * /dev/kmsg) for NVIDIA Xid errors from the moment it starts: older
 * records are not this step's. An Xid of broken hardware is logged and
 * reported to phalanx-ckptd as the node's fault; others are the
 * application's and only logged. Checked once a second from the main loop;
 * reading never blocks.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "health/health.h"
#include "common/clock.h"
#include "common/log.h"
#include "health/xid.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_ckptd.h"
#include "launcher/agent/agent_xid.h"

#define XID_PERIOD_NS 1000000000ull

struct phx_xid_watch {
	int fd;
	char path[4096];
	char buf[8192]; /* a partial line of a plain log file */
	size_t len;
	uint64_t next_ns;
	bool records; /* a device like /dev/kmsg: each read returns one whole record */
};

static void found(struct phx_agent *a, const struct phx_xid *e)
{
	char reason[256];

	snprintf(reason, sizeof(reason), "Xid %u on GPU %s: %s", e->code, e->pci, e->text);
	if (!phx_xid_fatal(e->code)) {
		phx_warn("%s: %s (an application error, not the node's; see the failing rank's "
			 "log)",
			 a->node, reason);
		return;
	}
	phx_error("%s: %s: the GPU is broken; reported to phalanx-ckptd as the node's fault "
		  "(drain it and run phalanx check before it runs a job again)",
		  a->node, reason);
	phx_agent_ckptd_xid(a, e->code, reason);
}

/* Each whole line (a /dev/kmsg read returns one record) of the buffer. */
static void scan(struct phx_agent *a, struct phx_xid_watch *x)
{
	char *start = x->buf, *nl;

	while ((nl = memchr(start, '\n', x->len - (size_t)(start - x->buf)))) {
		struct phx_xid e;

		if (phx_xid_parse(start, (size_t)(nl - start), &e))
			found(a, &e);
		start = nl + 1;
	}
	x->len -= (size_t)(start - x->buf);
	memmove(x->buf, start, x->len);
	/* A line longer than the buffer is no Xid record: drop it. */
	if (x->len == sizeof(x->buf))
		x->len = 0;
}

/* The main loop's source: every round, reading at most once a second. */
static void poll_log(void *ctx, short revents)
{
	struct phx_agent *a = ctx;
	struct phx_xid_watch *x = a->xid;
	uint64_t now;

	(void)revents; /* it has no fd: a plain file is always readable */
	if (!x)
		return;
	now = phx_now_ns(CLOCK_MONOTONIC);
	if (now < x->next_ns)
		return;
	x->next_ns = now + XID_PERIOD_NS;
	for (;;) {
		ssize_t n = read(x->fd, x->buf + x->len, sizeof(x->buf) - x->len);

		if (n < 0 && errno == EINTR)
			continue;
		/* EPIPE: /dev/kmsg overwrote records before they were read; go on. */
		if (n < 0 && errno == EPIPE)
			continue;
		if (n <= 0)
			break;
		x->len += (size_t)n;
		/* A record is a line even when the device does not end it with a newline. */
		if (x->records && x->len < sizeof(x->buf) && x->buf[x->len - 1] != '\n')
			x->buf[x->len++] = '\n';
		scan(a, x);
	}
}

void phx_agent_xid_open(struct phx_agent *a)
{
	struct phx_health_ctx ctx = { .node = a->node };
	const char *pattern = a->conf.launcher.kernel_log;
	struct phx_agent_source source = { .handle = poll_log, .every_round = true, .ctx = a };
	struct phx_xid_watch *x;
	struct stat st;

	if (!pattern || !*pattern)
		return;
	x = calloc(1, sizeof(*x));
	if (!x)
		return;
	if (phx_health_expand(pattern, &ctx, x->path, sizeof(x->path)) < 0) {
		phx_warn("launcher.kernel_log '%s' does not expand on %s; no Xid watch", pattern,
			 a->node);
		free(x);
		return;
	}
	x->fd = open(x->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (x->fd < 0) {
		phx_info("no Xid watch on %s: cannot read %s (%s); GPU errors are found by the "
			 "workers' failures only (allow it with kernel.dmesg_restrict=0, or set "
			 "launcher.kernel_log: \"\")",
			 a->node, x->path, strerror(errno));
		free(x);
		return;
	}
	x->records = fstat(x->fd, &st) == 0 && S_ISCHR(st.st_mode);
	/* Only what is logged from now on: /dev/kmsg and plain files both seek to the end. */
	lseek(x->fd, 0, SEEK_END);
	if (phx_agent_pump_add(a, &source) < 0) {
		close(x->fd);
		free(x);
		return;
	}
	a->xid = x;
}

void phx_agent_xid_close(struct phx_agent *a)
{
	struct phx_xid_watch *x = a->xid;

	if (!x)
		return;
	close(x->fd);
	free(x);
	a->xid = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MUNGE credentials of admin clients on the TCP port, checked off the
 * event loop: munged may take seconds (restarting, busy), and the loop
 * carries every job's heartbeats. One thread decodes them in turn; the
 * loop collects the verdicts when d->munge_fd is readable.
 */
#ifndef PHX_CKPTD_MUNGE_H
#define PHX_CKPTD_MUNGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "checkpoint/ckptd/ckptd.h"

/* Credentials waiting at most; more are refused as busy, not queued. */
#define CKPTD_MUNGE_QUEUE 64

struct ckptd_munge_verdict {
	uint64_t serial; /* the connection's (struct ckptd_conn) */
	int ok;
	uid_t uid; /* when ok */
	char why[256]; /* when not */
};

typedef void (*ckptd_munge_fn)(struct ckptd *d, const struct ckptd_munge_verdict *v);

/* socket: munged's ("" = libmunge's default); done gets every verdict. */
int ckptd_munge_start(struct ckptd *d, const char *socket, ckptd_munge_fn done, char *err,
		      size_t errlen);
/* Queues cred for checking: 0, or -1 when the queue is full. */
int ckptd_munge_check(struct ckptd *d, uint64_t serial, const char *cred);
/* d->munge_fd is readable: hands the finished verdicts to done. */
void ckptd_munge_collect(struct ckptd *d);
void ckptd_munge_stop(struct ckptd *d);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Progress of a long command (phalanx ckpt verify) on stderr: on a
 * terminal one line rewritten each second, otherwise (a job's log) a line
 * every ten seconds; nothing for work that ends before the first is due.
 * Any thread may add work done.
 */
#ifndef PHX_CLI_PROGRESS_H
#define PHX_CLI_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct phx_progress {
	const char *what, *unit; /* "verify", "ranks" */
	uint64_t total, total_bytes;
	uint64_t done, bytes;
	double start, next; /* monotonic seconds: begun, next line due */
	double every;
	bool tty, shown;
	FILE *out;
	pthread_mutex_t lock;
};

/* out: where lines go (stderr); tty: rewrite one line in place. */
void phx_progress_init(struct phx_progress *p, const char *what, const char *unit, uint64_t total,
		       uint64_t total_bytes, FILE *out, bool tty, double now);
/* n more units of bytes done by now; prints when a line is due. */
void phx_progress_add(struct phx_progress *p, uint64_t n, uint64_t bytes, double now);
/* Takes the terminal's line away before another message (it comes back when due). */
void phx_progress_clear(struct phx_progress *p);
/* Ends the line a terminal shows; the caller prints its own summary. */
void phx_progress_end(struct phx_progress *p);
/* The line for now, e.g. "verify: 12 of 40 ranks, 1.5 of 5.0 GiB, 800 MiB/s,
 * about 5 s left" (no prefix, no newline). */
void phx_progress_format(const struct phx_progress *p, double now, char *buf, size_t len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Worker output (output.c): pipes' bytes split into lines, and the root
 * cause read from a rank's error file (common/errfile.h).
 */
#ifndef PHX_LAUNCHER_OUTPUT_H
#define PHX_LAUNCHER_OUTPUT_H

#include <stddef.h>

#include "common/errfile.h"

#define PHX_LINE_MAX 8192

/* Splits a pipe's bytes into lines; a longer line is cut at PHX_LINE_MAX. */
struct phx_linebuf {
	char buf[PHX_LINE_MAX];
	size_t len;
};

typedef void (*phx_line_fn)(void *arg, const char *line, size_t len);
void phx_linebuf_feed(struct phx_linebuf *lb, const char *data, size_t n, phx_line_fn fn,
		      void *arg);
/* The unfinished last line at end of file. */
void phx_linebuf_flush(struct phx_linebuf *lb, phx_line_fn fn, void *arg);

/*
 * Reads and parses a rank's error file of one epoch (restart): path gets
 * its name, msg and trace what phx_errfile_parse() finds. 0, or -1 when
 * the file is missing, larger than 4 MiB or says nothing.
 */
int phx_worker_error_read(const char *run_dir, unsigned restart, unsigned long rank, char *path,
			  size_t pathlen, char *msg, size_t msglen, char *trace, size_t tracelen);

#endif

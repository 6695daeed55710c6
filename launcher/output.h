/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Worker output (output.c): pipes' bytes split into lines, and the root
 * cause read from a rank's error file. Pure but for reading that file.
 */
#ifndef PHX_LAUNCHER_OUTPUT_H
#define PHX_LAUNCHER_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

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
 * The root cause from a TORCHELASTIC_ERROR_FILE (torch's @record JSON):
 * message and traceback. Text that is not that JSON is taken as the
 * message. 0, or -1 when there is nothing in it.
 */
int phx_errfile_parse(const char *text, char *msg, size_t msglen, char *trace, size_t tracelen);

/*
 * The message is a collective's error for a peer that went away (gloo's
 * "Connection closed by peer", NCCL's "remote process exited"): a
 * failure that follows another's, not a root cause.
 */
bool phx_errfile_peer_lost(const char *msg);

/*
 * Reads and parses a rank's error file of one epoch (restart): path gets
 * its name, msg and trace what phx_errfile_parse() finds. 0, or -1 when
 * the file is missing, larger than 4 MiB or says nothing.
 */
int phx_worker_error_read(const char *run_dir, unsigned restart, unsigned long rank, char *path,
			  size_t pathlen, char *msg, size_t msglen, char *trace, size_t tracelen);

#endif

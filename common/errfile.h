/* SPDX-License-Identifier: Apache-2.0 */
/*
 * torch's error files (TORCHELASTIC_ERROR_FILE): what a worker's @record
 * wrote when it raised, read back as the failure's root cause by the
 * launcher's agents and by the plugin at a task's exit.
 */
#ifndef PHX_ERRFILE_H
#define PHX_ERRFILE_H

#include <stdbool.h>
#include <stddef.h>

/* torch writes a message and a traceback; a few MiB is already far more. */
#define PHX_ERRFILE_MAX_BYTES (4u << 20)

/*
 * The root cause from an error file's text (torch's @record JSON):
 * message and traceback. Text that is not that JSON is taken as the
 * message. 0, or -1 when there is nothing in it.
 */
int phx_errfile_parse(const char *text, char *msg, size_t msglen, char *trace, size_t tracelen);

/*
 * Reads path (a regular file of at most PHX_ERRFILE_MAX_BYTES; a FIFO or
 * device is refused without blocking) and parses it. 0, or -1 when the
 * file is missing, too large or says nothing.
 */
int phx_errfile_read(const char *path, char *msg, size_t msglen, char *trace, size_t tracelen);

/*
 * The message is a collective's error for a peer that went away (gloo's
 * "Connection closed by peer", NCCL's "remote process exited"): a
 * failure that follows another's, not a root cause.
 */
bool phx_errfile_peer_lost(const char *msg);

#endif

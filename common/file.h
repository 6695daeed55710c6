/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Crash-safe file helpers: a reader never sees a half-written file; and
 * whole-buffer writes and sends to a descriptor.
 */
#ifndef PHX_FILE_H
#define PHX_FILE_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Writes data to path atomically: a temporary file in the same directory,
 * fsync, rename over path, fsync of the directory. Returns 0 or -errno;
 * on failure path is untouched and no temporary file is left behind.
 */
int phx_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/*
 * Reads a whole regular file of at most max_bytes into a NUL-terminated
 * malloc'd buffer; a FIFO or device is refused (-EINVAL) without blocking
 * on it. Returns 0 or -errno (-EFBIG when larger than max_bytes).
 */
int phx_file_read(const char *path, size_t max_bytes, char **data, size_t *len);

/*
 * Writes all len bytes to fd, across short writes and EINTR. Returns 0, or
 * -errno (-EIO when the descriptor takes nothing).
 */
int phx_write_all(int fd, const void *buf, size_t len);

/*
 * The same on a stream socket, with MSG_NOSIGNAL: a peer that went away is
 * -EPIPE, not a SIGPIPE. Sends in pieces of at most 8 MiB.
 */
int phx_send_all(int fd, const void *buf, size_t len);

/* fsync of the directory holding path, so a rename in it is durable. */
int phx_file_sync_parent(const char *path);

/*
 * mkdir, and when it made the directory, fsync of its parent: a file
 * fsynced into a new directory is lost in a crash unless the directory's
 * own entry is durable too. An existing path is left alone (0).
 */
int phx_mkdir_durable(const char *path, mode_t mode);

/* phx_mkdir_durable of path and of each missing parent, top down. */
int phx_mkdirs(const char *path, mode_t mode);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file.h"

/* A shard can be many GiB: a send takes at most this much of it at a time. */
#define SEND_PIECE (8u << 20)

/* The loop of both: write() when piece is 0, else send() of at most piece bytes. */
static int put_all(int fd, const void *buf, size_t len, size_t piece)
{
	const char *p = buf;

	while (len) {
		ssize_t n = piece ? send(fd, p, len < piece ? len : piece, MSG_NOSIGNAL)
				  : write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int phx_write_all(int fd, const void *buf, size_t len)
{
	return put_all(fd, buf, len, 0);
}

int phx_send_all(int fd, const void *buf, size_t len)
{
	return put_all(fd, buf, len, SEND_PIECE);
}

int phx_file_sync_parent(const char *path)
{
	char copy[PATH_MAX];
	int fd, rc = 0;

	if (strlen(path) >= sizeof(copy))
		return -ENAMETOOLONG;
	strcpy(copy, path);
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int phx_mkdir_durable(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0)
		return errno == EEXIST ? 0 : -errno;
	return phx_file_sync_parent(path);
}

int phx_mkdirs(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/' || p[-1] == '/')
			continue;
		*p = '\0';
		rc = phx_mkdir_durable(tmp, mode);
		*p = '/';
		if (rc)
			return rc;
	}
	return phx_mkdir_durable(tmp, mode);
}

int phx_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = phx_write_all(fd, data, len);
	if (rc)
		goto fail;
	if (fsync(fd) < 0) {
		rc = -errno;
		goto fail;
	}
	if (close(fd) < 0) {
		rc = -errno;
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		rc = -errno;
		goto fail;
	}
	return phx_file_sync_parent(path);
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return rc;
}

int phx_file_read(const char *path, size_t max_bytes, char **data, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	size_t used = 0, cap;
	int fd, rc;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		goto out;
	}
	if ((size_t)st.st_size > max_bytes) {
		rc = -EFBIG;
		goto out;
	}
	/* The size may change under us: read until EOF, bounded by max_bytes. */
	cap = (size_t)st.st_size + 1;
	buf = malloc(cap);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (used + 1 == cap) {
			char *grown;

			if (used >= max_bytes) {
				char probe;
				ssize_t got = read(fd, &probe, 1);

				if (got == 0)
					break;
				rc = got < 0 ? -errno : -EFBIG;
				goto out;
			}
			cap = cap * 2 > max_bytes + 1 ? max_bytes + 1 : cap * 2;
			grown = realloc(buf, cap);
			if (!grown) {
				rc = -ENOMEM;
				goto out;
			}
			buf = grown;
		}
		n = read(fd, buf + used, cap - 1 - used);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	*data = buf;
	*len = used;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/proto/digest.h"
#include "checkpoint/proto/digest_file.h"
#include "common/log.h"

/* The digest of fd's len bytes, mapped read-only; 0 or -1 with err. */
static int digest_fd(int fd, const char *path, size_t len, enum phx_digest_algo algo,
		     unsigned nthreads, uint8_t out[PHX_DIGEST_MAX], char *err, size_t errlen)
{
	void *map = NULL;
	int rc;

	if (len) {
		map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED)
			return phx_errf(err, errlen, "cannot map %s: %s", path, strerror(errno));
		/* Read once, front to back: the page cache may drop it behind us. */
		madvise(map, len, MADV_SEQUENTIAL);
	}
	rc = phx_digest_compute(algo, map, len, nthreads, NULL, out);
	if (map)
		munmap(map, len);
	if (rc < 0)
		return phx_errf(err, errlen, "cannot compute the %s digest of %s",
				phx_digest_name(algo), path);
	return 0;
}

/*
 * A manifest names the path, and whoever wrote it may not be who reads it:
 * only a regular file is opened, never through a final symbolic link, and
 * never a FIFO or device (opening one can block or have side effects), so
 * it is looked at first and must still be the same file once open.
 */
static int open_shard(const char *path, struct stat *st, char *err, size_t errlen)
{
	struct stat before;
	int fd;

	if (lstat(path, &before) < 0)
		return phx_errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
	if (!S_ISREG(before.st_mode))
		return phx_errf(err, errlen, "%s is not a regular file; a shard is one", path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return phx_errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || st->st_dev != before.st_dev ||
	    st->st_ino != before.st_ino) {
		close(fd);
		return phx_errf(err, errlen, "%s changed while it was opened; try again", path);
	}
	return fd;
}

int phx_digest_file_check(const char *path, uint64_t bytes, const char *alg, const char *hex,
			  unsigned nthreads, char *err, size_t errlen)
{
	enum phx_digest_algo algo;
	uint8_t dig[PHX_DIGEST_MAX];
	char got[PHX_DIGEST_HEX_LEN];
	struct stat st;
	int fd, rc = PHX_DIGEST_FILE_UNREADABLE;

	/* Only the canonical names the agents write: an alias would be a different manifest. */
	if (phx_digest_parse(alg, &algo) < 0 || strcmp(phx_digest_name(algo), alg)) {
		phx_errf(err, errlen, "digest algorithm \"%.40s\" is unknown (known: %s, %s)", alg,
			 phx_digest_name(PHX_DIGEST_XXH3), phx_digest_name(PHX_DIGEST_SHA256));
		return PHX_DIGEST_FILE_UNKNOWN;
	}
	if (path[0] != '/') {
		phx_errf(err, errlen, "%s is not a path on this host", path);
		return PHX_DIGEST_FILE_UNREADABLE;
	}
	fd = open_shard(path, &st, err, errlen);
	if (fd < 0)
		return PHX_DIGEST_FILE_UNREADABLE;
	if ((uint64_t)st.st_size != bytes) {
		phx_errf(err, errlen, "%s has %llu bytes, its manifest says %llu", path,
			 (unsigned long long)st.st_size, (unsigned long long)bytes);
		rc = PHX_DIGEST_FILE_BAD;
		goto out;
	}
	if (digest_fd(fd, path, (size_t)bytes, algo, nthreads, dig, err, errlen) < 0)
		goto out;
	phx_digest_hex(algo, dig, got);
	rc = strcmp(got, hex) ? PHX_DIGEST_FILE_BAD : PHX_DIGEST_FILE_OK;
	if (rc == PHX_DIGEST_FILE_BAD)
		phx_errf(err, errlen, "%s does not match its %s digest", path, alg);
out:
	close(fd);
	return rc;
}

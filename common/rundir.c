/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/rundir.h"

/* A directory without a lock file is being made, or is older than this. */
#define STALE_UNLOCKED_S (24 * 3600)

/* Unlinks every entry of the directory dfd (not recursive); keeps dfd open. */
static void empty_dir(int dfd)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		unlinkat(dfd, e->d_name, 0);
	}
	closedir(d);
}

/* 1: name in bfd is a dead owner's run directory, now locked by us in *lfd. */
static int claim_stale(int bfd, const char *name, int *dfd, int *lfd)
{
	struct stat st;

	*dfd = *lfd = -1;
	if (fstatat(bfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid())
		return 0;
	*dfd = openat(bfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*dfd < 0)
		return 0;
	*lfd = openat(*dfd, PHX_RUNDIR_LOCK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (*lfd < 0)
		return errno == ENOENT && st.st_mtime + STALE_UNLOCKED_S < time(NULL);
	return flock(*lfd, LOCK_EX | LOCK_NB) == 0;
}

int phx_rundir_sweep(const char *base, const char *prefix)
{
	size_t plen = strlen(prefix);
	DIR *bd = opendir(base);
	struct dirent *e;
	int removed = 0;

	if (!bd)
		return 0;
	while ((e = readdir(bd))) {
		int dfd, lfd, stale;

		if (strncmp(e->d_name, prefix, plen) || e->d_name[plen] != '.')
			continue;
		stale = claim_stale(dirfd(bd), e->d_name, &dfd, &lfd);
		if (stale) {
			empty_dir(dfd);
			removed += unlinkat(dirfd(bd), e->d_name, AT_REMOVEDIR) == 0;
		}
		if (lfd >= 0)
			close(lfd);
		if (dfd >= 0)
			close(dfd);
	}
	closedir(bd);
	return removed;
}

/*
 * The lock is taken on a file of another name and renamed into place, so
 * a sweeper never finds the lock file unlocked while its owner lives.
 */
static int lock_dir(const char *dir, int *lock_fd)
{
	char tmp[4200], path[4200];
	int fd, err;

	snprintf(tmp, sizeof(tmp), "%s/%s.new", dir, PHX_RUNDIR_LOCK);
	snprintf(path, sizeof(path), "%s/%s", dir, PHX_RUNDIR_LOCK);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0 || rename(tmp, path) < 0) {
		err = -errno;
		close(fd);
		unlink(tmp);
		return err;
	}
	*lock_fd = fd;
	return 0;
}

int phx_rundir_make(const char *base, const char *prefix, char *out, size_t outlen, int *lock_fd)
{
	int rc;

	*lock_fd = -1;
	if ((size_t)snprintf(out, outlen, "%s/%s.XXXXXX", base, prefix) >= outlen)
		return -ENAMETOOLONG;
	phx_rundir_sweep(base, prefix);
	if (!mkdtemp(out))
		return -errno;
	rc = lock_dir(out, lock_fd);
	if (rc < 0)
		rmdir(out);
	return rc;
}

/* Sweeps the siblings of dir (base/prefix.XXXXXX) whose owners died. */
static void sweep_siblings(const char *dir)
{
	char base[4200], *slash, *dot;

	if (snprintf(base, sizeof(base), "%s", dir) >= (int)sizeof(base))
		return;
	slash = strrchr(base, '/');
	dot = slash ? strrchr(slash, '.') : NULL;
	if (!slash || !dot || slash == base)
		return;
	*slash = '\0';
	*dot = '\0';
	phx_rundir_sweep(base, slash + 1);
}

void phx_rundir_remove(const char *dir, int lock_fd)
{
	int dfd = dir[0] ? open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;

	if (dfd >= 0) {
		empty_dir(dfd);
		close(dfd);
		rmdir(dir);
	}
	if (lock_fd >= 0) {
		close(lock_fd);
		/* The last agent of a job to end cleans up after those killed before it. */
		sweep_siblings(dir);
	}
}

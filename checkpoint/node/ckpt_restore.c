/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finding what to restore when the agent starts: the newest published
 * generation whose every local shard verifies, trying each shard's
 * sources in order (node-local directory, then the shared one) and
 * falling back a generation when a shard has no good source. A shard is
 * read into a staging buffer while helper threads digest the chunks that
 * have arrived, so verification costs little beyond the read.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "common/file.h"
#include "common/log.h"
#include "checkpoint/node/ckpt_int.h"

static int pread_piece(void *arg, size_t off, size_t n, uint8_t *dst)
{
	int fd = *(int *)arg;

	while (n) {
		ssize_t r = pread(fd, dst, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		dst += r;
		off += (size_t)r;
		n -= (size_t)r;
	}
	return 0;
}

int phx_ckpt_load_file(const char *path, const struct phx_ckpt_entry *e, unsigned threads,
		       void *dst, char *err, size_t errlen)
{
	enum phx_digest_algo algo = (enum phx_digest_algo)e->algo;
	uint8_t got[PHX_DIGEST_MAX];
	struct stat st;
	int fd, rc = -1, rerr;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return phx_errf(err, errlen, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || (unsigned long long)st.st_size != e->bytes) {
		phx_errf(err, errlen, "%s holds %lld bytes, the manifest says %llu", path,
			 (long long)st.st_size, e->bytes);
		goto out;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	/* Parallel chunks, each hashed piece by piece while the piece is in cache. */
	if (phx_digest_read(algo, dst, (size_t)e->bytes, threads, pread_piece, &fd, &rerr, got) <
	    0) {
		phx_errf(err, errlen, "reading %s: %s", path, strerror(-rerr));
		goto out;
	}
	if (memcmp(got, e->digest, phx_digest_len(algo))) {
		phx_errf(err, errlen, "%s does not match its %s digest (corrupt)", path,
			 phx_digest_name(algo));
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Reads path (e->bytes long) into b and checks its digest: 0, or -1 with why in err. */
static int load_verify(struct phx_ckpt *c, const char *path, const struct phx_ckpt_entry *e,
		       struct ck_buf *b, char *err, size_t errlen)
{
	if (b->fd < 0 || b->cap < e->bytes) {
		ck_buf_free(b);
		if (ck_buf_alloc(c, b, (size_t)e->bytes) < 0)
			return phx_errf(err, errlen, "no memory for %llu bytes: %s", e->bytes,
					strerror(errno));
	}
	if (phx_ckpt_load_file(path, e, c->threads, b->map, err, errlen) < 0)
		return -1;
	b->len = (size_t)e->bytes;
	b->step = e->step;
	memcpy(b->digest, e->digest, sizeof(e->digest));
	b->digested = true;
	return 0;
}

/* The rank's entry in the manifest of the generation's directory. */
static int find_entry(const char *dir, unsigned long rank, struct phx_ckpt_entry *e, char *err,
		      size_t errlen)
{
	char path[4600], *text = NULL;
	size_t len;
	int rc;

	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	rc = phx_file_read(path, PHX_MANIFEST_MAX_BYTES, &text, &len);
	if (rc < 0)
		return phx_errf(err, errlen, "%s: %s", path, strerror(-rc));
	rc = phx_ckpt_manifest_find(text, rank, e, err, errlen);
	free(text);
	return rc;
}

static int restore_slot(struct phx_ckpt *c, unsigned i, long step)
{
	struct ck_slot *s = &c->slot[i];
	struct ck_buf *b = &s->buf[0];
	char dir[4200], path[4600], err[1024];

	if (ck_partner_load(c, s->rank, step, b) == 0) {
		phx_info("rank %lu: generation %ld from its partner copy, verified", s->rank, step);
		b->state = B_STAGED;
		s->committed = 0;
		s->loaded = CK_FROM_PARTNER;
		return 0;
	}
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		struct phx_ckpt_entry e;

		if (!c->dir[t][0])
			continue;
		ck_gen_dir(c, (enum phx_ckpt_tier)t, step, dir, sizeof(dir));
		if (find_entry(dir, s->rank, &e, err, sizeof(err)) == 0) {
			snprintf(path, sizeof(path), "%s/rank-%lu.shard", dir, s->rank);
			if (load_verify(c, path, &e, b, err, sizeof(err)) == 0) {
				phx_info("rank %lu: generation %ld from the %s tier (%s), verified",
					 s->rank, step, phx_ckpt_tier_name((enum phx_ckpt_tier)t),
					 path);
				b->state = B_STAGED;
				s->committed = 0;
				s->loaded = t;
				return 0;
			}
		}
		phx_warn("rank %lu: generation %ld not usable from the %s tier: %s; trying the "
			 "next source",
			 s->rank, step, phx_ckpt_tier_name((enum phx_ckpt_tier)t), err);
	}
	return -1;
}

static size_t list_gens(const struct phx_ckpt *c, long max, long *steps, size_t cap)
{
	size_t n = 0;

	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		DIR *d = c->dir[t][0] ? opendir(c->dir[t]) : NULL;
		struct dirent *e;

		while (d && (e = readdir(d)) && n < cap) {
			long s = phx_ckpt_gen_parse(e->d_name);
			bool dup = false;

			for (size_t k = 0; k < n; k++)
				dup |= steps[k] == s;
			if (s >= 0 && s <= max && !dup &&
			    ck_published(c, (enum phx_ckpt_tier)t, s, NULL))
				steps[n++] = s;
		}
		if (d)
			closedir(d);
	}
	return ck_partner_steps(c, max, steps, n, cap);
}

static int desc(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

long ck_restore_find(struct phx_ckpt *c, long max)
{
	long steps[1024];
	size_t n = list_gens(c, max, steps, 1024);

	qsort(steps, n, sizeof(*steps), desc);
	for (size_t k = 0; k < n; k++) {
		unsigned i;

		for (i = 0; i < c->nproc; i++) {
			if (restore_slot(c, i, steps[k]) < 0)
				break;
		}
		if (i == c->nproc)
			return steps[k];
		phx_warn("generation %ld cannot be restored on %s (rank %lu has no good copy); "
			 "falling back to the previous generation",
			 steps[k], c->node, c->slot[i].rank);
		for (i = 0; i < c->nproc; i++)
			c->slot[i].committed = -1;
	}
	return -1;
}

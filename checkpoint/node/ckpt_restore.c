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

/* The generation's manifest from the first directory tier that has one. 0, or -1. */
static int read_manifest(const struct phx_ckpt *c, long step, struct phx_manifest *m)
{
	char dir[4200], path[4600], err[512], *text = NULL;
	size_t len;

	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		if (!c->dir[t][0] || !ck_published(c, (enum phx_ckpt_tier)t, step, NULL))
			continue;
		ck_gen_dir(c, (enum phx_ckpt_tier)t, step, dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/manifest.json", dir);
		if (phx_file_read(path, PHX_MANIFEST_MAX_BYTES, &text, &len) == 0 &&
		    phx_manifest_parse(text, len, m, err, sizeof(err)) == 0) {
			free(text);
			return 0;
		}
		if (text)
			phx_warn("%s: %s; trying the next tier", path, err);
		free(text);
		text = NULL;
	}
	return -1;
}

/*
 * Slot i's shard of the generation m describes (NULL: only partner copies
 * hold it, restored by rank number), saved by rank src: from the partner's
 * copy, else the directory tiers in order. 0, or -1 when no source verifies.
 */
static int restore_slot(struct phx_ckpt *c, unsigned i, long step, const struct phx_manifest *m,
			unsigned long src)
{
	struct ck_slot *s = &c->slot[i];
	struct ck_buf *b = &s->buf[0];
	char dir[4200], path[4600], err[1024];
	struct phx_ckpt_entry e;

	if (ck_partner_load(c, src, step, b) == 0) {
		if (src == s->rank)
			phx_info("rank %lu: generation %ld from its partner copy, verified",
				 s->rank, step);
		else
			phx_info("rank %lu: generation %ld from the partner copy of rank %lu "
				 "(its replica in the saved layout), verified",
				 s->rank, step, src);
		goto loaded;
	}
	if (!m || phx_ckpt_manifest_entry(m, src, &e, err, sizeof(err)) != 0)
		return -1;
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		if (!c->dir[t][0] || !ck_published(c, (enum phx_ckpt_tier)t, step, NULL))
			continue;
		ck_gen_dir(c, (enum phx_ckpt_tier)t, step, dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/rank-%lu.shard", dir, src);
		/* Another node's rank: its shard is not in this node's own directory. */
		if (src != s->rank && t == PHX_TIER_LOCAL && access(path, F_OK) < 0)
			continue;
		if (load_verify(c, path, &e, b, err, sizeof(err)) == 0) {
			phx_info("rank %lu: generation %ld from the %s tier (%s), verified",
				 s->rank, step, phx_ckpt_tier_name((enum phx_ckpt_tier)t), path);
			s->loaded = t;
			goto loaded_tier;
		}
		phx_warn("rank %lu: generation %ld not usable from the %s tier: %s; trying the "
			 "next source",
			 s->rank, step, phx_ckpt_tier_name((enum phx_ckpt_tier)t), err);
	}
	return -1;
loaded:
	s->loaded = CK_FROM_PARTNER;
loaded_tier:
	b->state = B_STAGED;
	s->committed = 0;
	return 0;
}

/*
 * Every local slot's shard of generation step: 0, -1 when one has no good
 * source (an older generation may do), CK_REFUSED when the layout forbids it.
 */
static int restore_gen(struct phx_ckpt *c, long step)
{
	struct phx_manifest m;
	bool have_m = read_manifest(c, step, &m) == 0;
	int rc = 0;

	for (unsigned i = 0; i < c->nproc && !rc; i++) {
		unsigned long src = c->slot[i].rank;
		char why[512];

		if (have_m && phx_ckpt_source_rank(&m, &c->lay, c->world, c->slot[i].rank, &src,
						   why, sizeof(why)) < 0) {
			phx_error("rank %lu: generation %ld cannot be restored onto the layout %s: "
				  "%s",
				  c->slot[i].rank, step, c->layout, why);
			rc = CK_REFUSED;
			break;
		}
		if (restore_slot(c, i, step, have_m ? &m : NULL, src) < 0) {
			phx_warn("generation %ld cannot be restored on %s (rank %lu has no good "
				 "copy); falling back to the previous generation",
				 step, c->node, c->slot[i].rank);
			rc = -1;
		}
	}
	if (have_m)
		phx_manifest_free(&m);
	return rc;
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
		int rc = restore_gen(c, steps[k]);

		if (rc == 0)
			return steps[k];
		for (unsigned i = 0; i < c->nproc; i++)
			c->slot[i].committed = -1;
		/* An older generation instead would drop the newest one's progress unsaid. */
		if (rc == CK_REFUSED)
			return CK_REFUSED;
	}
	return -1;
}

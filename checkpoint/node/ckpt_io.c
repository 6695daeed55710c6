/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's writer thread: the main loop never waits on a disk. Jobs
 * come in order: a shard is digested (in parallel chunks, on helper
 * threads) while the same thread writes it to each due tier with tmp +
 * fsync + rename + fsync of the directory; a publish writes a generation's
 * manifest, then the `latest` pointer, then collects older generations.
 * Finished jobs go back through an eventfd the main loop polls.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "common/file.h"
#include "common/log.h"
#include "checkpoint/node/ckpt_int.h"

#define WRITE_PIECE (64u << 20)

/*
 * tmp + fsync + rename + fsync of the directory, from memory in large
 * pieces. Writeback of each piece starts as soon as it is written, so the
 * final fsync waits for the last piece, not for the whole file.
 */
static int write_shard(const char *path, const void *data, size_t len)
{
	char tmp[4400];
	const char *p = data;
	size_t left = len;
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (left) {
		ssize_t n = write(fd, p, left < WRITE_PIECE ? left : WRITE_PIECE);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		sync_file_range(fd, (off_t)(len - left), n, SYNC_FILE_RANGE_WRITE);
		p += n;
		left -= (size_t)n;
	}
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	return phx_file_sync_parent(path);
}

struct digest_arg {
	enum phx_digest_algo algo;
	const void *data;
	size_t len;
	unsigned threads;
	uint8_t *out;
	int rc;
};

static void *digest_thread(void *arg)
{
	struct digest_arg *d = arg;

	d->rc = phx_digest_compute(d->algo, d->data, d->len, d->threads, NULL, d->out);
	return NULL;
}

/* The digest starts on its own threads; digest_join() waits for it. */
static bool digest_start(struct digest_arg *d, pthread_t *tid)
{
	if (pthread_create(tid, NULL, digest_thread, d) == 0)
		return true;
	digest_thread(d);
	return false;
}

static int digest_join(struct digest_arg *d, pthread_t tid, bool threaded)
{
	if (threaded)
		pthread_join(tid, NULL);
	return d->rc;
}

int phx_ckpt_persist_file(const char *path, const void *data, size_t len, int algo,
			  unsigned threads, unsigned char *digest)
{
	struct digest_arg d = { (enum phx_digest_algo)algo, data, len, threads, digest, -1 };
	pthread_t tid;
	bool threaded = digest_start(&d, &tid);
	int rc = write_shard(path, data, len);

	if (digest_join(&d, tid, threaded) < 0 && !rc)
		rc = -EIO;
	return rc;
}

static void persist(struct phx_ckpt *c, struct ck_job *j)
{
	struct digest_arg d = { c->algo, j->data, j->len, c->threads, j->digest, -1 };
	char dir[4200], path[4300];
	pthread_t tid;
	bool threaded = digest_start(&d, &tid);

	j->written = 1u << PHX_TIER_MEMORY;
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		int rc;

		if (!(j->tiers & (1u << t)))
			continue;
		ck_gen_dir(c, (enum phx_ckpt_tier)t, j->step, dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/rank-%lu.shard", dir, j->rank);
		rc = phx_mkdirs(dir, 0700);
		if (!rc)
			rc = write_shard(path, j->data, j->len);
		if (rc) {
			phx_error("cannot write the shard of rank %lu, step %ld to %s: %s; the %s "
				  "tier skips this generation (check the directory and its space)",
				  j->rank, j->step, path, strerror(-rc),
				  phx_ckpt_tier_name((enum phx_ckpt_tier)t));
			continue;
		}
		j->written |= 1u << t;
	}
	j->rc = digest_join(&d, tid, threaded);
	if (d.rc < 0)
		phx_error("cannot digest the shard of rank %lu, step %ld", j->rank, j->step);
	else if (j->written & (1u << PHX_TIER_LOCAL))
		ck_partner_send(c, j);
}

static bool own_file(const struct phx_ckpt *c, enum phx_ckpt_tier t, const char *name)
{
	char want[320];

	if (!strcmp(name, "manifest.json"))
		return c->writer[t];
	for (unsigned i = 0; i < c->nproc; i++) {
		snprintf(want, sizeof(want), "rank-%lu.shard", c->slot[i].rank);
		if (!strcmp(name, want))
			return true;
	}
	return false;
}

/* This node's files of a generation; the directory too once the last node's are gone. */
static void remove_gen(struct phx_ckpt *c, enum phx_ckpt_tier t, long step)
{
	char dir[4200], path[4600];
	struct dirent *e;
	DIR *d;

	ck_gen_dir(c, t, step, dir, sizeof(dir));
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!own_file(c, t, e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (unlink(path) < 0)
			phx_warn("cannot remove the old checkpoint file %s: %s", path,
				 strerror(errno));
	}
	closedir(d);
	/* Other nodes' files (a shared tier) keep it until they collect theirs. */
	rmdir(dir);
}

static void collect(struct phx_ckpt *c, enum phx_ckpt_tier t, long committed)
{
	long steps[1024], drop[1024];
	bool published[1024];
	size_t n = 0, nd;
	struct dirent *e;
	DIR *d = opendir(c->dir[t]);

	if (!d)
		return;
	while ((e = readdir(d)) && n < 1024) {
		long s = phx_ckpt_gen_parse(e->d_name);

		if (s >= 0)
			steps[n++] = s;
	}
	closedir(d);
	for (size_t i = 0; i < n; i++)
		published[i] = ck_published(c, t, steps[i], NULL);
	nd = phx_ckpt_gc_pick(steps, published, n, committed, c->keep, drop);
	for (size_t i = 0; i < nd; i++) {
		phx_debug("collecting generation %ld of the %s tier on %s", drop[i],
			  phx_ckpt_tier_name(t), c->node);
		remove_gen(c, t, drop[i]);
	}
}

static void publish(struct phx_ckpt *c, struct ck_job *j)
{
	char dir[4200], path[4600], latest[64];
	int rc;

	if (!j->manifest)
		goto gc;
	ck_gen_dir(c, j->tier, j->step, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	rc = phx_file_write_atomic(path, j->manifest, strlen(j->manifest), 0644);
	if (!rc) {
		/* The pointer after the manifest: it never names an unpublished generation. */
		phx_ckpt_gen_name(j->step, latest, sizeof(latest));
		strcat(latest, "\n");
		snprintf(path, sizeof(path), "%s/latest", c->dir[j->tier]);
		rc = phx_file_write_atomic(path, latest, strlen(latest), 0644);
	}
	j->rc = rc;
	if (rc) {
		phx_error("cannot publish generation %ld in %s: %s; it stays unpublished there",
			  j->step, path, strerror(-rc));
		return;
	}
gc:
	/* A generation a slower node has not replaced yet may be the only common one. */
	collect(c, j->tier, j->gc_bound < j->step ? j->gc_bound : j->step);
}

static void *io_main(void *arg)
{
	struct ck_lane *l = arg;
	struct phx_ckpt *c = l->ckpt;
	uint64_t one = 1;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct ck_job *j;
		ssize_t n;

		while (!l->todo && !c->io_stop)
			pthread_cond_wait(&c->cv, &c->mu);
		if (!l->todo)
			break;
		j = l->todo;
		l->todo = j->next;
		if (!l->todo)
			l->tail = &l->todo;
		pthread_mutex_unlock(&c->mu);
		if (j->kind == J_PERSIST)
			persist(c, j);
		else
			publish(c, j);
		pthread_mutex_lock(&c->mu);
		j->next = c->done;
		c->done = j;
		n = write(c->ev_fd, &one, sizeof(one));
		(void)n;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int ck_io_start(struct phx_ckpt *c)
{
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->done = NULL;
	for (size_t i = 0; i < CK_LANES; i++) {
		struct ck_lane *l = &c->lane[i];

		l->ckpt = c;
		l->todo = NULL;
		l->tail = &l->todo;
		if (pthread_create(&l->thread, NULL, io_main, l))
			return -1;
		l->started = true;
	}
	return 0;
}

/* Finishes what is queued: a generation being written is completed, not torn. */
void ck_io_stop(struct phx_ckpt *c)
{
	/* Lanes start in order: none started when the first did not. */
	if (!c->lane[0].started)
		return;
	pthread_mutex_lock(&c->mu);
	c->io_stop = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	for (size_t i = 0; i < CK_LANES; i++) {
		if (c->lane[i].started)
			pthread_join(c->lane[i].thread, NULL);
		c->lane[i].started = false;
	}
	while (c->done) {
		struct ck_job *j = c->done;

		c->done = j->next;
		free(j->manifest);
		free(j);
	}
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
}

void ck_io_submit(struct phx_ckpt *c, struct ck_job *j)
{
	struct ck_lane *l = &c->lane[j->kind == J_PUBLISH];

	j->next = NULL;
	pthread_mutex_lock(&c->mu);
	*l->tail = j;
	l->tail = &j->next;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

struct ck_job *ck_io_take_done(struct phx_ckpt *c)
{
	struct ck_job *list;
	uint64_t v;
	ssize_t n = read(c->ev_fd, &v, sizeof(v));

	(void)n;
	pthread_mutex_lock(&c->mu);
	list = c->done;
	c->done = NULL;
	pthread_mutex_unlock(&c->mu);
	return list;
}

/* The shard's coordinates in the job's layout and its kind, where the layout resolved. */
static int place_shard(const struct phx_ckpt *c, unsigned long rank, bool sharded,
		       struct phx_manifest_shard *ms, char *err, size_t errlen)
{
	unsigned long coord[PHX_DIM_COUNT];
	uint32_t c32[PHX_MANIFEST_DIMS];

	_Static_assert(PHX_DIM_COUNT == PHX_MANIFEST_DIMS, "the manifest's coordinates");
	if (!c->lay.world)
		return 0;
	phx_layout_coords(&c->lay, rank, coord);
	for (int d = 0; d < PHX_DIM_COUNT; d++)
		c32[d] = (uint32_t)coord[d];
	return phx_manifest_shard_place(ms, c32, sharded ? PHX_STATE_SHARDED : PHX_STATE_REPLICATED,
					err, errlen);
}

char *ck_manifest_build(const struct phx_ckpt *c, const struct ck_gen *g, enum phx_ckpt_tier t,
			char *const *hosts)
{
	char err[512], hex[PHX_DIGEST_HEX_LEN], gen[32], path[4400];
	struct phx_manifest m;
	char *text = NULL;

	phx_ckpt_gen_name(g->step, gen, sizeof(gen));
	/* Generations count from 1; a save at step 0 (on request) is generation 1. */
	if (phx_manifest_init(&m, c->job_id, ck_gen_of(g->step), (uint64_t)g->step, c->layout,
			      (uint32_t)c->world, err, sizeof(err)) < 0)
		goto fail;
	for (unsigned long r = 0; r < c->world; r++) {
		const struct phx_ckpt_shard *s = &g->all[r];
		unsigned agent = g->agent_of[r];
		const char *dir = t == PHX_TIER_LOCAL ? c->node_dir[agent] : c->dir[t];

		phx_digest_hex(c->algo, s->digest, hex);
		snprintf(path, sizeof(path), "%s/%s/rank-%lu.shard", dir, gen, r);
		if (phx_manifest_shard_set(&m, (uint32_t)r, hosts[agent], s->bytes,
					   phx_digest_name(c->algo), hex, err, sizeof(err)) < 0 ||
		    phx_manifest_shard_add_location(&m.shards[r], phx_ckpt_tier_name(t), path, err,
						    sizeof(err)) < 0 ||
		    place_shard(c, r, s->sharded, &m.shards[r], err, sizeof(err)) < 0)
			goto fail_free;
	}
	text = phx_manifest_to_json(&m, err, sizeof(err));
	if (!text)
		goto fail_free;
	phx_manifest_free(&m);
	return text;
fail_free:
	phx_manifest_free(&m);
fail:
	phx_error("cannot build the manifest of generation %ld: %s", g->step, err);
	return NULL;
}

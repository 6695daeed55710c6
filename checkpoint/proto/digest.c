/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <xxhash.h>

#include "checkpoint/proto/digest.h"
#include "common/hex.h"

const char *phx_digest_name(enum phx_digest_algo algo)
{
	return algo == PHX_DIGEST_SHA256 ? "sha256" : "xxh3-128";
}

int phx_digest_parse(const char *name, enum phx_digest_algo *algo)
{
	if (!strcmp(name, "sha256"))
		*algo = PHX_DIGEST_SHA256;
	else if (!strcmp(name, "xxh3-128") || !strcmp(name, "xxh3"))
		*algo = PHX_DIGEST_XXH3;
	else
		return -1;
	return 0;
}

size_t phx_digest_len(enum phx_digest_algo algo)
{
	return algo == PHX_DIGEST_SHA256 ? 32 : 16;
}

void phx_digest_feed_init(struct phx_digest_feed *f)
{
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	f->ready = 0;
	f->failed = 0;
}

void phx_digest_feed_advance(struct phx_digest_feed *f, size_t ready, int failed)
{
	pthread_mutex_lock(&f->mu);
	f->ready = ready;
	f->failed |= failed;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

void phx_digest_feed_destroy(struct phx_digest_feed *f)
{
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
}

/* One hash of a contiguous piece, into out (the algorithm's length). */
static int hash_once(enum phx_digest_algo algo, const void *p, size_t n, uint8_t *out)
{
	unsigned len = 0;

	if (algo == PHX_DIGEST_XXH3) {
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
		memcpy(out, c.digest, sizeof(c.digest));
		return 0;
	}
	return EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) == 1 ? 0 : -1;
}

/* A chunk hashed piece by piece as read() brings it in: the same hash as hash_once. */
static int hash_reading(enum phx_digest_algo algo, phx_digest_reader read, void *arg, size_t off,
			size_t n, uint8_t *dst, int *err, uint8_t *out)
{
	XXH3_state_t *x = algo == PHX_DIGEST_XXH3 ? XXH3_createState() : NULL;
	EVP_MD_CTX *s = algo == PHX_DIGEST_SHA256 ? EVP_MD_CTX_new() : NULL;
	int rc = -1;

	*err = -EIO;
	if (x ? XXH3_128bits_reset(x) != XXH_OK
	      : !s || EVP_DigestInit_ex(s, EVP_sha256(), NULL) != 1)
		goto out;
	for (size_t done = 0; done < n;) {
		size_t k = n - done < PHX_DIGEST_PIECE ? n - done : PHX_DIGEST_PIECE;
		int r = read(arg, off + done, k, dst + done);

		if (r < 0) {
			*err = r;
			goto out;
		}
		if (x ? XXH3_128bits_update(x, dst + done, k) != XXH_OK
		      : EVP_DigestUpdate(s, dst + done, k) != 1)
			goto out;
		done += k;
	}
	if (x) {
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(x));
		memcpy(out, c.digest, sizeof(c.digest));
	} else if (EVP_DigestFinal_ex(s, out, NULL) != 1) {
		goto out;
	}
	*err = 0;
	rc = 0;
out:
	if (x)
		XXH3_freeState(x);
	if (s)
		EVP_MD_CTX_free(s);
	return rc;
}

struct pool {
	enum phx_digest_algo algo;
	const uint8_t *data;
	size_t len, nchunks, hlen;
	struct phx_digest_feed *feed;
	phx_digest_reader read; /* NULL: the data is there (or fed) */
	void *read_arg;
	uint8_t *hashes; /* nchunks * hlen */
	pthread_mutex_t mu;
	size_t next;
	int failed, err;
};

static int wait_ready(struct phx_digest_feed *f, size_t end)
{
	int failed;

	if (!f)
		return 0;
	pthread_mutex_lock(&f->mu);
	while (f->ready < end && !f->failed)
		pthread_cond_wait(&f->cv, &f->mu);
	failed = f->failed;
	pthread_mutex_unlock(&f->mu);
	return failed ? -1 : 0;
}

static void *hasher(void *arg)
{
	struct pool *p = arg;

	for (;;) {
		size_t i, off, n;

		pthread_mutex_lock(&p->mu);
		i = p->failed ? p->nchunks : p->next++;
		pthread_mutex_unlock(&p->mu);
		if (i >= p->nchunks)
			return NULL;
		off = i * (size_t)PHX_DIGEST_CHUNK;
		n = p->len - off < PHX_DIGEST_CHUNK ? p->len - off : PHX_DIGEST_CHUNK;
		if (p->read) {
			int err;

			if (hash_reading(p->algo, p->read, p->read_arg, off, n,
					 (uint8_t *)p->data + off, &err,
					 p->hashes + i * p->hlen) < 0) {
				pthread_mutex_lock(&p->mu);
				if (!p->failed)
					p->err = err;
				p->failed = 1;
				pthread_mutex_unlock(&p->mu);
				return NULL;
			}
			continue;
		}
		if (wait_ready(p->feed, off + n) < 0 ||
		    hash_once(p->algo, p->data + off, n, p->hashes + i * p->hlen) < 0) {
			pthread_mutex_lock(&p->mu);
			p->failed = 1;
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
	}
}

static unsigned pick_threads(unsigned nthreads, size_t nchunks)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (!nthreads)
		nthreads = cpus > 0 ? (unsigned)cpus : 1;
	if (nthreads > 64)
		nthreads = 64;
	return nchunks < nthreads ? (unsigned)(nchunks ? nchunks : 1) : nthreads;
}

static int finish(struct pool *p, uint8_t out[PHX_DIGEST_MAX])
{
	uint8_t *tail = p->hashes + p->nchunks * p->hlen;
	uint64_t len = p->len;

	for (int i = 0; i < 8; i++)
		tail[i] = (uint8_t)(len >> (8 * i));
	memset(out, 0, PHX_DIGEST_MAX);
	return hash_once(p->algo, p->hashes, p->nchunks * p->hlen + 8, out);
}

static int run_pool(struct pool *pp, unsigned nthreads, uint8_t out[PHX_DIGEST_MAX]);

int phx_digest_compute(enum phx_digest_algo algo, const void *data, size_t len, unsigned nthreads,
		       struct phx_digest_feed *feed, uint8_t out[PHX_DIGEST_MAX])
{
	struct pool p = { .algo = algo, .data = data, .len = len, .feed = feed };

	return run_pool(&p, nthreads, out);
}

int phx_digest_read(enum phx_digest_algo algo, uint8_t *data, size_t len, unsigned nthreads,
		    phx_digest_reader read, void *arg, int *err, uint8_t out[PHX_DIGEST_MAX])
{
	struct pool p = { .algo = algo, .data = data, .len = len, .read = read, .read_arg = arg };
	int rc = run_pool(&p, nthreads, out);

	*err = rc < 0 ? (p.err ? p.err : -EIO) : 0;
	return rc;
}

static int run_pool(struct pool *pp, unsigned nthreads, uint8_t out[PHX_DIGEST_MAX])
{
	struct pool p = *pp;
	pthread_t tid[64];
	unsigned n, started = 0;
	int rc = -1;

	p.hlen = phx_digest_len(p.algo);
	p.nchunks = (p.len + PHX_DIGEST_CHUNK - 1) / PHX_DIGEST_CHUNK;
	p.hashes = malloc(p.nchunks * p.hlen + 8);
	if (!p.hashes)
		return -1;
	pthread_mutex_init(&p.mu, NULL);
	n = pick_threads(nthreads, p.nchunks);
	/* The calling thread is one of the hashers. */
	for (; started + 1 < n; started++) {
		if (pthread_create(&tid[started], NULL, hasher, &p))
			break;
	}
	hasher(&p);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (!p.failed)
		rc = finish(&p, out);
	pp->err = p.err;
	pthread_mutex_destroy(&p.mu);
	free(p.hashes);
	return rc;
}

void phx_digest_hex(enum phx_digest_algo algo, const uint8_t *d, char *out)
{
	phx_hex_encode(d, phx_digest_len(algo), out);
}

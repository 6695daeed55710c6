/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shard digests computed in parallel chunks. The buffer is cut into
 * PHX_DIGEST_CHUNK pieces, each hashed on its own by a pool of threads;
 * the digest is the hash of the chunk hashes followed by the length
 * (64-bit little-endian), so it does not depend on the thread count.
 * Algorithms: SHA-256 (OpenSSL EVP) and XXH3-128 (xxHash), a fast
 * non-cryptographic hash that detects corruption, not tampering.
 */
#ifndef PHX_DIGEST_H
#define PHX_DIGEST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define PHX_DIGEST_CHUNK (16u << 20)
#define PHX_DIGEST_MAX 32 /* bytes of the longest digest */
#define PHX_DIGEST_HEX_LEN (2 * PHX_DIGEST_MAX + 1)

enum phx_digest_algo { PHX_DIGEST_XXH3 = 0, PHX_DIGEST_SHA256 };

const char *phx_digest_name(enum phx_digest_algo algo);
int phx_digest_parse(const char *name, enum phx_digest_algo *algo);
size_t phx_digest_len(enum phx_digest_algo algo);

/*
 * A producer that fills the buffer while it is hashed (a file being read
 * in): hashers wait until `ready` covers their chunk. failed: the producer
 * gave up; the digest call returns -1.
 */
struct phx_digest_feed {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t ready;
	int failed;
};

void phx_digest_feed_init(struct phx_digest_feed *f);
void phx_digest_feed_advance(struct phx_digest_feed *f, size_t ready, int failed);
void phx_digest_feed_destroy(struct phx_digest_feed *f);

/*
 * The digest of data[0..len) with up to nthreads threads (0: one per
 * online CPU); feed NULL when the data is all there. 0 or -1 (a thread or
 * the hash library failed, or the feed failed).
 */
int phx_digest_compute(enum phx_digest_algo algo, const void *data, size_t len, unsigned nthreads,
		       struct phx_digest_feed *feed, uint8_t out[PHX_DIGEST_MAX]);

/*
 * The same digest of len bytes that the hashers bring in themselves (a
 * file being restored): each takes a chunk, has read() fill it into
 * data[off..off + n) in pieces of PHX_DIGEST_PIECE, and hashes each piece
 * while it is still in the CPU's cache, so verifying costs little beyond
 * the read. Chunks are read in parallel by up to nthreads threads (0: one
 * per online CPU). read returns 0 or a negated errno; 0, or -1 with *err
 * the first read's error (or -EIO when the hash library failed).
 */
#define PHX_DIGEST_PIECE (1u << 20)
typedef int (*phx_digest_reader)(void *arg, size_t off, size_t n, uint8_t *dst);
int phx_digest_read(enum phx_digest_algo algo, uint8_t *data, size_t len, unsigned nthreads,
		    phx_digest_reader read, void *arg, int *err, uint8_t out[PHX_DIGEST_MAX]);

/* Lower-case hex of the algorithm's digest length; out holds PHX_DIGEST_HEX_LEN. */
void phx_digest_hex(enum phx_digest_algo algo, const uint8_t *d, char *out);

#endif

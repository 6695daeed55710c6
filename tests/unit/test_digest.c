/* SPDX-License-Identifier: Apache-2.0 */
/* Parallel chunked digests: independent of the thread count and of a feed, sensitive to a bit. */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "checkpoint/proto/digest.h"
#include "tests/rng.h"

#define LEN (3 * PHX_DIGEST_CHUNK + 12345)

static uint8_t *make_data(void)
{
	uint8_t *d = malloc(LEN);
	uint64_t s = 42;

	assert_non_null(d);
	for (size_t i = 0; i < LEN; i++)
		d[i] = (uint8_t)phx_xorshift64s(&s);
	return d;
}

static void same_for_threads(enum phx_digest_algo algo)
{
	uint8_t *d = make_data(), a[PHX_DIGEST_MAX], b[PHX_DIGEST_MAX];

	assert_int_equal(phx_digest_compute(algo, d, LEN, 1, NULL, a), 0);
	for (unsigned t = 2; t <= 6; t++) {
		assert_int_equal(phx_digest_compute(algo, d, LEN, t, NULL, b), 0);
		assert_memory_equal(a, b, PHX_DIGEST_MAX);
	}
	/* One flipped bit anywhere changes it; so does the length. */
	d[LEN - 1] ^= 1;
	assert_int_equal(phx_digest_compute(algo, d, LEN, 4, NULL, b), 0);
	assert_memory_not_equal(a, b, phx_digest_len(algo));
	d[LEN - 1] ^= 1;
	assert_int_equal(phx_digest_compute(algo, d, LEN - 1, 4, NULL, b), 0);
	assert_memory_not_equal(a, b, phx_digest_len(algo));
	free(d);
}

static void test_threads(void **state)
{
	(void)state;
	same_for_threads(PHX_DIGEST_XXH3);
	same_for_threads(PHX_DIGEST_SHA256);
}

/* The tree: SHA-256 over the chunk hashes and the little-endian length. */
static void test_sha256_tree(void **state)
{
	static const char abc[] = "abc";
	uint8_t inner[40], want[32], got[PHX_DIGEST_MAX];
	unsigned len = 0;

	(void)state;
	assert_int_equal(EVP_Digest(abc, 3, inner, &len, EVP_sha256(), NULL), 1);
	memset(inner + 32, 0, 8);
	inner[32] = 3;
	assert_int_equal(EVP_Digest(inner, 40, want, &len, EVP_sha256(), NULL), 1);
	assert_int_equal(phx_digest_compute(PHX_DIGEST_SHA256, abc, 3, 0, NULL, got), 0);
	assert_memory_equal(got, want, 32);
}

struct producer {
	struct phx_digest_feed *feed;
	const uint8_t *src;
	uint8_t *dst;
	int fail;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	size_t step = 1 << 20;

	for (size_t off = 0; off < LEN; off += step) {
		size_t n = LEN - off < step ? LEN - off : step;

		if (p->fail && off > LEN / 2) {
			phx_digest_feed_advance(p->feed, off, 1);
			return NULL;
		}
		memcpy(p->dst + off, p->src + off, n);
		phx_digest_feed_advance(p->feed, off + n, 0);
	}
	return NULL;
}

static void test_feed(void **state)
{
	uint8_t *src = make_data(), *dst = calloc(1, LEN), a[PHX_DIGEST_MAX], b[PHX_DIGEST_MAX];
	struct phx_digest_feed feed;
	struct producer p = { &feed, src, dst, 0 };
	pthread_t tid;

	(void)state;
	assert_int_equal(phx_digest_compute(PHX_DIGEST_XXH3, src, LEN, 3, NULL, a), 0);
	phx_digest_feed_init(&feed);
	assert_int_equal(pthread_create(&tid, NULL, produce, &p), 0);
	assert_int_equal(phx_digest_compute(PHX_DIGEST_XXH3, dst, LEN, 3, &feed, b), 0);
	pthread_join(tid, NULL);
	phx_digest_feed_destroy(&feed);
	assert_memory_equal(a, b, PHX_DIGEST_MAX);
	/* A producer that fails makes the digest fail, not hang. */
	phx_digest_feed_init(&feed);
	p.fail = 1;
	assert_int_equal(pthread_create(&tid, NULL, produce, &p), 0);
	assert_int_equal(phx_digest_compute(PHX_DIGEST_XXH3, dst, LEN, 3, &feed, b), -1);
	pthread_join(tid, NULL);
	phx_digest_feed_destroy(&feed);
	free(src);
	free(dst);
}

struct source {
	const uint8_t *src;
	size_t fail_at; /* a read covering this offset fails; SIZE_MAX: none */
};

static int read_source(void *arg, size_t off, size_t n, uint8_t *dst)
{
	const struct source *s = arg;

	if (s->fail_at >= off && s->fail_at < off + n)
		return -5;
	assert_true(n <= PHX_DIGEST_PIECE);
	memcpy(dst, s->src + off, n);
	return 0;
}

/* Hashers that read their own chunks give the same digest and the same bytes. */
static void test_read(void **state)
{
	uint8_t *src = make_data(), *dst = calloc(1, LEN), a[PHX_DIGEST_MAX], b[PHX_DIGEST_MAX];
	struct source s = { src, SIZE_MAX };
	int err;

	(void)state;
	for (int algo = PHX_DIGEST_XXH3; algo <= PHX_DIGEST_SHA256; algo++) {
		for (unsigned t = 1; t <= 4; t++) {
			memset(dst, 0, LEN);
			assert_int_equal(phx_digest_compute(algo, src, LEN, 1, NULL, a), 0);
			assert_int_equal(
				phx_digest_read(algo, dst, LEN, t, read_source, &s, &err, b), 0);
			assert_int_equal(err, 0);
			assert_memory_equal(a, b, PHX_DIGEST_MAX);
			assert_memory_equal(src, dst, LEN);
		}
	}
	/* A failed read fails the digest with the read's error. */
	s.fail_at = 2 * PHX_DIGEST_CHUNK + 7;
	assert_int_equal(phx_digest_read(PHX_DIGEST_XXH3, dst, LEN, 3, read_source, &s, &err, b),
			 -1);
	assert_int_equal(err, -5);
	free(src);
	free(dst);
}

static void test_names(void **state)
{
	enum phx_digest_algo a;
	char hex[PHX_DIGEST_HEX_LEN];
	const uint8_t d[32] = { 0x01, 0xab };

	(void)state;
	assert_int_equal(phx_digest_parse("sha256", &a), 0);
	assert_int_equal(a, PHX_DIGEST_SHA256);
	assert_int_equal(phx_digest_parse("xxh3-128", &a), 0);
	assert_int_equal(a, PHX_DIGEST_XXH3);
	assert_int_equal(phx_digest_parse("crc32", &a), -1);
	phx_digest_hex(PHX_DIGEST_XXH3, d, hex);
	assert_string_equal(hex, "01ab0000000000000000000000000000");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads), cmocka_unit_test(test_sha256_tree),
		cmocka_unit_test(test_feed),	cmocka_unit_test(test_read),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

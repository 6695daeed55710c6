/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A shard digested the way the agents do (checkpoint/proto/digest.h, into a manifest
 * entry) passes the file check that verify uses, for both algorithms and
 * across the chunk boundary; a flipped byte or a wrong size is caught.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "checkpoint/proto/digest.h"
#include "checkpoint/proto/digest_file.h"
#include "tests/rng.h"
#include "tests/unit/scratch.h"

#define LEN (PHX_DIGEST_CHUNK + 4321) /* two chunks: the tree, not one plain hash */

static void write_file(const char *path, const uint8_t *d, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(d, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* The agent's side: digest the buffer and record it in a manifest entry. */
static void agent_digest(enum phx_digest_algo algo, const uint8_t *d, size_t len,
			 struct phx_manifest *m)
{
	uint8_t dig[PHX_DIGEST_MAX];
	char hex[PHX_DIGEST_HEX_LEN], err[256];

	assert_int_equal(phx_digest_compute(algo, d, len, 4, NULL, dig), 0);
	phx_digest_hex(algo, dig, hex);
	assert_int_equal(phx_manifest_init(m, 7, 1, 100, "", 1, err, sizeof(err)), 0);
	assert_int_equal(phx_manifest_shard_set(m, 0, "n01", len, phx_digest_name(algo), hex, err,
						sizeof(err)),
			 0);
}

static int check(const struct phx_manifest *m, const char *path, char *err, size_t errlen)
{
	const struct phx_manifest_shard *s = &m->shards[0];

	return phx_digest_file_check(path, s->bytes, s->digest.alg, s->digest.hex, 1, err, errlen);
}

static void round_trip(enum phx_digest_algo algo)
{
	char dir[256], path[300], err[512];
	struct phx_manifest m;
	uint8_t *d = malloc(LEN);
	uint64_t seed = 1234 + algo;

	assert_non_null(d);
	for (size_t i = 0; i < LEN; i++)
		d[i] = (uint8_t)phx_xorshift64s(&seed);
	assert_int_equal(phx_scratch_make(dir, sizeof(dir), "digest-file"), 0);
	snprintf(path, sizeof(path), "%s/shard", dir);
	write_file(path, d, LEN);
	agent_digest(algo, d, LEN, &m);

	assert_int_equal(check(&m, path, err, sizeof(err)), PHX_DIGEST_FILE_OK);
	/* More threads than chunks or one: the same answer. */
	assert_int_equal(phx_digest_file_check(path, LEN, m.shards[0].digest.alg,
					       m.shards[0].digest.hex, 8, err, sizeof(err)),
			 PHX_DIGEST_FILE_OK);

	d[LEN - 3] ^= 0x10; /* in the second chunk */
	write_file(path, d, LEN);
	assert_int_equal(check(&m, path, err, sizeof(err)), PHX_DIGEST_FILE_BAD);
	assert_non_null(strstr(err, "does not match its"));
	assert_non_null(strstr(err, phx_digest_name(algo)));
	d[LEN - 3] ^= 0x10;
	d[5] ^= 0x01; /* in the first */
	write_file(path, d, LEN);
	assert_int_equal(check(&m, path, err, sizeof(err)), PHX_DIGEST_FILE_BAD);

	d[5] ^= 0x01;
	write_file(path, d, LEN - 1);
	assert_int_equal(check(&m, path, err, sizeof(err)), PHX_DIGEST_FILE_BAD);
	assert_non_null(strstr(err, "its manifest says"));

	snprintf(path, sizeof(path), "%s/absent", dir);
	assert_int_equal(check(&m, path, err, sizeof(err)), PHX_DIGEST_FILE_UNREADABLE);
	assert_int_equal(check(&m, "n02:/dev/shm/x", err, sizeof(err)), PHX_DIGEST_FILE_UNREADABLE);

	phx_manifest_free(&m);
	assert_int_equal(phx_scratch_remove(dir), 0);
	free(d);
}

static void test_sha256(void **state)
{
	(void)state;
	round_trip(PHX_DIGEST_SHA256);
}

static void test_xxh3(void **state)
{
	(void)state;
	round_trip(PHX_DIGEST_XXH3);
}

/* A plain whole-file SHA-256 is not the shard digest: such a manifest fails. */
static void test_plain_sha256_is_not_the_digest(void **state)
{
	char dir[256], path[300], hex[65], err[512];
	unsigned char md[32];
	unsigned int mdlen = 0;
	uint8_t *d = calloc(1, LEN);

	(void)state;
	assert_non_null(d);
	assert_int_equal(phx_scratch_make(dir, sizeof(dir), "digest-file"), 0);
	snprintf(path, sizeof(path), "%s/shard", dir);
	write_file(path, d, LEN);
	assert_int_equal(EVP_Digest(d, LEN, md, &mdlen, EVP_sha256(), NULL), 1);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	assert_int_equal(phx_digest_file_check(path, LEN, "sha256", hex, 1, err, sizeof(err)),
			 PHX_DIGEST_FILE_BAD);
	assert_int_equal(phx_scratch_remove(dir), 0);
	free(d);
}

static void test_unknown_algorithm(void **state)
{
	char err[512];

	(void)state;
	assert_int_equal(
		phx_digest_file_check("/nonexistent", 1, "md5", "00112233", 1, err, sizeof(err)),
		PHX_DIGEST_FILE_UNKNOWN);
	assert_non_null(strstr(err, "digest algorithm \"md5\" is unknown"));
	assert_int_equal(
		phx_digest_file_check("/nonexistent", 1, "xxh3", "00112233", 1, err, sizeof(err)),
		PHX_DIGEST_FILE_UNKNOWN);
}

/*
 * A manifest may name anything: a FIFO (opening it would block), a device
 * (opening it can have side effects) or a link to a file its writer may
 * not read. None is opened; a good shard behind a link is not believed.
 */
static void test_only_regular_files(void **state)
{
	char dir[PATH_MAX], fifo[PATH_MAX + 16], link[PATH_MAX + 16], err[512];

	(void)state;
	assert_int_equal(phx_scratch_make(dir, sizeof(dir), "digest-file"), 0);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(phx_digest_file_check(fifo, 1, "sha256", "00", 1, err, sizeof(err)),
			 PHX_DIGEST_FILE_UNREADABLE);
	assert_non_null(strstr(err, "is not a regular file"));
	assert_int_equal(
		phx_digest_file_check("/dev/null", 0, "sha256", "00", 1, err, sizeof(err)),
		PHX_DIGEST_FILE_UNREADABLE);
	assert_non_null(strstr(err, "is not a regular file"));
	snprintf(link, sizeof(link), "%s/link", dir);
	assert_int_equal(symlink("/etc/hostname", link), 0);
	assert_int_equal(phx_digest_file_check(link, 1, "sha256", "00", 1, err, sizeof(err)),
			 PHX_DIGEST_FILE_UNREADABLE);
	assert_non_null(strstr(err, "is not a regular file"));
	assert_int_equal(phx_scratch_remove(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_xxh3),
		cmocka_unit_test(test_plain_sha256_is_not_the_digest),
		cmocka_unit_test(test_unknown_algorithm),
		cmocka_unit_test(test_only_regular_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

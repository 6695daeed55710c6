/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint/node/partner_io.h"
#include "tests/rng.h"

static const uint8_t secret[PHX_PARTNER_SECRET_BYTES] = "partner-io-test-secret-012345678";
static const struct phx_partner_limits lim = { .job_id = 9, .nranks = 4, .max_bytes = 64 << 20 };

struct sender {
	int fd;
	struct phx_partner_hdr hdr;
	const uint8_t *key;
	const void *data;
	size_t cut; /* send only this much of the shard, then close (0: all) */
	int rc;
};

static void *send_main(void *arg)
{
	struct sender *s = arg;
	uint8_t hdr[PHX_PARTNER_HDR_BYTES];

	if (!s->cut) {
		s->rc = phx_partner_send(s->fd, &s->hdr, s->key, s->data);
	} else {
		phx_partner_hdr_encode(&s->hdr, s->key, hdr);
		s->rc = send(s->fd, hdr, sizeof(hdr), MSG_NOSIGNAL) == sizeof(hdr) &&
					send(s->fd, s->data, s->cut, MSG_NOSIGNAL) ==
						(ssize_t)s->cut
				? 0
				: -1;
	}
	close(s->fd);
	return NULL;
}

static uint8_t *random_shard(size_t len, uint64_t seed)
{
	uint8_t *p = malloc(len);

	assert_non_null(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(phx_xorshift64s(&seed) >> 56);
	return p;
}

static struct phx_partner_hdr describe(const void *data, size_t len, uint32_t rank, uint64_t gen)
{
	struct phx_partner_hdr h = { .job_id = 9,
				     .rank = rank,
				     .step = gen * 100,
				     .gen = gen,
				     .bytes = len,
				     .algo = PHX_DIGEST_SHA256 };

	assert_int_equal(phx_digest_compute(h.algo, data, len, 2, NULL, h.digest), 0);
	return h;
}

/* Sends through a socket pair from a thread; returns what the receiver said. */
static int transfer(struct sender *s, struct phx_partner_copy *c, char *err, size_t errlen)
{
	pthread_t t;
	int sv[2], rc;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	s->fd = sv[0];
	assert_int_equal(pthread_create(&t, NULL, send_main, s), 0);
	rc = phx_partner_recv(sv[1], secret, &lim, 2, c, err, errlen);
	close(sv[1]);
	pthread_join(t, NULL);
	return rc;
}

static void test_copy_arrives_whole(void **state)
{
	size_t len = (20 << 20) + 12345; /* more than a socket buffer and a digest chunk */
	uint8_t *data = random_shard(len, 1);
	struct sender s = { .hdr = describe(data, len, 3, 7), .key = secret, .data = data };
	struct phx_partner_copy c;
	char err[256];

	(void)state;
	assert_int_equal(transfer(&s, &c, err, sizeof(err)), 0);
	assert_int_equal(s.rc, 0);
	assert_int_equal(c.hdr.rank, 3);
	assert_int_equal(c.hdr.gen, 7);
	assert_int_equal(c.hdr.bytes, len);
	assert_memory_equal(c.data, data, len);
	phx_partner_copy_free(&c);
	free(data);
}

static void test_corrupt_shard_refused(void **state)
{
	size_t len = 1 << 20;
	uint8_t *data = random_shard(len, 2);
	struct sender s = { .hdr = describe(data, len, 1, 2), .key = secret, .data = data };
	struct phx_partner_copy c;
	char err[256];

	(void)state;
	data[len / 2] ^= 1; /* after the digest was announced */
	assert_int_equal(transfer(&s, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "the sender announced"));
	assert_int_equal(c.fd, -1);
	free(data);
}

static void test_other_secret_refused(void **state)
{
	static const uint8_t other[PHX_PARTNER_SECRET_BYTES] = "another-job-secret";
	uint8_t data[64] = { 1, 2, 3 };
	struct sender s = { .hdr = describe(data, sizeof(data), 0, 1), .key = other, .data = data };
	struct phx_partner_copy c;
	char err[256];

	(void)state;
	assert_int_equal(transfer(&s, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "authentication failed"));
}

static void test_truncated_refused(void **state)
{
	size_t len = 300000;
	uint8_t *data = random_shard(len, 3);
	struct sender s = {
		.hdr = describe(data, len, 2, 5), .key = secret, .data = data, .cut = 1000
	};
	struct phx_partner_copy c;
	char err[256];

	(void)state;
	assert_int_equal(transfer(&s, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ended before its 300000 bytes"));
	free(data);
}

static void test_closed_before_header(void **state)
{
	struct phx_partner_copy c;
	char err[256];
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[0]);
	assert_int_equal(phx_partner_recv(sv[1], secret, &lim, 1, &c, err, sizeof(err)), 1);
	close(sv[1]);
}

static void put_gen(struct phx_partner_store *st, uint32_t rank, uint64_t gen, int kept)
{
	uint8_t data[16];
	struct sender s;
	struct phx_partner_copy c;
	char err[256];

	memset(data, (int)gen, sizeof(data));
	s = (struct sender){ .hdr = describe(data, sizeof(data), rank, gen),
			     .key = secret,
			     .data = data };
	assert_int_equal(transfer(&s, &c, err, sizeof(err)), 0);
	assert_int_equal(phx_partner_store_put(st, &c), kept);
	assert_int_equal(c.fd, -1);
}

static void test_store_keeps_two_newest(void **state)
{
	struct phx_partner_store st;
	uint64_t gen = 0;

	(void)state;
	assert_int_equal(phx_partner_store_init(&st, 4), 0);
	assert_int_equal(phx_partner_store_newest(&st, 1, &gen), 0);
	put_gen(&st, 1, 1, 1);
	put_gen(&st, 1, 2, 1);
	put_gen(&st, 1, 3, 1);
	assert_int_equal(phx_partner_store_newest(&st, 1, &gen), 1);
	assert_int_equal(gen, 3);
	assert_null(phx_partner_store_get(&st, 1, 1));
	assert_non_null(phx_partner_store_get(&st, 1, 2));
	assert_int_equal(((const uint8_t *)phx_partner_store_get(&st, 1, 3)->data)[0], 3);
	put_gen(&st, 1, 1, 0); /* older than both */
	put_gen(&st, 1, 3, 0); /* already held */
	put_gen(&st, 0, 5, 1); /* ranks are kept apart */
	assert_int_equal(phx_partner_store_newest(&st, 1, &gen), 1);
	assert_int_equal(gen, 3);
	assert_int_equal(phx_partner_store_newest(&st, 2, &gen), 0);
	phx_partner_store_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_arrives_whole),
		cmocka_unit_test(test_corrupt_shard_refused),
		cmocka_unit_test(test_other_secret_refused),
		cmocka_unit_test(test_truncated_refused),
		cmocka_unit_test(test_closed_before_header),
		cmocka_unit_test(test_store_keeps_two_newest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

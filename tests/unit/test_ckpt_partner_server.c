/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint/node/partner_server.h"
#include "common/file.h"
#include "tests/unit/scratch.h"

static const char token[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

static void test_secret_from_token(void **state)
{
	uint8_t a[PHX_PARTNER_SECRET_BYTES], b[PHX_PARTNER_SECRET_BYTES];
	char other[sizeof(token)];

	(void)state;
	assert_int_equal(phx_partner_secret_from_token(token, a), 0);
	assert_int_equal(phx_partner_secret_from_token(token, b), 0);
	assert_memory_equal(a, b, sizeof(a));
	memcpy(other, token, sizeof(token));
	other[0] = '1';
	assert_int_equal(phx_partner_secret_from_token(other, b), 0);
	assert_memory_not_equal(a, b, sizeof(a));
	assert_int_equal(phx_partner_secret_from_token("abc", b), -1);
	other[5] = 'G';
	assert_int_equal(phx_partner_secret_from_token(other, b), -1);
	assert_int_equal(phx_partner_secret_from_token(NULL, b), -1);
}

static void start_silent_ms(struct phx_partner_server *s, const char *dir, int timeout_ms)
{
	char err[512];

	memset(s, 0, sizeof(*s));
	assert_int_equal(phx_partner_secret_from_token(token, s->secret), 0);
	s->lim = (struct phx_partner_limits){ .job_id = 5, .nranks = 4, .max_bytes = 1 << 20 };
	s->digest_threads = 1;
	s->timeout_ms = timeout_ms;
	s->disk_keep = 3;
	snprintf(s->dir, sizeof(s->dir), "%s", dir ? dir : "");
	if (phx_partner_server_start(s, "127.0.0.1", 0, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_not_equal(s->port, 0);
}

static void start(struct phx_partner_server *s, const char *dir)
{
	start_silent_ms(s, dir, 5000);
}

/* The server thread counts what it took; wait for it without a clock. */
static void wait_for(struct phx_partner_server *s, unsigned long received, unsigned long refused)
{
	for (;;) {
		int done;

		pthread_mutex_lock(&s->mu);
		done = s->received >= received && s->refused >= refused;
		pthread_mutex_unlock(&s->mu);
		if (done)
			return;
		usleep(1000);
	}
}

/* A connection to the server s from 127.0.0.1. */
static int connect_to(const struct phx_partner_server *s)
{
	char err[512];
	int fd = phx_partner_connect("127.0.0.1", s->port, 5000, err, sizeof(err));

	if (fd < 0)
		fail_msg("%s", err);
	return fd;
}

/* Rank's copy of generation gen, its header describing data. */
static void make_copy(uint32_t rank, uint64_t gen, struct phx_partner_hdr *h, uint8_t *data,
		      size_t len)
{
	*h = (struct phx_partner_hdr){ .job_id = 5,
				       .rank = rank,
				       .step = gen * 10,
				       .gen = gen,
				       .bytes = len,
				       .algo = PHX_DIGEST_XXH3 };
	memset(data, (int)(rank * 16 + gen), len);
	assert_int_equal(phx_digest_compute(h->algo, data, len, 1, NULL, h->digest), 0);
}

/* The copy on fd as it is, welcomed or not. */
static void send_gen(int fd, const uint8_t *secret, uint32_t rank, uint64_t gen)
{
	struct phx_partner_hdr h;
	uint8_t data[3000];

	make_copy(rank, gen, &h, data, sizeof(data));
	assert_int_equal(phx_partner_send(fd, &h, secret, data), 0);
}

/* A sender's connection opened as the agents open one (phx_partner_open), with the copy. */
static int open_gen(const struct phx_partner_server *s, uint32_t rank, uint64_t gen)
{
	uint8_t data[3000], hdr[PHX_PARTNER_HDR_BYTES];
	struct phx_partner_hdr h;
	char err[512];
	int fd;

	make_copy(rank, gen, &h, data, sizeof(data));
	assert_int_equal(phx_partner_hdr_encode(&h, s->secret, hdr), 0);
	fd = phx_partner_open("127.0.0.1", s->port, 5000, hdr, err, sizeof(err));
	if (fd < 0)
		fail_msg("%s", err);
	assert_int_equal(phx_send_all(fd, data, sizeof(data)), 0);
	return fd;
}

static int exists(const char *dir, const char *name)
{
	char path[4400];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

/*
 * Copies arrive, are held two per rank in memory and disk_keep (3) on disk;
 * the disk copy serves a later server.
 */
static void test_receive_keep_and_serve_again(void **state)
{
	struct phx_partner_server s, next;
	char dir[4096], path[4400], err[512];
	uint64_t gen = 0;
	int fd;

	(void)state;
	assert_int_equal(phx_scratch_make(dir, sizeof(dir), "partner"), 0);
	start(&s, dir);
	fd = open_gen(&s, 1, 1);
	for (uint64_t g = 2; g <= 4; g++)
		send_gen(fd, s.secret, 1, g);
	send_gen(fd, s.secret, 0, 7);
	close(fd);
	wait_for(&s, 5, 0);
	assert_int_equal(phx_partner_server_newest(&s, 1, &gen), 1);
	assert_int_equal(gen, 4);
	/* In memory: the newest two. */
	pthread_mutex_lock(&s.mu);
	assert_null(phx_partner_store_get(&s.store, 1, 2));
	assert_non_null(phx_partner_store_get(&s.store, 1, 3));
	pthread_mutex_unlock(&s.mu);
	assert_int_equal(phx_partner_server_newest(&s, 0, &gen), 1);
	assert_int_equal(gen, 7);
	assert_int_equal(phx_partner_server_newest(&s, 2, &gen), 0);
	assert_false(exists(dir, "rank-1/gen-000000000001.copy"));
	assert_true(exists(dir, "rank-1/gen-000000000002.copy"));
	assert_true(exists(dir, "rank-1/gen-000000000003.copy"));
	assert_true(exists(dir, "rank-1/gen-000000000004.copy"));
	assert_true(exists(dir, "rank-0/gen-000000000007.copy"));
	phx_partner_server_stop(&s);

	/* The next step's agent on this node sends the files as they are, on one connection. */
	start(&next, NULL);
	fd = -1;
	snprintf(path, sizeof(path), "%s/rank-1/gen-000000000002.copy", dir);
	assert_int_equal(
		phx_partner_send_file(&fd, "127.0.0.1", next.port, 5000, path, err, sizeof(err)),
		0);
	assert_true(fd >= 0);
	snprintf(path, sizeof(path), "%s/rank-1/gen-000000000003.copy", dir);
	assert_int_equal(
		phx_partner_send_file(&fd, "127.0.0.1", next.port, 5000, path, err, sizeof(err)),
		0);
	close(fd);
	wait_for(&next, 2, 0);
	assert_int_equal(phx_partner_server_newest(&next, 1, &gen), 1);
	assert_int_equal(gen, 3);
	pthread_mutex_lock(&next.mu);
	assert_non_null(phx_partner_store_get(&next.store, 1, 2));
	pthread_mutex_unlock(&next.mu);
	fd = -1;
	snprintf(path, sizeof(path), "%s/rank-1/gen-000000000001.copy", dir);
	assert_int_equal(
		phx_partner_send_file(&fd, "127.0.0.1", next.port, 5000, path, err, sizeof(err)),
		-1);
	assert_non_null(strstr(err, "cannot read"));
	assert_int_equal(fd, -1);
	phx_partner_server_stop(&next);
	assert_int_equal(phx_scratch_remove(dir), 0);
}

/*
 * A node died: the local tier's commits stopped at generation 2 while
 * copies of newer generations kept coming. Generation 2, the one a
 * relaunch restores, stays on disk past disk_keep (3) newer copies; the
 * older ones go, and it goes too once a newer generation is held.
 */
static void test_held_generation_outlives_newer_copies(void **state)
{
	struct phx_partner_server s;
	char dir[4096];
	int fd;

	(void)state;
	assert_int_equal(phx_scratch_make(dir, sizeof(dir), "partner"), 0);
	start(&s, dir);
	phx_partner_server_hold(&s, 2);
	fd = open_gen(&s, 1, 1);
	for (uint64_t g = 2; g <= 7; g++)
		send_gen(fd, s.secret, 1, g);
	wait_for(&s, 7, 0);
	assert_false(exists(dir, "rank-1/gen-000000000001.copy"));
	assert_true(exists(dir, "rank-1/gen-000000000002.copy"));
	assert_false(exists(dir, "rank-1/gen-000000000003.copy"));
	assert_false(exists(dir, "rank-1/gen-000000000004.copy"));
	for (uint64_t g = 5; g <= 7; g++) {
		char name[64];

		snprintf(name, sizeof(name), "rank-1/gen-%012llu.copy", (unsigned long long)g);
		assert_true(exists(dir, name));
	}
	phx_partner_server_hold(&s, 6);
	send_gen(fd, s.secret, 1, 8);
	close(fd);
	wait_for(&s, 8, 0);
	assert_false(exists(dir, "rank-1/gen-000000000002.copy"));
	assert_false(exists(dir, "rank-1/gen-000000000005.copy"));
	assert_true(exists(dir, "rank-1/gen-000000000006.copy"));
	assert_true(exists(dir, "rank-1/gen-000000000008.copy"));
	phx_partner_server_stop(&s);
	assert_int_equal(phx_scratch_remove(dir), 0);
}

/* Another job's sender is refused and leaves nothing behind. */
static void test_foreign_sender_refused(void **state)
{
	struct phx_partner_server s;
	uint8_t other[PHX_PARTNER_SECRET_BYTES] = { 9 }, hdr[PHX_PARTNER_HDR_BYTES];
	struct phx_partner_hdr h = { .job_id = 5, .rank = 1, .step = 10, .gen = 1, .bytes = 1 };
	char err[512];
	uint64_t gen;
	int fd;

	(void)state;
	start(&s, NULL);
	fd = connect_to(&s);
	send_gen(fd, other, 1, 1);
	close(fd);
	wait_for(&s, 0, 1);
	assert_int_equal(phx_partner_server_newest(&s, 1, &gen), 0);
	/* Opening with a foreign header: closed before a welcome, tried again, given up. */
	assert_int_equal(phx_partner_hdr_encode(&h, other, hdr), 0);
	assert_int_equal(phx_partner_open("127.0.0.1", s.port, 5000, hdr, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "closed the connection before taking a copy's header"));
	wait_for(&s, 0, 1 + PHX_PARTNER_OPEN_TRIES);
	/* The server still takes the job's own sender afterwards. */
	fd = open_gen(&s, 1, 4);
	close(fd);
	wait_for(&s, 1, 1 + PHX_PARTNER_OPEN_TRIES);
	assert_int_equal(phx_partner_server_newest(&s, 1, &gen), 1);
	assert_int_equal(gen, 4);
	pthread_mutex_lock(&s.mu);
	assert_int_equal(s.refused, 1 + PHX_PARTNER_OPEN_TRIES);
	pthread_mutex_unlock(&s.mu);
	phx_partner_server_stop(&s);
}

/* 1 once the server has closed fd (EOF or reset), polling at most 30 s. */
static int closed_by_server(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b;

	if (poll(&p, 1, 30000) != 1)
		return 0;
	return recv(fd, &b, 1, 0) <= 0;
}

/*
 * A peer that sends one byte of a header and then nothing (one byte every
 * 29 s held the one-sender server for an hour) holds only its own
 * connection: the partner's copies still arrive, and the trickler is cut
 * off once the header's deadline passes.
 */
static void test_slow_peer_stalls_nobody(void **state)
{
	struct phx_partner_server s;
	uint64_t gen = 0;
	int slow, fd;

	(void)state;
	alarm(120); /* a server that waits on the trickler fails, not hangs */
	/* Silence alone would take ten minutes to drop it. */
	start_silent_ms(&s, NULL, 600000);
	slow = connect_to(&s);
	assert_int_equal(send(slow, "x", 1, 0), 1);
	fd = open_gen(&s, 2, 9);
	close(fd);
	wait_for(&s, 1, 0);
	assert_int_equal(phx_partner_server_newest(&s, 2, &gen), 1);
	assert_int_equal(gen, 9);
	/* The rest of its header never comes: refused, connection closed. */
	assert_true(closed_by_server(slow));
	wait_for(&s, 1, 1);
	close(slow);
	phx_partner_server_stop(&s);
	alarm(0);
}

/*
 * Idle connections from one address take at most their share of the
 * senders, and strangers holding all of it cannot keep the partner out: a
 * newcomer pushes out the oldest connection that has sent no signed
 * header, never one that has.
 */
static void test_connections_bounded_per_address(void **state)
{
	int idle[PHX_PARTNER_CONNS_PER_ADDR], partner, late;
	struct phx_partner_server s;
	uint64_t gen = 0;

	(void)state;
	alarm(120);
	start(&s, NULL);
	partner = connect_to(&s);
	send_gen(partner, s.secret, 1, 3);
	wait_for(&s, 1, 0);
	/* The partner and three strangers fill the address's share; the fourth pushes out the
	 * first. */
	for (int i = 0; i < PHX_PARTNER_CONNS_PER_ADDR; i++) {
		idle[i] = connect_to(&s);
	}
	assert_true(closed_by_server(idle[0]));
	pthread_mutex_lock(&s.mu);
	assert_int_equal(s.evictions, 1);
	assert_int_equal(s.turned_away, 0);
	pthread_mutex_unlock(&s.mu);
	/* The partner kept its connection; a late sender pushes out the next stranger. */
	send_gen(partner, s.secret, 1, 4);
	wait_for(&s, 2, 0);
	late = connect_to(&s);
	assert_true(closed_by_server(idle[1]));
	send_gen(late, s.secret, 2, 4);
	wait_for(&s, 3, 0);
	assert_int_equal(phx_partner_server_newest(&s, 1, &gen), 1);
	assert_int_equal(gen, 4);
	assert_int_equal(phx_partner_server_newest(&s, 2, &gen), 1);
	assert_int_equal(gen, 4);
	pthread_mutex_lock(&s.mu);
	assert_int_equal(s.evictions, 2);
	assert_int_equal(s.refused, 0);
	pthread_mutex_unlock(&s.mu);
	for (int i = 0; i < PHX_PARTNER_CONNS_PER_ADDR; i++)
		close(idle[i]);
	close(partner);
	close(late);
	phx_partner_server_stop(&s);
	alarm(0);
}

/* The received count reached within seconds; 0 when it was not. */
static int received_within(struct phx_partner_server *s, unsigned long received, int seconds)
{
	for (int i = 0; i < seconds * 1000; i++) {
		int done;

		pthread_mutex_lock(&s->mu);
		done = s->received >= received;
		pthread_mutex_unlock(&s->mu);
		if (done)
			return 1;
		usleep(1000);
	}
	return 0;
}

/*
 * Strangers reconnecting as fast as they can from the partner's own
 * address push out each other, never a sender whose signed header has
 * arrived, however late its thread reads it; a stranger's complete but
 * unsigned header goes first.
 */
static void test_signed_header_arrived_is_never_pushed_out(void **state)
{
	int strangers[8 * PHX_PARTNER_CONNS_PER_ADDR], forged, partner;
	uint8_t junk[PHX_PARTNER_HDR_BYTES];
	struct phx_partner_server s;
	uint64_t gen = 0;

	(void)state;
	alarm(120);
	start(&s, NULL);
	memset(junk, 0x5a, sizeof(junk));
	forged = connect_to(&s);
	assert_int_equal(send(forged, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
	partner = connect_to(&s);
	send_gen(partner, s.secret, 1, 7);
	for (size_t i = 0; i < sizeof(strangers) / sizeof(strangers[0]); i++) {
		strangers[i] = connect_to(&s);
		send(strangers[i], "x", 1, MSG_NOSIGNAL);
	}
	assert_true(received_within(&s, 1, 10));
	assert_int_equal(phx_partner_server_newest(&s, 1, &gen), 1);
	assert_int_equal(gen, 7);
	/* The partner still holds its place for the next copy. */
	send_gen(partner, s.secret, 1, 8);
	assert_true(received_within(&s, 2, 10));
	assert_true(closed_by_server(forged));
	for (size_t i = 0; i < sizeof(strangers) / sizeof(strangers[0]); i++)
		close(strangers[i]);
	close(forged);
	close(partner);
	phx_partner_server_stop(&s);
	alarm(0);
}

static void test_bad_address(void **state)
{
	struct phx_partner_server s;
	char err[512];

	(void)state;
	memset(&s, 0, sizeof(s));
	s.lim.nranks = 1;
	assert_int_equal(phx_partner_server_start(&s, "not-an-address", 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an IPv4 address"));
	assert_int_equal(phx_partner_connect("1.2.3", 1, 100, err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_secret_from_token),
		cmocka_unit_test(test_receive_keep_and_serve_again),
		cmocka_unit_test(test_held_generation_outlives_newer_copies),
		cmocka_unit_test(test_foreign_sender_refused),
		cmocka_unit_test(test_slow_peer_stalls_nobody),
		cmocka_unit_test(test_connections_bounded_per_address),
		cmocka_unit_test(test_signed_header_arrived_is_never_pushed_out),
		cmocka_unit_test(test_bad_address),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

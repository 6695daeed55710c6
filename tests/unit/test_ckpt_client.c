/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's client against a daemon played by the test over loopback
 * TCP: the handshake, reports queued before the connection, commits,
 * reconnection with resend of unsettled prepares, and refusal.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "checkpoint/proto/ckpt_client.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "common/token.h"

#define SHA_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

struct fake {
	int lfd, fd;
	struct phx_key key;
	char nonce[PHX_WIRE_NONCE_HEX + 1];
	struct phx_wire_reader rd;
	uint32_t job, uid;
	char node[64];
	int hellos, registers, refused_auth;
	int prepares[8]; /* count per generation */
	int events, aborts, driver_hellos;
	char last_kind[32];
	/* An impostor at the daemon's address: 1 welcomes without a proof, 2
	 * proves with a key of its own; both then push a commit. */
	int impostor;
	int proofs_asked;
};

struct seen {
	int connected, commits, refused;
	uint64_t last_commit;
};

static void fake_send(struct fake *f, struct json_object *o)
{
	size_t len;
	char *frame = phx_wire_frame(o, &len);

	assert_int_equal(write(f->fd, frame, len), (ssize_t)len);
	free(frame);
}

static void fake_close(struct fake *f)
{
	close(f->fd);
	f->fd = -1;
	phx_wire_reader_free(&f->rd);
}

/* A welcome answering the client's nonce with a proof keyed by key. */
static struct json_object *welcome(struct fake *f, const struct phx_key *key, const char *nonce)
{
	struct json_object *o = phx_wire_new(PHX_MSG_WELCOME);
	char proof[PHX_WIRE_MAC_HEX + 1];

	json_object_object_add(o, "committed", json_object_new_int(0));
	json_object_object_add(o, "step", json_object_new_int(0));
	if (key && nonce) {
		f->proofs_asked++;
		assert_int_equal(phx_wire_welcome_proof(key, nonce, f->job, f->uid, f->node, proof),
				 0);
		json_object_object_add(o, "proof", json_object_new_string(proof));
	}
	return o;
}

/* What an impostor can do without the cluster key: welcome anyone, then claim a commit. */
static void impostor_welcome(struct fake *f, const struct phx_wire_msg *m)
{
	struct phx_key other;
	struct json_object *o;

	for (int i = 0; i < PHX_KEY_BYTES; i++)
		other.bytes[i] = (unsigned char)(i * 11 + 1);
	assert_non_null(m->nonce); /* this build's clients always ask */
	fake_send(f, welcome(f, f->impostor == 2 ? &other : NULL, m->nonce));
	o = phx_wire_new(PHX_MSG_COMMIT);
	json_object_object_add(o, "gen", json_object_new_int(1));
	json_object_object_add(o, "step", json_object_new_int(100));
	json_object_object_add(o, "keep_from", json_object_new_int(1));
	fake_send(f, o);
}

static void fake_msg(struct fake *f, struct phx_wire_msg *m)
{
	struct json_object *o;

	switch (m->type) {
	case PHX_MSG_HELLO:
		f->hellos++;
		f->driver_hellos += m->role == PHX_ROLE_DRIVER;
		f->job = m->job;
		f->uid = m->uid;
		snprintf(f->node, sizeof(f->node), "%s", m->node);
		assert_int_equal(phx_wire_nonce(f->nonce), 0);
		o = phx_wire_new(PHX_MSG_CHALLENGE);
		json_object_object_add(o, "nonce", json_object_new_string(f->nonce));
		fake_send(f, o);
		break;
	case PHX_MSG_AUTH:
		if (f->impostor) {
			impostor_welcome(f, m);
			break;
		}
		if (!phx_wire_auth_verify(&f->key, f->nonce, f->job, f->uid, f->node, m->mac)) {
			f->refused_auth++;
			fake_send(f, phx_wire_error("the job token does not match job 7"));
			break;
		}
		o = welcome(f, &f->key, m->nonce);
		fake_send(f, o);
		break;
	case PHX_MSG_REGISTER:
		f->registers++;
		assert_int_equal(m->ranks, 4);
		o = phx_wire_new(PHX_MSG_REGISTERED);
		json_object_object_add(o, "committed", json_object_new_int(0));
		json_object_object_add(o, "step", json_object_new_int(0));
		json_object_object_add(o, "keep", json_object_new_int(3));
		fake_send(f, o);
		break;
	case PHX_MSG_PREPARE:
		f->prepares[m->gen & 7]++;
		break;
	case PHX_MSG_EVENT:
		f->events++;
		snprintf(f->last_kind, sizeof(f->last_kind), "%s", m->kind);
		break;
	case PHX_MSG_ABORT:
		f->aborts++;
		break;
	default:
		break;
	}
}

static void fake_io(struct fake *f, short revents, short lrevents)
{
	const char *body;
	size_t len;
	char err[256];

	if (lrevents & POLLIN) {
		assert_int_equal(f->fd, -1);
		f->fd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK);
		assert_true(f->fd >= 0);
		phx_wire_reader_init(&f->rd, 0);
		return;
	}
	if (f->fd < 0 || !(revents & (POLLIN | POLLHUP)))
		return;
	if (phx_wire_reader_read(&f->rd, f->fd) <= 0) {
		fake_close(f);
		return;
	}
	while (phx_wire_reader_next(&f->rd, &body, &len, err, sizeof(err)) == 1) {
		struct phx_wire_msg m;

		assert_int_equal(phx_wire_decode(body, len, PHX_SIDE_DAEMON, &m, err, sizeof(err)),
				 0);
		fake_msg(f, &m);
		phx_wire_msg_free(&m);
	}
}

/* Runs client and fake until done(), for at most n rounds of polling. */
static int pump(struct phx_ckpt_client *c, struct fake *f, int (*done)(struct fake *, void *),
		void *arg)
{
	for (int round = 0; round < 2000; round++) {
		struct pollfd p[3] = { { phx_ckpt_client_fd(c), phx_ckpt_client_events(c), 0 },
				       { f->lfd, POLLIN, 0 },
				       { f->fd, POLLIN, 0 } };
		int t = phx_ckpt_client_timeout_ms(c);

		if (done(f, arg))
			return 1;
		poll(p, 3, t < 0 || t > 10 ? 10 : t);
		phx_ckpt_client_handle(c, p[0].revents);
		fake_io(f, p[2].revents, p[1].revents);
	}
	return done(f, arg);
}

static void on_connected(void *arg, uint64_t committed, uint64_t step)
{
	(void)committed;
	(void)step;
	((struct seen *)arg)->connected++;
}

static void on_commit(void *arg, uint64_t gen, uint64_t step, uint64_t keep_from)
{
	(void)step;
	(void)keep_from;
	((struct seen *)arg)->commits++;
	((struct seen *)arg)->last_commit = gen;
}

static void on_refused(void *arg, const char *reason)
{
	assert_non_null(strstr(reason, "does not match"));
	((struct seen *)arg)->refused++;
}

static const struct phx_ckpt_client_ops ops = { .connected = on_connected,
						.commit = on_commit,
						.refused = on_refused };

static int fake_start(struct fake *f, char *address, size_t alen)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	for (int i = 0; i < PHX_KEY_BYTES; i++)
		f->key.bytes[i] = (unsigned char)(i * 7);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(f->lfd, 8) < 0 || getsockname(f->lfd, (struct sockaddr *)&sa, &len) < 0)
		return -1;
	snprintf(address, alen, "127.0.0.1:%u", ntohs(sa.sin_port));
	return 0;
}

static struct phx_manifest_shard shard(uint32_t rank)
{
	struct phx_manifest_shard s = { .rank = rank, .bytes = 100, .filled = 1, .nlocations = 1 };

	snprintf(s.digest.alg, sizeof(s.digest.alg), "sha256");
	snprintf(s.digest.hex, sizeof(s.digest.hex), SHA_A);
	snprintf(s.locations[0].tier, sizeof(s.locations[0].tier), "local");
	s.locations[0].path = "/ckpt/x";
	return s;
}

static int got_prepare1_and_event(struct fake *f, void *arg)
{
	(void)arg;
	return f->prepares[1] == 1 && f->events == 1;
}

static int got_commit(struct fake *f, void *arg)
{
	(void)f;
	return ((struct seen *)arg)->commits == 1;
}

static int got_prepare2(struct fake *f, void *arg)
{
	(void)arg;
	return f->prepares[2] == 1;
}

static int client_away(struct fake *f, void *arg)
{
	(void)f;
	return !phx_ckpt_client_ready(arg);
}

static int got_resend(struct fake *f, void *arg)
{
	(void)arg;
	return f->hellos == 2 && f->prepares[2] == 2 && f->events == 2;
}

static int got_refused(struct fake *f, void *arg)
{
	(void)f;
	return ((struct seen *)arg)->refused >= 1;
}

/* Job 7's agent on node n1 of 2 (4 ranks), retrying quickly. */
static const struct phx_ckpt_client_conf agent_conf = { .job = 7,
							.uid = 1000,
							.node = "n1",
							.nodes = 2,
							.ranks = 4,
							.backoff_min_ms = 5,
							.backoff_max_ms = 20 };

static void test_session(void **state)
{
	struct phx_ckpt_client_conf conf = agent_conf;
	char address[64], token[PHX_TOKEN_HEX_LEN + 1], err[256];
	struct phx_manifest_shard s[2] = { shard(0), shard(1) };
	struct seen seen = { 0 };
	struct phx_ckpt_client *c;
	struct json_object *o;
	struct fake f;

	(void)state;
	conf.layout = "dp=4";
	conf.interval = "auto";
	assert_int_equal(fake_start(&f, address, sizeof(address)), 0);
	assert_int_equal(phx_token_mint(&f.key, 7, 1000, token), 0);
	conf.address = address;
	conf.token = token;
	c = phx_ckpt_client_new(&conf, &ops, &seen, err, sizeof(err));
	assert_non_null(c);
	/* Reports before the daemon answered wait in the queue. */
	assert_int_equal(phx_ckpt_client_prepare(c, 1, 100, s, 2), 0);
	assert_int_equal(phx_ckpt_client_event(c, "save", NULL, 1, 1500, 200), 0);
	assert_true(pump(c, &f, got_prepare1_and_event, NULL));
	assert_int_equal(seen.connected, 1);
	assert_int_equal(f.registers, 1);
	assert_true(phx_ckpt_client_ready(c));
	/* The daemon's commit settles generation 1. */
	o = phx_wire_new(PHX_MSG_COMMIT);
	json_object_object_add(o, "gen", json_object_new_int(1));
	json_object_object_add(o, "step", json_object_new_int(100));
	json_object_object_add(o, "keep_from", json_object_new_int(1));
	fake_send(&f, o);
	assert_true(pump(c, &f, got_commit, &seen));
	assert_int_equal(seen.last_commit, 1);
	/* Generation 2 prepared, then the daemon goes away: the client comes back
	 * by itself, sends prepare 2 again (not 1, settled) and the event made
	 * while it was away. */
	assert_int_equal(phx_ckpt_client_prepare(c, 2, 200, s, 2), 0);
	assert_true(pump(c, &f, got_prepare2, NULL));
	fake_close(&f);
	/* Reports made while the daemon is away (known to be away) are kept. */
	assert_true(pump(c, &f, client_away, c));
	assert_int_equal(phx_ckpt_client_event(c, "persist", NULL, 2, 30, 200), 0);
	pump(c, &f, got_resend, NULL);
	assert_int_equal(f.hellos, 2);
	assert_int_equal(f.prepares[2], 2);
	assert_int_equal(f.events, 2);
	assert_int_equal(f.prepares[1], 1);
	assert_int_equal(seen.connected, 2);
	phx_ckpt_client_free(c);
	if (f.fd >= 0)
		fake_close(&f);
	close(f.lfd);
}

static int got_two_events(struct fake *f, void *arg)
{
	return f->events == 2 && phx_ckpt_client_idle(arg);
}

/* A driver: authenticated like an agent, never registers, sends its reports. */
static void test_driver_session(void **state)
{
	struct phx_ckpt_client_conf conf = { .job = 7, .uid = 1000, .node = "head", .driver = 1 };
	char address[64], token[PHX_TOKEN_HEX_LEN + 1], err[256];
	struct seen seen = { 0 };
	struct phx_ckpt_client *c;
	struct fake f;

	(void)state;
	assert_int_equal(fake_start(&f, address, sizeof(address)), 0);
	assert_int_equal(phx_token_mint(&f.key, 7, 1000, token), 0);
	conf.address = address;
	conf.token = token;
	c = phx_ckpt_client_new(&conf, &ops, &seen, err, sizeof(err));
	assert_non_null(c);
	assert_false(phx_ckpt_client_idle(c));
	/* Queued until welcomed, then sent. */
	assert_int_equal(phx_ckpt_client_report(c, "restart", "n2", 0, 0, "node lost"), 0);
	assert_int_equal(phx_ckpt_client_report(c, "check", "n3", 0, 0, "gpu 0 slow"), 0);
	assert_true(pump(c, &f, got_two_events, c));
	assert_int_equal(f.driver_hellos, 1);
	assert_int_equal(f.registers, 0);
	assert_int_equal(f.refused_auth, 0);
	assert_int_equal(seen.connected, 1);
	assert_string_equal(f.last_kind, "check");
	phx_ckpt_client_free(c);
	if (f.fd >= 0)
		fake_close(&f);
	close(f.lfd);
}

static void test_wrong_token_refused(void **state)
{
	struct phx_ckpt_client_conf conf = agent_conf;
	char address[64], token[PHX_TOKEN_HEX_LEN + 1], err[256];
	struct seen seen = { 0 };
	struct phx_ckpt_client *c;
	struct fake f;

	(void)state;
	assert_int_equal(fake_start(&f, address, sizeof(address)), 0);
	/* The token of another job. */
	assert_int_equal(phx_token_mint(&f.key, 8, 1000, token), 0);
	conf.address = address;
	conf.token = token;
	c = phx_ckpt_client_new(&conf, &ops, &seen, err, sizeof(err));
	assert_non_null(c);
	assert_true(pump(c, &f, got_refused, &seen));
	assert_int_equal(f.refused_auth, 1);
	assert_int_equal(seen.connected, 0);
	assert_false(phx_ckpt_client_ready(c));
	phx_ckpt_client_free(c);
	if (f.fd >= 0)
		fake_close(&f);
	close(f.lfd);
}

static int three_hellos(struct fake *f, void *arg)
{
	(void)arg;
	return f->hellos >= 3;
}

/*
 * A process listening at the daemon's address without the cluster key
 * (a user's, after phalanx-ckptd went down) is never trusted: whether it
 * welcomes without a proof or with one of its own key, the client drops
 * the connection before registering, takes none of its commits, and tries
 * again later.
 */
static void test_impostor_daemon_not_trusted(void **state)
{
	struct phx_ckpt_client_conf conf = agent_conf;
	char address[64], token[PHX_TOKEN_HEX_LEN + 1], err[256];
	struct phx_manifest_shard s0 = shard(0);

	(void)state;
	for (int mode = 1; mode <= 2; mode++) {
		struct seen seen = { 0 };
		struct phx_ckpt_client *c;
		struct fake f;

		assert_int_equal(fake_start(&f, address, sizeof(address)), 0);
		f.impostor = mode;
		assert_int_equal(phx_token_mint(&f.key, 7, 1000, token), 0);
		conf.address = address;
		conf.token = token;
		c = phx_ckpt_client_new(&conf, &ops, &seen, err, sizeof(err));
		assert_non_null(c);
		phx_ckpt_client_prepare(c, 1, 100, &s0, 1);
		assert_true(pump(c, &f, three_hellos, NULL));
		assert_int_equal(f.registers, 0);
		assert_int_equal(f.prepares[1], 0);
		assert_int_equal(seen.connected, 0);
		assert_int_equal(seen.commits, 0);
		assert_int_equal(f.proofs_asked, mode == 2 ? f.hellos - 1 : 0);
		phx_ckpt_client_free(c);
		if (f.fd >= 0)
			fake_close(&f);
		close(f.lfd);
	}
}

static void test_bad_conf(void **state)
{
	struct phx_ckpt_client_conf conf = { .address = "nohostport",
					     .job = 7,
					     .node = "n",
					     .nodes = 1,
					     .ranks = 1,
					     .token = "abc" };
	char err[256];

	(void)state;
	assert_null(phx_ckpt_client_new(&conf, NULL, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "not HOST:PORT"));
	conf.address = "127.0.0.1:1";
	assert_null(phx_ckpt_client_new(&conf, NULL, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "PHALANX_JOB_TOKEN"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_session),
		cmocka_unit_test(test_driver_session),
		cmocka_unit_test(test_wrong_token_refused),
		cmocka_unit_test(test_impostor_daemon_not_trusted),
		cmocka_unit_test(test_bad_conf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

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
#include <json-c/json.h>

#include "checkpoint/proto/ckpt_wire.h"
#include "common/token.h"

#define SHA_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static int decode(const char *text, enum phx_wire_side side, struct phx_wire_msg *m, char *err,
		  size_t errlen)
{
	return phx_wire_decode(text, strlen(text), side, m, err, errlen);
}

static void expect_refused(const char *text, enum phx_wire_side side, const char *needle)
{
	struct phx_wire_msg m;
	char err[512] = "";

	if (decode(text, side, &m, err, sizeof(err)) == 0)
		fail_msg("accepted: %s", text);
	if (!strstr(err, needle))
		fail_msg("\"%s\" lacks \"%s\" for %s", err, needle, text);
}

static void test_frame_round_trip(void **state)
{
	struct phx_wire_reader r;
	struct phx_wire_msg m;
	struct phx_manifest_shard sh = { .rank = 3, .bytes = 99, .filled = 1 };
	const char *body;
	size_t len, flen;
	char err[256], *frame;

	(void)state;
	snprintf(sh.digest.alg, sizeof(sh.digest.alg), "sha256");
	snprintf(sh.digest.hex, sizeof(sh.digest.hex), SHA_A);
	snprintf(sh.locations[0].tier, sizeof(sh.locations[0].tier), "local");
	sh.locations[0].path = "/ckpt/3";
	sh.nlocations = 1;
	frame = phx_wire_frame(phx_wire_prepare(5, 500, &sh, 1), &flen);
	assert_non_null(frame);
	assert_int_equal((unsigned char)frame[0] << 24 | (unsigned char)frame[1] << 16 |
				 (unsigned char)frame[2] << 8 | (unsigned char)frame[3],
			 flen - 4);
	phx_wire_reader_init(&r, 0);
	/* Byte by byte: no frame until the last byte arrives. */
	for (size_t i = 0; i < flen; i++) {
		assert_int_equal(phx_wire_reader_next(&r, &body, &len, err, sizeof(err)), 0);
		assert_int_equal(phx_wire_reader_feed(&r, frame + i, 1), 0);
	}
	assert_int_equal(phx_wire_reader_next(&r, &body, &len, err, sizeof(err)), 1);
	assert_int_equal(phx_wire_decode(body, len, PHX_SIDE_DAEMON, &m, err, sizeof(err)), 0);
	assert_int_equal(m.type, PHX_MSG_PREPARE);
	assert_int_equal(m.gen, 5);
	assert_int_equal(m.step, 500);
	assert_int_equal(m.nshards, 1);
	assert_int_equal(m.shards[0].rank, 3);
	assert_int_equal(m.shards[0].bytes, 99);
	assert_string_equal(m.shards[0].locations[0].path, "/ckpt/3");
	phx_wire_msg_free(&m);
	assert_int_equal(phx_wire_reader_next(&r, &body, &len, err, sizeof(err)), 0);
	/* Two frames in one read come out one at a time. */
	assert_int_equal(phx_wire_reader_feed(&r, frame, flen), 0);
	assert_int_equal(phx_wire_reader_feed(&r, frame, flen), 0);
	assert_int_equal(phx_wire_reader_next(&r, &body, &len, err, sizeof(err)), 1);
	assert_int_equal(phx_wire_reader_next(&r, &body, &len, err, sizeof(err)), 1);
	assert_int_equal(phx_wire_reader_next(&r, &body, &len, err, sizeof(err)), 0);
	phx_wire_reader_free(&r);
	free(frame);
}

/* Plain prepares take the fast reader; anything else still decodes, through json-c. */
static void test_prepare_fast_and_fallback(void **state)
{
	static const char plain[] =
		"{\"type\":\"prepare\",\"gen\":7,\"step\":70,\"shards\":[{\"rank\":1,\"bytes\":5,"
		"\"digest\":{\"alg\":\"xxh3-128\",\"hex\":\"00112233445566778899aabbccddeeff\"},"
		"\"locations\":[{"
		"\"tier\":"
		"\"local\",\"path\":\"/a/b\"},{\"path\":\"/c\",\"tier\":\"shared\"}]}],\"v\":1}";
	static const char escaped[] =
		"{\"type\":\"prepare\",\"gen\":7,\"step\":70,\"shards\":[{\"rank\":1,\"bytes\":5,"
		"\"digest\":{\"alg\":\"xxh3-128\",\"hex\":\"00112233445566778899aabbccddeeff\"},"
		"\"locations\":[{"
		"\"tier\":"
		"\"local\",\"path\":\"\\/a\\/b\"}]}],\"v\":1}";
	static const char duplicate[] = "{\"type\":\"prepare\",\"gen\":7,\"gen\":8}";
	struct phx_wire_msg m;
	char err[256];

	(void)state;
	assert_int_equal(phx_wire_decode_prepare_fast(plain, strlen(plain), &m), 1);
	assert_int_equal(m.type, PHX_MSG_PREPARE);
	assert_int_equal(m.gen, 7);
	assert_int_equal(m.step, 70);
	assert_int_equal(m.nshards, 1);
	assert_int_equal(m.shards[0].rank, 1);
	assert_int_equal(m.shards[0].nlocations, 2);
	assert_string_equal(m.shards[0].locations[1].tier, "shared");
	assert_string_equal(m.shards[0].locations[1].path, "/c");
	phx_wire_msg_free(&m);
	/* An escape: declined by the fast reader, decoded by json-c. */
	assert_int_equal(phx_wire_decode_prepare_fast(escaped, strlen(escaped), &m), 0);
	assert_int_equal(
		phx_wire_decode(escaped, strlen(escaped), PHX_SIDE_DAEMON, &m, err, sizeof(err)),
		0);
	assert_string_equal(m.shards[0].locations[0].path, "/a/b");
	phx_wire_msg_free(&m);
	/* A repeated key: declined, and json-c's reading decides (here: refused). */
	assert_int_equal(phx_wire_decode_prepare_fast(duplicate, strlen(duplicate), &m), 0);
	assert_int_equal(phx_wire_decode(duplicate, strlen(duplicate), PHX_SIDE_DAEMON, &m, err,
					 sizeof(err)),
			 -1);
}

static void test_frame_limits(void **state)
{
	struct phx_wire_reader r;
	const char *body;
	size_t len;
	char err[256];
	static const char zero[4] = { 0, 0, 0, 0 }, huge[4] = { 0x7f, 0, 0, 0 };

	(void)state;
	phx_wire_reader_init(&r, 1024);
	phx_wire_reader_feed(&r, zero, 4);
	assert_int_equal(phx_wire_reader_next(&r, &body, &len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "frame of 0 bytes"));
	phx_wire_reader_free(&r);
	phx_wire_reader_init(&r, 1024);
	phx_wire_reader_feed(&r, huge, 4);
	assert_int_equal(phx_wire_reader_next(&r, &body, &len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "frames hold 1 to 1024 bytes"));
	phx_wire_reader_free(&r);
}

static void test_decode_refusals(void **state)
{
	(void)state;
	expect_refused("{\"type\":\"hello\"}", PHX_SIDE_DAEMON, "missing \"v\"");
	expect_refused("{\"v\":5,\"type\":\"hello\"}", PHX_SIDE_DAEMON, "protocol version 5");
	expect_refused("{\"v\":1,\"type\":\"bogus\"}", PHX_SIDE_DAEMON, "type \"bogus\"");
	expect_refused("{\"v\":1,\"type\":\"commit\",\"gen\":1,\"step\":1,\"keep_from\":1}",
		       PHX_SIDE_DAEMON, "not one phalanx-ckptd reads");
	expect_refused("{\"v\":1,\"type\":\"hello\",\"role\":\"agent\",\"job\":0,\"uid\":1,"
		       "\"node\":\"n1\"}",
		       PHX_SIDE_DAEMON, "\"job\" must be from 1");
	expect_refused("{\"v\":1,\"type\":\"hello\",\"role\":\"root\"}", PHX_SIDE_DAEMON,
		       "not \"agent\", \"driver\" or \"admin\"");
	/* A version 2 peer cannot claim the driver's role. */
	expect_refused("{\"v\":2,\"type\":\"hello\",\"role\":\"driver\",\"job\":7,\"uid\":1,"
		       "\"node\":\"h\"}",
		       PHX_SIDE_DAEMON, "needs protocol version 3");
	expect_refused("{\"v\":3,\"type\":\"hello\",\"role\":\"driver\",\"job\":7}",
		       PHX_SIDE_DAEMON, "uid");
	expect_refused("{\"v\":1,\"type\":\"hello\",\"role\":\"admin\",\"job\":3}", PHX_SIDE_DAEMON,
		       "unknown key \"job\"");
	/* A MUNGE credential is a string of bounded size. */
	expect_refused("{\"v\":2,\"type\":\"hello\",\"role\":\"admin\",\"cred\":7}",
		       PHX_SIDE_DAEMON, "cred");
	expect_refused("{\"v\":2,\"type\":\"hello\",\"role\":\"admin\",\"cred\":\"\"}",
		       PHX_SIDE_DAEMON, "cred");
	expect_refused("{\"v\":1,\"type\":\"auth\",\"mac\":\"XYZ\"}", PHX_SIDE_DAEMON,
		       "lower-case hex");
	expect_refused("{\"v\":1,\"type\":\"prepare\",\"gen\":0,\"step\":1,\"shards\":[]}",
		       PHX_SIDE_DAEMON, "\"gen\" must be from 1");
	expect_refused("{\"v\":1,\"type\":\"prepare\",\"gen\":1,\"step\":1,\"shards\":[]}",
		       PHX_SIDE_DAEMON, "\"shards\" is empty");
	expect_refused("{\"v\":1,\"type\":\"prepare\",\"gen\":1,\"step\":1,\"shards\":[{\"rank\":0,"
		       "\"bytes\":1,\"digest\":{\"alg\":\"sha256\",\"hex\":\"ab\"},"
		       "\"locations\":[{\"tier\":\"local\",\"path\":\"/x\"}]}]}",
		       PHX_SIDE_DAEMON, "64 hex characters");
	expect_refused("{\"v\":1,\"type\":\"event\",\"kind\":\"node_bad\"}", PHX_SIDE_DAEMON,
		       "must name the \"node\"");
	expect_refused("{\"v\":1,\"type\":\"event\",\"kind\":\"party\"}", PHX_SIDE_DAEMON,
		       "is not save");
	expect_refused("{\"v\":1,\"type\":\"register\",\"nodes\":4,\"ranks\":2,\"layout\":\"\"}",
		       PHX_SIDE_DAEMON, "4 nodes for only 2 ranks");
	expect_refused("{\"v\":1,\"type\":\"manifest\",\"gen\":0,\"manifest\":{}}", PHX_SIDE_CLIENT,
		       "only then");
	expect_refused("{\"v\":1,\"type\":\"manifest\",\"gen\":0,\"uid\":5}", PHX_SIDE_CLIENT,
		       "a uid only with a manifest");
	expect_refused("{\"v\":1,\"type\":\"manifest\",\"gen\":1,\"manifest\":{},\"uid\":-1}",
		       PHX_SIDE_CLIENT, "uid");
	expect_refused("{\"v\":1,\"type\":\"abort\",\"gen\":1,\"reason\":\"a\\u0000b\"}",
		       PHX_SIDE_DAEMON, "");
}

static void test_decode_fields(void **state)
{
	struct phx_wire_msg m;
	char err[256], *frame;
	size_t len;

	(void)state;
	/* The admin socket says whose job a manifest is: verify reads as that user. */
	assert_int_equal(decode("{\"v\":1,\"type\":\"manifest\",\"gen\":3,\"manifest\":{},"
				"\"uid\":1001}",
				PHX_SIDE_CLIENT, &m, err, sizeof(err)),
			 0);
	assert_true(m.has_uid);
	assert_int_equal(m.uid, 1001);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":1,\"type\":\"manifest\",\"gen\":3,\"manifest\":{}}",
				PHX_SIDE_CLIENT, &m, err, sizeof(err)),
			 0);
	assert_false(m.has_uid);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":1,\"type\":\"hello\",\"role\":\"agent\",\"job\":77,"
				"\"uid\":1000,\"node\":\"n3\"}",
				PHX_SIDE_DAEMON, &m, err, sizeof(err)),
			 0);
	assert_int_equal(m.role, PHX_ROLE_AGENT);
	assert_int_equal(m.job, 77);
	assert_int_equal(m.uid, 1000);
	assert_string_equal(m.node, "n3");
	phx_wire_msg_free(&m);
	/* An admin's hello: a credential on TCP, none on the Unix socket. */
	frame = phx_wire_frame(phx_wire_hello_admin("MUNGE:abc:"), &len);
	assert_int_equal(phx_wire_decode(frame + 4, len - 4, PHX_SIDE_DAEMON, &m, err, sizeof(err)),
			 0);
	free(frame);
	assert_int_equal(m.role, PHX_ROLE_ADMIN);
	assert_string_equal(m.cred, "MUNGE:abc:");
	phx_wire_msg_free(&m);
	frame = phx_wire_frame(phx_wire_hello_admin(NULL), &len);
	assert_int_equal(phx_wire_decode(frame + 4, len - 4, PHX_SIDE_DAEMON, &m, err, sizeof(err)),
			 0);
	free(frame);
	assert_null(m.cred);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":1,\"type\":\"event\",\"kind\":\"save\",\"value\":1500,"
				"\"bytes\":4096}",
				PHX_SIDE_DAEMON, &m, err, sizeof(err)),
			 0);
	assert_string_equal(m.kind, "save");
	assert_int_equal(m.value, 1500);
	assert_int_equal(m.bytes, 4096);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":1,\"type\":\"interval\",\"mode\":\"auto\",\"steps\":0,"
				"\"seconds\":613}",
				PHX_SIDE_CLIENT, &m, err, sizeof(err)),
			 0);
	assert_string_equal(m.mode, "auto");
	assert_int_equal(m.seconds, 613);
	phx_wire_msg_free(&m);
}

/* Version 2: heartbeats, recovery events and the goodput report. */
static void test_recovery_messages(void **state)
{
	struct phx_wire_msg m;
	char err[256];

	(void)state;
	assert_int_equal(decode("{\"v\":2,\"type\":\"heartbeat\",\"step\":42}", PHX_SIDE_DAEMON, &m,
				err, sizeof(err)),
			 0);
	assert_int_equal(m.type, PHX_MSG_HEARTBEAT);
	assert_true(m.has_step && m.step == 42);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":2,\"type\":\"event\",\"kind\":\"crash\",\"step\":12,"
				"\"value\":0,\"reason\":\"ValueError@12\"}",
				PHX_SIDE_DAEMON, &m, err, sizeof(err)),
			 0);
	assert_string_equal(m.reason, "ValueError@12");
	assert_true(m.has_value && m.value == 0 && m.step == 12);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":2,\"type\":\"event\",\"kind\":\"check\",\"node\":\"n2\","
				"\"value\":1}",
				PHX_SIDE_DAEMON, &m, err, sizeof(err)),
			 0);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":2,\"type\":\"registered\",\"committed\":0,\"step\":0,"
				"\"keep\":3,\"heartbeat_ms\":500}",
				PHX_SIDE_CLIENT, &m, err, sizeof(err)),
			 0);
	assert_int_equal(m.heartbeat_ms, 500);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":2,\"type\":\"goodput\",\"job\":5,\"report\":{}}",
				PHX_SIDE_CLIENT, &m, err, sizeof(err)),
			 0);
	assert_non_null(m.payload);
	phx_wire_msg_free(&m);
	expect_refused("{\"v\":2,\"type\":\"event\",\"kind\":\"check\",\"node\":\"n2\"}",
		       PHX_SIDE_DAEMON, "value");
	expect_refused("{\"v\":2,\"type\":\"event\",\"kind\":\"xid\",\"value\":79}",
		       PHX_SIDE_DAEMON, "must name the \"node\"");
	expect_refused("{\"v\":2,\"type\":\"event\",\"kind\":\"oops\"}", PHX_SIDE_DAEMON,
		       "is not save");
	/* A role's record is the job's: no node, and the record in the reason. */
	expect_refused("{\"v\":3,\"type\":\"event\",\"kind\":\"role\",\"node\":\"n1\","
		       "\"reason\":\"t run=1\"}",
		       PHX_SIDE_DAEMON, "a role event names no");
	expect_refused("{\"v\":3,\"type\":\"event\",\"kind\":\"role\"}", PHX_SIDE_DAEMON,
		       "a role event names no");
	expect_refused("{\"v\":2,\"type\":\"heartbeat\",\"step\":-1}", PHX_SIDE_DAEMON, "step");
	expect_refused("{\"v\":2,\"type\":\"heartbeat\",\"node\":\"x\"}", PHX_SIDE_DAEMON, "node");
	expect_refused("{\"v\":2,\"type\":\"goodput\",\"job\":5,\"report\":[]}", PHX_SIDE_CLIENT,
		       "report");
	expect_refused("{\"v\":2,\"type\":\"goodput\"}", PHX_SIDE_DAEMON, "job");
}

static void accept_seq(enum phx_wire_side side, enum phx_wire_role role, const char *const *msgs,
		       int bad_at)
{
	struct phx_wire_order o;
	char err[256];

	phx_wire_order_init(&o, side, role);
	for (int i = 0; msgs[i]; i++) {
		struct phx_wire_msg m;
		int rc;

		assert_int_equal(decode(msgs[i], side, &m, err, sizeof(err)), 0);
		rc = phx_wire_order_accept(&o, &m, err, sizeof(err));
		phx_wire_msg_free(&m);
		if (i == bad_at) {
			assert_int_equal(rc, -1);
			return;
		}
		assert_int_equal(rc, 0);
	}
	assert_int_equal(bad_at, -1);
}

#define HELLO "{\"v\":1,\"type\":\"hello\",\"role\":\"agent\",\"job\":7,\"uid\":1,\"node\":\"a\"}"
#define AUTH "{\"v\":1,\"type\":\"auth\",\"mac\":\"" SHA_A "\"}"
#define REG "{\"v\":1,\"type\":\"register\",\"nodes\":1,\"ranks\":1,\"layout\":\"\"}"
#define ABORT "{\"v\":1,\"type\":\"abort\",\"gen\":1,\"reason\":\"x\"}"

static void test_order(void **state)
{
	const char *good[] = { HELLO, AUTH, REG, ABORT, ABORT, NULL };
	const char *early[] = { HELLO, ABORT, NULL };
	const char *twice[] = { HELLO, AUTH, REG, REG, NULL };
	const char *first[] = { AUTH, NULL };
	const char *admin_prep[] = { "{\"v\":1,\"type\":\"hello\",\"role\":\"admin\"}", ABORT,
				     NULL };
	const char *agent_rm[] = { HELLO, AUTH, REG,
				   "{\"v\":1,\"type\":\"rm\",\"job\":7,\"gen\":1}", NULL };
	const char *agent_q[] = { HELLO, AUTH, REG,
				  "{\"v\":1,\"type\":\"query\",\"job\":8,\"gen\":1}", NULL };
	const char *client[] = {
		"{\"v\":1,\"type\":\"challenge\",\"nonce\":\"" SHA_A "\"}",
		"{\"v\":1,\"type\":\"welcome\",\"committed\":0,\"step\":0}",
		"{\"v\":1,\"type\":\"commit\",\"gen\":1,\"step\":1,\"keep_from\":1}",
		"{\"v\":1,\"type\":\"welcome\",\"committed\":0,\"step\":0}", NULL
	};

	(void)state;
	accept_seq(PHX_SIDE_DAEMON, 0, good, -1);
	accept_seq(PHX_SIDE_DAEMON, 0, early, 1);
	accept_seq(PHX_SIDE_DAEMON, 0, twice, 3);
	accept_seq(PHX_SIDE_DAEMON, 0, first, 0);
	accept_seq(PHX_SIDE_DAEMON, 0, admin_prep, 1);
	accept_seq(PHX_SIDE_DAEMON, 0, agent_rm, 3);
	accept_seq(PHX_SIDE_DAEMON, 0, agent_q, 3);
	accept_seq(PHX_SIDE_CLIENT, PHX_ROLE_AGENT, client, 3);
}

#define DHELLO "{\"v\":3,\"type\":\"hello\",\"role\":\"driver\",\"job\":7,\"uid\":1,\"node\":\"h\"}"
#define DAUTH "{\"v\":3,\"type\":\"auth\",\"mac\":\"" SHA_A "\"}"
#define RESTART "{\"v\":3,\"type\":\"event\",\"kind\":\"restart\",\"node\":\"n2\",\"reason\":\"x\"}"
#define CHECK "{\"v\":3,\"type\":\"event\",\"kind\":\"check\",\"node\":\"n3\",\"value\":0}"
#define ROLE                                                                                       \
	"{\"v\":3,\"type\":\"event\",\"kind\":\"role\",\"reason\":\"trainer run=1 ranks=8 "        \
	"productive=1 waiting=0 restart=0 lost=0 detect=0 failures=0\"}"

/* A driver authenticates, never registers, and sends events only. */
static void test_driver_role(void **state)
{
	const char *good[] = { DHELLO, DAUTH, RESTART, CHECK, ROLE, NULL };
	const char *reg[] = { DHELLO, DAUTH, REG, NULL };
	const char *noauth[] = { DHELLO, CHECK, NULL };
	const char *hb[] = { DHELLO, DAUTH, "{\"v\":3,\"type\":\"heartbeat\"}", NULL };
	const char *prep[] = { DHELLO, DAUTH, ABORT, NULL };
	const char *q[] = { DHELLO, DAUTH, "{\"v\":3,\"type\":\"query\",\"gen\":0}", NULL };
	const char *client[] = { "{\"v\":3,\"type\":\"challenge\",\"nonce\":\"" SHA_A "\"}",
				 "{\"v\":3,\"type\":\"welcome\",\"committed\":0,\"step\":0}",
				 "{\"v\":3,\"type\":\"error\",\"reason\":\"x\"}",
				 "{\"v\":3,\"type\":\"commit\",\"gen\":1,\"step\":1,"
				 "\"keep_from\":1}",
				 NULL };
	struct phx_wire_msg m;
	char err[256];
	struct json_object *o;
	size_t len;
	char *frame;

	(void)state;
	accept_seq(PHX_SIDE_DAEMON, 0, good, -1);
	accept_seq(PHX_SIDE_DAEMON, 0, reg, 2);
	accept_seq(PHX_SIDE_DAEMON, 0, noauth, 1);
	accept_seq(PHX_SIDE_DAEMON, 0, hb, 2);
	accept_seq(PHX_SIDE_DAEMON, 0, prep, 2);
	accept_seq(PHX_SIDE_DAEMON, 0, q, 2);
	accept_seq(PHX_SIDE_CLIENT, PHX_ROLE_DRIVER, client, 3);
	/* The builder's hello decodes as a driver's, with its fields. */
	o = phx_wire_hello_driver(7, 1000, "head");
	frame = phx_wire_frame(o, &len);
	assert_non_null(frame);
	assert_int_equal(phx_wire_decode(frame + 4, len - 4, PHX_SIDE_DAEMON, &m, err, sizeof(err)),
			 0);
	assert_int_equal(m.role, PHX_ROLE_DRIVER);
	assert_int_equal(m.version, 3);
	assert_int_equal(m.job, 7);
	assert_int_equal(m.uid, 1000);
	assert_string_equal(m.node, "head");
	phx_wire_msg_free(&m);
	free(frame);
	/* Other messages carry version 2, which a version 2 peer reads. */
	frame = phx_wire_frame(phx_wire_hello_agent(7, 1000, "n1"), &len);
	assert_non_null(frame);
	assert_int_equal(phx_wire_decode(frame + 4, len - 4, PHX_SIDE_DAEMON, &m, err, sizeof(err)),
			 0);
	assert_int_equal(m.version, PHX_WIRE_VERSION_SEND);
	phx_wire_msg_free(&m);
	free(frame);
	/* Old agents still speak version 1. */
	assert_int_equal(decode(HELLO, PHX_SIDE_DAEMON, &m, err, sizeof(err)), 0);
	assert_int_equal(m.role, PHX_ROLE_AGENT);
	assert_int_equal(m.version, 1);
	phx_wire_msg_free(&m);
}

static void test_auth(void **state)
{
	struct phx_key key, other;
	char token[PHX_TOKEN_HEX_LEN + 1], nonce[PHX_WIRE_NONCE_HEX + 1], nonce2[65],
		mac[PHX_WIRE_MAC_HEX + 1], proof[PHX_WIRE_MAC_HEX + 1];

	(void)state;
	for (int i = 0; i < PHX_KEY_BYTES; i++)
		key.bytes[i] = (unsigned char)i;
	other = key;
	other.bytes[0] ^= 1;
	assert_int_equal(phx_token_mint(&key, 4242, 1000, token), 0);
	assert_int_equal(phx_wire_nonce(nonce), 0);
	assert_int_equal(phx_wire_nonce(nonce2), 0);
	assert_string_not_equal(nonce, nonce2);
	assert_int_equal(phx_wire_auth_mac(token, nonce, 4242, 1000, "n1", mac), 0);
	assert_null(strstr(mac, token));
	assert_true(phx_wire_auth_verify(&key, nonce, 4242, 1000, "n1", mac));
	/* Bound to the nonce, the job, the uid, the node and the cluster key. */
	assert_false(phx_wire_auth_verify(&key, nonce2, 4242, 1000, "n1", mac));
	assert_false(phx_wire_auth_verify(&key, nonce, 4243, 1000, "n1", mac));
	assert_false(phx_wire_auth_verify(&key, nonce, 4242, 0, "n1", mac));
	assert_false(phx_wire_auth_verify(&key, nonce, 4242, 1000, "n2", mac));
	assert_false(phx_wire_auth_verify(&other, nonce, 4242, 1000, "n1", mac));
	assert_false(phx_wire_auth_verify(&key, nonce, 4242, 1000, "n1", "short"));
	assert_int_equal(phx_wire_auth_mac("short", nonce, 1, 1, "n", mac), -1);
	/* The daemon's proof: checked with the token, bound the same way, and not the auth MAC. */
	assert_int_equal(phx_wire_welcome_proof(&key, nonce, 4242, 1000, "n1", proof), 0);
	assert_string_not_equal(proof, mac);
	assert_true(phx_wire_welcome_check(token, nonce, 4242, 1000, "n1", proof));
	assert_false(phx_wire_welcome_check(token, nonce2, 4242, 1000, "n1", proof));
	assert_false(phx_wire_welcome_check(token, nonce, 4243, 1000, "n1", proof));
	assert_false(phx_wire_welcome_check(token, nonce, 4242, 1001, "n1", proof));
	assert_false(phx_wire_welcome_check(token, nonce, 4242, 1000, "n2", proof));
	assert_false(phx_wire_welcome_check(token, nonce, 4242, 1000, "n1", mac));
	assert_false(phx_wire_welcome_check(token, nonce, 4242, 1000, "n1", NULL));
	assert_int_equal(phx_wire_welcome_proof(&other, nonce, 4242, 1000, "n1", proof), 0);
	assert_false(phx_wire_welcome_check(token, nonce, 4242, 1000, "n1", proof));
}

/* Protocol 4's fields: the client's nonce in auth, the daemon's proof in welcome; both optional. */
static void test_auth_fields(void **state)
{
	static const char hex64[] =
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	char text[512], err[256];
	struct phx_wire_msg m;

	(void)state;
	snprintf(text, sizeof(text), "{\"v\":4,\"type\":\"auth\",\"mac\":\"%s\",\"nonce\":\"%s\"}",
		 hex64, hex64);
	assert_int_equal(decode(text, PHX_SIDE_DAEMON, &m, err, sizeof(err)), 0);
	assert_string_equal(m.nonce, hex64);
	phx_wire_msg_free(&m);
	snprintf(text, sizeof(text), "{\"v\":2,\"type\":\"auth\",\"mac\":\"%s\"}", hex64);
	assert_int_equal(decode(text, PHX_SIDE_DAEMON, &m, err, sizeof(err)), 0);
	assert_null(m.nonce);
	phx_wire_msg_free(&m);
	snprintf(text, sizeof(text),
		 "{\"v\":4,\"type\":\"welcome\",\"committed\":0,\"step\":0,\"proof\":\"%s\"}",
		 hex64);
	assert_int_equal(decode(text, PHX_SIDE_CLIENT, &m, err, sizeof(err)), 0);
	assert_string_equal(m.proof, hex64);
	phx_wire_msg_free(&m);
	assert_int_equal(decode("{\"v\":3,\"type\":\"welcome\",\"committed\":0,\"step\":0}",
				PHX_SIDE_CLIENT, &m, err, sizeof(err)),
			 0);
	assert_null(m.proof);
	phx_wire_msg_free(&m);
	/* Upper case, or short: refused, not taken for "no proof". */
	assert_int_equal(decode("{\"v\":4,\"type\":\"welcome\",\"committed\":0,\"step\":0,"
				"\"proof\":\"ABCD\"}",
				PHX_SIDE_CLIENT, &m, err, sizeof(err)),
			 -1);
}

static void test_writer_socket(void **state)
{
	struct phx_wire_writer w = { 0 };
	struct phx_wire_reader r;
	const char *body;
	size_t len;
	char err[256], buf[65536];
	int sv[2], n = 0;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	for (int i = 0; i < 2000; i++)
		assert_int_equal(phx_wire_writer_put(&w, phx_wire_error("a reason of some length")),
				 0);
	phx_wire_reader_init(&r, 0);
	/* The socket takes part, the reader drains, until everything arrived. */
	while (phx_wire_writer_flush(&w, sv[0]) == 0 || n < 2000) {
		ssize_t got = read(sv[1], buf, sizeof(buf));

		if (got > 0)
			phx_wire_reader_feed(&r, buf, (size_t)got);
		while (phx_wire_reader_next(&r, &body, &len, err, sizeof(err)) == 1) {
			struct phx_wire_msg m;

			assert_int_equal(
				phx_wire_decode(body, len, PHX_SIDE_CLIENT, &m, err, sizeof(err)),
				0);
			assert_string_equal(m.reason, "a reason of some length");
			phx_wire_msg_free(&m);
			n++;
		}
	}
	assert_int_equal(n, 2000);
	phx_wire_reader_free(&r);
	phx_wire_writer_free(&w);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_round_trip),
		cmocka_unit_test(test_frame_limits),
		cmocka_unit_test(test_prepare_fast_and_fallback),
		cmocka_unit_test(test_decode_refusals),
		cmocka_unit_test(test_decode_fields),
		cmocka_unit_test(test_recovery_messages),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_driver_role),
		cmocka_unit_test(test_auth),
		cmocka_unit_test(test_auth_fields),
		cmocka_unit_test(test_writer_socket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

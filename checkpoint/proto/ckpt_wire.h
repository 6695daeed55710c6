/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The phalanx-ckptd protocol. A frame is a 4-byte big-endian length and
 * that many bytes of one JSON object holding "v" (at most PHX_WIRE_VERSION) and
 * "type". Frames above PHX_WIRE_MAX_FRAME, malformed objects, unknown
 * keys and messages out of order close the connection with a reason.
 *
 * Agent (phalanx-launch on each node) -> daemon, in this order:
 *   hello     {job, uid, node, role:"agent"}
 *   auth      {mac}   HMAC-SHA256(job token, "phalanx-ckptd-auth:v1:NONCE:JOB:UID:NODE")
 *   register  {nodes, ranks, layout, interval}    once, after welcome
 *   prepare   {gen, step, shards:[{rank, bytes, digest:{alg, hex},
 *              locations:[{tier, path}]}]}        this node's durable, digested shards
 *   abort     {gen, reason}                       a rank of gen failed
 *   query     {gen}                               gen 0 = newest committed
 *   event     {kind, [node], [gen], [value], [bytes], [step], [reason]}
 *             kind: "save" (value = stall in microseconds, bytes staged),
 *             "persist" (value = lag in milliseconds from stage to durable, bytes),
 *             "failure" (a worker or node failed), "node_bad" (node),
 *             and since version 2, for recovery (see phalanx-ckptd(8)):
 *             "crash" (reason = the failure's signature, e.g. exception and
 *             step; value = microseconds from the failure to this report),
 *             "hang" (value as crash), "straggler" (value = microseconds the
 *             ranks waited on node), "check" (node, value 1 passed, 0 failed,
 *             reason), "xid" (node, value = the XID, reason), "restart" (an
 *             in-job restart began), "done" (the job ends normally)
 *   heartbeat {[step]}   (version 2) every recovery.heartbeat_ms; step = the
 *                        newest training step of the node's ranks
 *   interval  {}                                   ask for the checkpoint interval
 * Daemon -> agent:
 *   challenge {nonce}                              64 hex characters, fresh per connection
 *   welcome   {committed, step}                    newest committed generation (0 = none)
 *   registered{committed, step, keep, [heartbeat_ms]}  heartbeat_ms: send heartbeats
 *                                                  this often (version 2)
 *   commit    {gen, step, keep_from}               every rank of gen is prepared; the
 *                                                  manifest is published; gens below
 *                                                  keep_from may be collected
 *   aborted   {gen, reason}                        gen will never commit
 *   manifest  {gen, [manifest]}                    gen 0 and no manifest: none committed
 *   interval  {mode, steps, seconds}               mode "steps", "seconds" or "auto"
 *   error     {reason}                             then the daemon closes the connection
 * Driver (phalanx-launch --driver, version 3) -> daemon, in this order:
 *   hello     {job, uid, node, role:"driver"}     node: the driver's host
 *   auth      {mac}   as an agent's, with the same job token
 *   event     {kind, [node], [step], [value], [reason]}  after welcome, any number:
 *             "restart" (node = the node the job relaunches without), "check"
 *             (node, value 1 passed, 0 failed, reason), "stop" and "wait" (no
 *             node; reason: the driver stopped the job, or its requeue waits
 *             for nodes), "role" (no node; reason = one role's goodput ledger,
 *             a record of checkpoint/proto/role_ledger.h; a record the daemon
 *             refuses is logged and ignored); no register: a driver
 *             neither fixes nor changes the job's shape, and sends no heartbeats
 * Daemon -> driver: challenge, welcome, error.
 * Admin (phalanx ckpt / phalanx status, Unix socket, peer credentials) -> daemon:
 *   hello {role:"admin"}, then: ls {[job]}, query {job, gen}, rm {job, gen}, status {},
 *   goodput {job}
 * Daemon -> admin: welcome, list {generations:[{job, gen, step, created, bytes, world}]},
 *   manifest, removed {job, gen}, status {jobs:[...], agents, ...}, error,
 *   goodput {job, report:{...}} (phalanx-ckptd(8) names the fields).
 */
#ifndef PHX_CKPT_WIRE_H
#define PHX_CKPT_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "common/token.h"

/* 2: heartbeat, goodput, the recovery events; 3: drivers; 4: the daemon proves the key */
#define PHX_WIRE_VERSION 4
#define PHX_WIRE_VERSION_MIN 1 /* version 1 peers are still understood */
/* What a message carries unless it needs more (a driver's hello: 3), so a
 * version 2 daemon or agent still reads this build's messages. */
#define PHX_WIRE_VERSION_SEND 2
#define PHX_WIRE_MAX_FRAME (32u << 20) /* a 16k-rank manifest fits with room */
/* The largest manifest a reply carries, with room for the reply's other fields. */
#define PHX_WIRE_MAX_MANIFEST (PHX_WIRE_MAX_FRAME - 4096)
#define PHX_WIRE_NONCE_HEX 64
#define PHX_WIRE_MAC_HEX 64
#define PHX_WIRE_REASON_MAX 255
/*
 * An admin client off the daemon's host proves its uid with a MUNGE
 * credential of this payload: one minted for anything else (Slurm's RPCs)
 * is refused, and munged refuses a credential decoded twice.
 */
#define PHX_WIRE_MUNGE_PAYLOAD "phalanx-ckptd admin v1"
#define PHX_WIRE_CRED_MAX 2048
#define PHX_WIRE_MAX_SHARDS 4096 /* shards in one prepare: ranks of one node */

enum phx_msg {
	PHX_MSG_NONE = 0,
	PHX_MSG_HELLO,
	PHX_MSG_CHALLENGE,
	PHX_MSG_AUTH,
	PHX_MSG_WELCOME,
	PHX_MSG_REGISTER,
	PHX_MSG_REGISTERED,
	PHX_MSG_PREPARE,
	PHX_MSG_ABORT,
	PHX_MSG_COMMIT,
	PHX_MSG_ABORTED,
	PHX_MSG_QUERY,
	PHX_MSG_MANIFEST,
	PHX_MSG_EVENT,
	PHX_MSG_INTERVAL,
	PHX_MSG_ERROR,
	PHX_MSG_LS,
	PHX_MSG_LIST,
	PHX_MSG_RM,
	PHX_MSG_REMOVED,
	PHX_MSG_STATUS,
	PHX_MSG_HEARTBEAT,
	PHX_MSG_GOODPUT,
	PHX_MSG_COUNT
};

enum phx_wire_role { PHX_ROLE_AGENT = 1, PHX_ROLE_ADMIN = 2, PHX_ROLE_DRIVER = 3 };

/* Who reads: the daemon reads agent and admin messages, a client the daemon's. */
enum phx_wire_side { PHX_SIDE_DAEMON, PHX_SIDE_CLIENT };

const char *phx_msg_name(enum phx_msg type);

/* A decoded message: typed fields (those the type carries) and the JSON it came from. */
struct phx_wire_msg {
	enum phx_msg type;
	uint32_t version; /* the sender's "v" */
	struct json_object *obj; /* owns the strings below */
	uint32_t job, uid, nodes, ranks, keep;
	uint64_t gen, step, value, bytes, committed, keep_from, seconds, steps, heartbeat_ms;
	int has_gen, has_job, has_step, has_value, has_uid;
	enum phx_wire_role role;
	const char *node, *layout, *reason, *nonce, *mac, *kind, *mode, *interval;
	const char *cred; /* admin hello: a MUNGE credential, NULL if none */
	const char *proof; /* welcome: the daemon's answer to the auth's nonce, NULL if none */
	size_t nshards;
	struct phx_manifest_shard *shards; /* prepare; node taken from the connection */
	struct json_object *payload; /* manifest (manifest), generations (list), status body */
};

void phx_wire_msg_free(struct phx_wire_msg *m);

/*
 * Checks one frame body as a message read by side: the JSON object, the
 * version, the type, and the keys, types and ranges of that type's fields.
 * 0 with *m filled (free with phx_wire_msg_free), or -1 with err.
 */
int phx_wire_decode(const char *body, size_t len, enum phx_wire_side side, struct phx_wire_msg *m,
		    char *err, size_t errlen);

/* The two paths of phx_wire_decode, for tests: the json-c decoder, and the
 * fast prepare reader (1: decoded, 0: declined, then *m is empty). */
int phx_wire_decode_json(const char *body, size_t len, enum phx_wire_side side,
			 struct phx_wire_msg *m, char *err, size_t errlen);
int phx_wire_decode_prepare_fast(const char *body, size_t len, struct phx_wire_msg *m);

/* Incremental frame reader over a byte stream. */
struct phx_wire_reader {
	char *buf;
	size_t off, len, cap, max, taken;
};

void phx_wire_reader_init(struct phx_wire_reader *r, size_t max_frame);
void phx_wire_reader_free(struct phx_wire_reader *r);
/* Appends bytes received. 0, or -1 when out of memory. */
int phx_wire_reader_feed(struct phx_wire_reader *r, const void *data, size_t len);
/* Reads what a non-blocking fd has: bytes read, 0 at end of stream, or -errno. */
ssize_t phx_wire_reader_read(struct phx_wire_reader *r, int fd);
/*
 * Takes the next whole frame: 1 with body and len pointing into the
 * reader (valid until the next call), 0 when more bytes are needed, -1
 * with err for a frame over the limit or of length 0.
 */
int phx_wire_reader_next(struct phx_wire_reader *r, const char **body, size_t *len, char *err,
			 size_t errlen);

/* Outgoing bytes: frames appended, written as the socket accepts them. */
struct phx_wire_writer {
	char *buf;
	size_t len, off, cap;
};

void phx_wire_writer_free(struct phx_wire_writer *w);
/* Appends obj ("v" added) as one frame; takes the reference to obj. 0 or -1. */
int phx_wire_writer_put(struct phx_wire_writer *w, struct json_object *obj);
/* Appends an encoded frame. */
int phx_wire_writer_put_frame(struct phx_wire_writer *w, const char *frame, size_t len);
/* Writes what it can to a non-blocking fd: 1 all written, 0 more left, -errno on error. */
int phx_wire_writer_flush(struct phx_wire_writer *w, int fd);
static inline size_t phx_wire_writer_pending(const struct phx_wire_writer *w)
{
	return w->len - w->off;
}

/* Encodes obj (with "v", PHX_WIRE_VERSION_SEND unless set) into a malloc'd
 * frame; takes the reference. NULL on failure. */
char *phx_wire_frame(struct json_object *obj, size_t *len);

/* Message builders: a new object with "type" set; "v" is added at framing. */
struct json_object *phx_wire_new(enum phx_msg type);
struct json_object *phx_wire_hello_agent(uint32_t job, uint32_t uid, const char *node);
/* cred: a MUNGE credential of PHX_WIRE_MUNGE_PAYLOAD (TCP), NULL on the Unix socket. */
struct json_object *phx_wire_hello_admin(const char *cred);
struct json_object *phx_wire_hello_driver(uint32_t job, uint32_t uid, const char *node);
struct json_object *phx_wire_error(const char *reason);
struct json_object *phx_wire_prepare(uint64_t gen, uint64_t step,
				     const struct phx_manifest_shard *shards, size_t n);

/*
 * Message order per connection. The daemon's view: an agent sends hello,
 * then auth, then register, then anything of its role; a driver hello,
 * auth, then events; an admin sends
 * hello, then anything of its role. A client's view: challenge (agents)
 * then welcome, then replies and notices.
 */
struct phx_wire_order {
	enum phx_wire_side side;
	enum phx_wire_role role; /* known after hello */
	int stage; /* 0 hello, 1 auth, 2 register, 3 ready */
};

void phx_wire_order_init(struct phx_wire_order *o, enum phx_wire_side side,
			 enum phx_wire_role role);
/* Checks that type may come now and advances; 0, or -1 with err. */
int phx_wire_order_accept(struct phx_wire_order *o, const struct phx_wire_msg *m, char *err,
			  size_t errlen);

/* Fresh random challenge (hex). 0 or -1. */
int phx_wire_nonce(char out[PHX_WIRE_NONCE_HEX + 1]);
/* The agent's answer to a challenge, keyed by its job token. 0 or -1. */
int phx_wire_auth_mac(const char *token, const char *nonce, uint32_t job, uint32_t uid,
		      const char *node, char out[PHX_WIRE_MAC_HEX + 1]);
/* The daemon's check: recomputes the job's token from the cluster key. 1 valid, 0 not. */
int phx_wire_auth_verify(const struct phx_key *key, const char *nonce, uint32_t job, uint32_t uid,
			 const char *node, const char *mac);
/*
 * The other way: the daemon proves it holds the cluster key by answering
 * the nonce an agent or driver put in its auth with a MAC keyed by the
 * job's token, which only the key can mint. phx_wire_welcome_proof gives
 * the daemon's answer (0 or -1); phx_wire_welcome_check is the client's
 * check of it with its token (1 valid, 0 not).
 */
int phx_wire_welcome_proof(const struct phx_key *key, const char *nonce, uint32_t job, uint32_t uid,
			   const char *node, char out[PHX_WIRE_MAC_HEX + 1]);
int phx_wire_welcome_check(const char *token, const char *nonce, uint32_t job, uint32_t uid,
			   const char *node, const char *proof);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Messages between libphalanx (a worker) and its node agent on the agent's
 * Unix socket (PHALANX_AGENT_SOCKET, SOCK_SEQPACKET: one message per
 * datagram). Every message is one fixed-size record; replies to BEGIN and
 * RESTORE carry a memfd of the staging buffer as SCM_RIGHTS. Header-only,
 * like heartbeat.h: libphalanx and the launcher share the layout without
 * sharing a library.
 *
 *   HELLO   worker -> agent: slot             reply: interval, status
 *   BEGIN   worker -> agent: step, bytes,     reply: buf_id, bytes (+ fd)
 *                            flags (PHX_CKPT_SHARDED)
 *   COMMIT  worker -> agent: step, buf_id,    reply: status
 *                            bytes (0: all begun)
 *   RESTORE worker -> agent: -                reply: step, bytes, buf_id (+ fd)
 *   STATUS  worker -> agent: step             reply: status (0 durable, -PHX_EBUSY
 *                                             not yet, -PHX_EIO its writes failed)
 */
#ifndef PHX_CKPT_MSG_H
#define PHX_CKPT_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PHX_CKPT_MAGIC 0x43584850u /* "PHXC" */
#define PHX_CKPT_VERSION 1u
#define PHX_CKPT_ENV_SOCKET "PHALANX_AGENT_SOCKET"
/* A shard larger than this is refused: 1 TiB, far above any GPU's memory. */
#define PHX_CKPT_MAX_BYTES (1ull << 40)

enum phx_ckpt_type {
	PHX_CKPT_HELLO = 1,
	PHX_CKPT_BEGIN,
	PHX_CKPT_COMMIT,
	PHX_CKPT_RESTORE,
	PHX_CKPT_STATUS,
	PHX_CKPT_REPLY = 0x80, /* or-ed into the request's type */
};

/* BEGIN's flags: the shard is this dp rank's part only (else the same on every dp rank). */
#define PHX_CKPT_SHARDED 0x1u

struct phx_ckpt_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t slot;
	int32_t status; /* replies: 0 or a negated PHX_* code */
	uint64_t step;
	uint64_t bytes;
	uint64_t buf_id;
	uint64_t interval; /* HELLO reply: steps between saves, 0 = on request only */
	uint64_t save_request; /* HELLO reply: the heartbeat page's value when attached */
	uint32_t flags; /* BEGIN: PHX_CKPT_SHARDED; 0 elsewhere */
	uint32_t pad;
};

_Static_assert(sizeof(struct phx_ckpt_msg) == 64, "one message is 64 bytes");

static inline void phx_ckpt_msg_init(struct phx_ckpt_msg *m, unsigned type)
{
	memset(m, 0, sizeof(*m));
	m->magic = PHX_CKPT_MAGIC;
	m->version = PHX_CKPT_VERSION;
	m->type = (uint16_t)type;
}

/*
 * Checks a received message of len bytes. 0, or -1 when it is not a
 * well-formed message of this version: wrong size, magic, version or
 * type, a reply where a request was expected (or the reverse), a size out
 * of range.
 */
static inline int phx_ckpt_msg_check(const void *buf, size_t len, int want_reply)
{
	struct phx_ckpt_msg m;
	unsigned base;

	if (len != sizeof(m))
		return -1;
	memcpy(&m, buf, sizeof(m));
	if (m.magic != PHX_CKPT_MAGIC || m.version != PHX_CKPT_VERSION || m.pad)
		return -1;
	if (!!(m.type & PHX_CKPT_REPLY) != !!want_reply)
		return -1;
	base = m.type & ~(unsigned)PHX_CKPT_REPLY;
	if (base < PHX_CKPT_HELLO || base > PHX_CKPT_STATUS)
		return -1;
	if (m.bytes > PHX_CKPT_MAX_BYTES || m.step > INT64_MAX)
		return -1;
	if (!want_reply && m.status)
		return -1;
	if (m.flags & ~(base == PHX_CKPT_BEGIN && !want_reply ? PHX_CKPT_SHARDED : 0u))
		return -1;
	return 0;
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoint staging in the agent's main loop: the workers' socket, the
 * staging buffers, the generations a node holds, and the agents' agreement
 * on what is committed (the round hooks). Disk work is handed to the
 * writer thread (ckpt_io.c); nothing here waits on a disk.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "checkpoint/proto/ckpt_msg.h"
#include "health/health.h"
#include "checkpoint/proto/heartbeat.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/rundir.h"
#include "checkpoint/node/ckpt_int.h"
#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_ckpt.h"
#include "launcher/agent/agent_ckptd.h"
#include "launcher/agent/agent_pmix.h"
#include "phalanx.h"

#define TAG_LISTEN 0u
#define TAG_EVENT 1u
#define TAG_PENDING 2u /* + index */
#define TAG_SLOT 0x10000u /* + slot */
#define NPENDING 64

/* ------------------------------------------------------------ buffers */

/* Buffers nobody needs any more go back to the pool (keeping their memory). */
static void slot_tidy(struct ck_slot *s)
{
	long newest = -1;

	for (int i = 0; i < CK_BUFS; i++) {
		if (s->buf[i].state == B_STAGED && s->buf[i].step > newest)
			newest = s->buf[i].step;
	}
	for (int i = 0; i < CK_BUFS; i++) {
		struct ck_buf *b = &s->buf[i];

		if (b->state != B_STAGED || b->refs || i == s->committed || (i == s->filling) ||
		    b->step == newest)
			continue;
		b->state = B_FREE;
	}
}

/* A buffer for a new save of len bytes: a free one that is big enough, else grown. */
static int pick_buffer(struct phx_ckpt *c, struct ck_slot *s, size_t len)
{
	int best = -1;

	for (int i = 0; i < CK_BUFS; i++) {
		struct ck_buf *b = &s->buf[i];

		if (b->state != B_FREE || b->refs || i == s->committed)
			continue;
		if (b->fd >= 0 && b->cap >= len)
			return i;
		if (best < 0 || b->fd < 0)
			best = i;
	}
	if (best < 0)
		return -1;
	ck_buf_free(&s->buf[best]);
	if (ck_buf_alloc(c, &s->buf[best], len) < 0) {
		phx_error("cannot allocate a %zu-byte staging buffer for rank %lu: %s", len,
			  s->rank, strerror(errno));
		return -2;
	}
	return best;
}

/* ------------------------------------------------------------ generations */

static struct ck_gen *gen_find(struct phx_ckpt *c, long step)
{
	for (int i = 0; i < CK_GENS; i++) {
		if (c->gen[i].used && c->gen[i].step == step)
			return &c->gen[i];
	}
	return NULL;
}

static void gen_clear(struct phx_ckpt *c, struct ck_gen *g)
{
	int *buf = g->buf;
	uint8_t(*digest)[PHX_DIGEST_MAX] = g->digest;
	size_t *len = g->len;
	bool *sharded = g->sharded;
	struct phx_ckpt_shard *all = g->all;
	unsigned *agent_of = g->agent_of;

	memset(g, 0, sizeof(*g));
	g->buf = buf;
	g->digest = digest;
	g->len = len;
	g->sharded = sharded;
	g->all = all;
	g->agent_of = agent_of;
	memset(all, 0, c->world * sizeof(*all));
	memset(agent_of, 0xff, c->world * sizeof(*agent_of));
	for (unsigned i = 0; i < c->nproc; i++)
		g->buf[i] = -1;
}

/* A record for step: the oldest finished one is reused when all are taken. */
static struct ck_gen *gen_new(struct phx_ckpt *c, long step)
{
	struct ck_gen *victim = NULL;

	for (int i = 0; i < CK_GENS; i++) {
		struct ck_gen *g = &c->gen[i];

		if (!g->used) {
			victim = g;
			break;
		}
		if (g->jobs_left == 0 && (!victim || g->step < victim->step))
			victim = g;
	}
	if (!victim)
		return NULL;
	gen_clear(c, victim);
	victim->used = true;
	victim->step = step;
	return victim;
}

static void gen_staged(struct phx_ckpt *c, struct ck_gen *g)
{
	/* A save asked for since the last generation (preemption) goes to every tier. */
	uint64_t req = atomic_load(&((struct phx_hb_header *)c->hb)->save_request);
	unsigned tiers = phx_ckpt_tiers_due(++c->save_no, c->every, req != c->seen_request);

	c->seen_request = req;
	g->due = tiers;
	g->staged_ns = phx_now_ns(CLOCK_MONOTONIC);
	/* phalanx-ckptd hears of it once committed (agent_ckptd_ckpt.c). */
	for (unsigned i = 0; i < c->nproc; i++) {
		struct ck_slot *s = &c->slot[i];
		struct ck_buf *b = &s->buf[g->buf[i]];
		struct ck_job *j = calloc(1, sizeof(*j));

		slot_tidy(s);
		if (!j) {
			phx_error("out of memory: generation %ld is kept in memory only", g->step);
			continue;
		}
		j->kind = J_PERSIST;
		j->slot = i;
		j->rank = s->rank;
		j->step = g->step;
		j->data = b->map;
		j->len = b->len;
		j->tiers = tiers;
		b->refs++;
		g->jobs_left++;
		ck_io_submit(c, j);
	}
	phx_debug("generation %ld staged on %s (save %lu, tiers 0x%x)", g->step, c->node,
		  c->save_no, tiers);
}

static struct ck_buf *buf_by_step(struct ck_slot *s, long step, int *idx)
{
	for (int i = 0; i < CK_BUFS; i++) {
		if (s->buf[i].state == B_STAGED && s->buf[i].step == step) {
			if (idx)
				*idx = i;
			return &s->buf[i];
		}
	}
	return NULL;
}

static void persist_done(struct phx_ckpt *c, struct ck_job *j)
{
	struct ck_slot *s = &c->slot[j->slot];
	struct ck_buf *b = NULL;
	struct ck_gen *g = gen_find(c, j->step);

	for (int i = 0; i < CK_BUFS; i++) {
		if (s->buf[i].refs && s->buf[i].map == j->data)
			b = &s->buf[i];
	}
	if (b) {
		b->refs--;
		if (j->rc == 0 && b->step == j->step) {
			memcpy(b->digest, j->digest, sizeof(b->digest));
			b->digested = true;
		}
	}
	slot_tidy(s);
	if (!g || !g->jobs_left)
		return; /* dropped by a restart meanwhile */
	memcpy(g->digest[j->slot], j->digest, PHX_DIGEST_MAX);
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		if (!(g->due & (1u << t)))
			continue;
		if (j->rc == 0 && (j->written & (1u << t)))
			g->ok[t]++;
		else
			g->failed[t] = true;
	}
	if (--g->jobs_left)
		return;
	g->persisted_ns = phx_now_ns(CLOCK_MONOTONIC);
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		if ((g->due & (1u << t)) && g->ok[t] == c->nproc) {
			g->written |= 1u << t;
			phx_ckpt_state_add(&c->held, (enum phx_ckpt_tier)t, g->step);
		}
	}
}

static void io_done(struct phx_ckpt *c)
{
	struct ck_job *j = ck_io_take_done(c);

	while (j) {
		struct ck_job *next = j->next;

		if (j->kind == J_PERSIST) {
			persist_done(c, j);
		} else {
			c->publishing--;
			if (j->rc == 0) {
				if (j->step > c->published[j->tier])
					c->published[j->tier] = j->step;
				phx_debug("generation %ld published in the %s tier on %s", j->step,
					  phx_ckpt_tier_name(j->tier), c->node);
			}
		}
		free(j->manifest);
		free(j);
		j = next;
	}
}

/* ------------------------------------------------------------ the workers' socket */

static int send_reply(int fd, struct phx_ckpt_msg *m, int pass_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1 };

	m->type |= PHX_CKPT_REPLY;
	m->flags = 0; /* a request's only: a reply with flags is malformed */
	if (pass_fd >= 0) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		h.msg_control = cbuf;
		h.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&h);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	return sendmsg(fd, &h, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(*m) ? 0 : -1;
}

static void drop_conn(struct phx_ckpt *c, int fd)
{
	epoll_ctl(c->ep_fd, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
}

static void slot_disconnect(struct phx_ckpt *c, struct ck_slot *s)
{
	if (s->conn >= 0)
		drop_conn(c, s->conn);
	s->conn = -1;
	/* A save the worker did not commit is dropped: its generation never completes here. */
	if (s->filling >= 0)
		s->buf[s->filling].state = B_FREE;
	s->filling = -1;
}

static int do_begin(struct phx_ckpt *c, struct ck_slot *s, struct phx_ckpt_msg *m)
{
	int i;

	if (s->filling >= 0)
		s->buf[s->filling].state = B_FREE;
	s->filling = -1;
	i = pick_buffer(c, s, (size_t)m->bytes);
	if (i < 0) {
		m->status = i == -1 ? -PHX_EBUSY : -PHX_ENOMEM;
		/* Once per step: a worker that waits for a buffer asks again and again. */
		if (i == -1 && (long)m->step != s->busy_step)
			phx_warn("rank %lu: every staging buffer is still being persisted; the "
				 "save of step %llu waits or is skipped (saves come faster than "
				 "the tiers take them)",
				 s->rank, (unsigned long long)m->step);
		if (i == -1)
			s->busy_step = (long)m->step;
		return send_reply(s->conn, m, -1);
	}
	s->filling = i;
	s->buf[i].state = B_FILLING;
	s->buf[i].step = (long)m->step;
	s->buf[i].len = (size_t)m->bytes;
	s->buf[i].digested = false;
	s->buf[i].sharded = m->flags & PHX_CKPT_SHARDED;
	s->buf[i].begin_ns = phx_now_ns(CLOCK_MONOTONIC);
	m->buf_id = s->buf[i].id;
	m->bytes = s->buf[i].cap;
	return send_reply(s->conn, m, s->buf[i].fd);
}

static int do_commit(struct phx_ckpt *c, unsigned slot, struct ck_slot *s, struct phx_ckpt_msg *m)
{
	struct ck_buf *b = s->filling >= 0 ? &s->buf[s->filling] : NULL;
	struct ck_gen *g;
	long step = (long)m->step;

	if (!b || b->id != m->buf_id || b->step != step) {
		m->status = -PHX_ESTATE;
		return send_reply(s->conn, m, -1);
	}
	if (m->bytes > b->len) {
		m->status = -PHX_EINVAL;
		return send_reply(s->conn, m, -1);
	}
	if (m->bytes)
		b->len = (size_t)m->bytes;
	b->state = B_STAGED;
	s->filling = -1;
	s->pinned = false;
	g = gen_find(c, step);
	if (!g)
		g = gen_new(c, step);
	if (!g) {
		phx_warn("rank %lu: too many generations in flight on %s; step %ld stays in memory "
			 "only",
			 s->rank, c->node, step);
	} else {
		uint64_t stall = phx_now_ns(CLOCK_MONOTONIC) - b->begin_ns;

		if (g->buf[slot] < 0) {
			g->nstaged++;
			g->bytes += b->len;
		}
		if (stall > g->stall_ns)
			g->stall_ns = stall;
		g->buf[slot] = (int)(b - s->buf);
		g->len[slot] = b->len;
		g->sharded[slot] = b->sharded;
		if (g->nstaged == c->nproc && !g->due)
			gen_staged(c, g);
	}
	slot_tidy(s);
	return send_reply(s->conn, m, -1);
}

static int do_restore(struct phx_ckpt *c, struct ck_slot *s, struct phx_ckpt_msg *m)
{
	struct ck_buf *b = s->committed >= 0 ? &s->buf[s->committed] : NULL;
	uint8_t got[PHX_DIGEST_MAX];

	if (!b || b->state != B_STAGED) {
		m->status = c->refused ? -PHX_ELAYOUT : -PHX_ENOENT;
		return send_reply(s->conn, m, -1);
	}
	/* The copy never left this process; a worker could still have written into it. */
	if (b->digested &&
	    (phx_digest_compute(c->algo, b->map, b->len, c->threads, NULL, got) < 0 ||
	     memcmp(got, b->digest, phx_digest_len(c->algo)))) {
		phx_error("rank %lu: the memory copy of generation %ld does not match its digest; "
			  "restart the job to restore from the directory tiers",
			  s->rank, b->step);
		m->status = -PHX_EIO;
		return send_reply(s->conn, m, -1);
	}
	s->pinned = true;
	m->step = (uint64_t)b->step;
	m->bytes = b->len;
	m->buf_id = b->id;
	if (s->loaded == CK_FROM_PARTNER)
		phx_info("rank %lu: restoring generation %ld (%zu bytes, from its partner copy)",
			 s->rank, b->step, b->len);
	else if (s->loaded >= 0)
		phx_info("rank %lu: restoring generation %ld (%zu bytes, read from the %s tier at "
			 "start)",
			 s->rank, b->step, b->len,
			 phx_ckpt_tier_name((enum phx_ckpt_tier)s->loaded));
	else
		phx_info("rank %lu: restoring generation %ld from memory (%zu bytes)", s->rank,
			 b->step, b->len);
	return send_reply(s->conn, m, b->fd);
}

/*
 * STATUS: durable once a generation of that step or a later one is
 * published on every node in a directory tier (in memory when the job has
 * none); failed when every directory tier it was due in failed here.
 */
static int do_status(struct phx_ckpt *c, struct ck_slot *s, struct phx_ckpt_msg *m)
{
	long step = (long)m->step;
	struct ck_gen *g = gen_find(c, step);
	bool disk = false, failed = g && (g->due & ~(1u << PHX_TIER_MEMORY));

	m->status = -PHX_EBUSY;
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		if (!c->dir[t][0])
			continue;
		disk = true;
		if (c->published_all[t] >= step)
			m->status = 0;
		if (g && (g->due & (1u << t)) && !g->failed[t])
			failed = false;
	}
	if (!disk && c->committed[PHX_TIER_MEMORY] >= step)
		m->status = 0;
	if (m->status && failed)
		m->status = -PHX_EIO;
	return send_reply(s->conn, m, -1);
}

static int handle(struct phx_agent *a, unsigned slot, struct phx_ckpt_msg *m)
{
	struct phx_ckpt *c = a->ckpt;
	struct ck_slot *s = &c->slot[slot];

	switch (m->type) {
	case PHX_CKPT_BEGIN:
		return do_begin(c, s, m);
	case PHX_CKPT_COMMIT:
		return do_commit(c, slot, s, m);
	case PHX_CKPT_RESTORE:
		return do_restore(c, s, m);
	case PHX_CKPT_STATUS:
		return do_status(c, s, m);
	default:
		phx_error("rank %lu sent a second hello on its checkpoint connection; closing it",
			  s->rank);
		return -1;
	}
}

/* One message from fd, checked: 0, or -1 (closed or malformed: logged). */
static int receive(int fd, struct phx_ckpt_msg *m, const char *who)
{
	char buf[sizeof(*m) + 1];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 1;
	if (n <= 0)
		return -1;
	if (phx_ckpt_msg_check(buf, (size_t)n, 0) < 0) {
		phx_error("%s sent a malformed checkpoint message (%zd bytes); closing its "
			  "connection (is libphalanx the same version as phalanx-launch?)",
			  who, n);
		return -1;
	}
	memcpy(m, buf, sizeof(*m));
	return 0;
}

static void on_pending(struct phx_agent *a, unsigned k)
{
	struct phx_ckpt *c = a->ckpt;
	int fd = c->pending[k];
	struct phx_ckpt_msg m;
	struct epoll_event ev = { .events = EPOLLIN };
	int rc = receive(fd, &m, "a worker");

	if (rc > 0)
		return;
	c->pending[k] = -1;
	if (rc < 0 || m.type != PHX_CKPT_HELLO || m.slot >= c->nproc) {
		if (!rc)
			phx_error("a worker sent checkpoint message %u for slot %u first; expected "
				  "a hello for a slot below %u",
				  m.type, m.slot, c->nproc);
		drop_conn(c, fd);
		return;
	}
	/* A restarted worker replaces the connection of the one before. */
	slot_disconnect(c, &c->slot[m.slot]);
	c->slot[m.slot].conn = fd;
	ev.data.u32 = TAG_SLOT + m.slot;
	epoll_ctl(c->ep_fd, EPOLL_CTL_MOD, fd, &ev);
	m.interval = c->interval;
	m.save_request = atomic_load(&((struct phx_hb_header *)a->hb)->save_request);
	if (send_reply(fd, &m, -1) < 0)
		slot_disconnect(c, &c->slot[m.slot]);
}

static void on_accept(struct phx_ckpt *c)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = accept4(c->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	unsigned k;

	if (fd < 0)
		return;
	/* The socket's directory is private already; the credentials say it twice. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
		phx_error("refused a checkpoint connection from uid %d: only the job's user",
			  (int)cred.uid);
		close(fd);
		return;
	}
	for (k = 0; k < NPENDING && c->pending[k] >= 0; k++)
		;
	if (k == NPENDING) {
		phx_error("too many checkpoint connections waiting for their hello; refused one");
		close(fd);
		return;
	}
	c->pending[k] = fd;
	epoll_ctl(c->ep_fd, EPOLL_CTL_ADD, fd,
		  &(struct epoll_event){ .events = EPOLLIN, .data.u32 = TAG_PENDING + k });
}

/* The main loop's source: the workers' connections and the writer's completions. */
static void dispatch(void *ctx, short revents)
{
	struct phx_agent *a = ctx;
	struct phx_ckpt *c = a->ckpt;
	struct epoll_event ev[32];
	int n;

	(void)revents; /* called only when readable: epoll says what is */
	if (!c)
		return;
	n = epoll_wait(c->ep_fd, ev, 32, 0);
	for (int i = 0; i < n; i++) {
		uint32_t tag = ev[i].data.u32;

		if (tag == TAG_LISTEN) {
			on_accept(c);
		} else if (tag == TAG_EVENT) {
			io_done(c);
		} else if (tag >= TAG_SLOT) {
			struct ck_slot *s = &c->slot[tag - TAG_SLOT];
			struct phx_ckpt_msg m;
			char who[64];
			int rc;

			if (s->conn < 0)
				continue;
			snprintf(who, sizeof(who), "rank %lu", s->rank);
			rc = receive(s->conn, &m, who);
			if (rc < 0 || (rc == 0 && handle(a, tag - TAG_SLOT, &m) < 0))
				slot_disconnect(c, s);
		} else if (tag - TAG_PENDING < NPENDING && c->pending[tag - TAG_PENDING] >= 0) {
			on_pending(a, tag - TAG_PENDING);
		}
	}
}

static int dispatch_fd(void *ctx, short *events)
{
	const struct phx_agent *a = ctx;

	*events = POLLIN;
	return a->ckpt ? a->ckpt->ep_fd : -1;
}

/* ------------------------------------------------------------ agreement */

static void memory_held(struct phx_ckpt *c, struct phx_ckpt_state *st)
{
	struct ck_slot *s0 = &c->slot[0];

	for (int i = 0; i < CK_BUFS; i++) {
		long step = s0->buf[i].step;
		unsigned k;

		if (s0->buf[i].state != B_STAGED)
			continue;
		for (k = 1; k < c->nproc && buf_by_step(&c->slot[k], step, NULL); k++)
			;
		if (k == c->nproc && (step <= c->committed[PHX_TIER_MEMORY] || gen_find(c, step)))
			phx_ckpt_state_add(st, PHX_TIER_MEMORY, step);
	}
}

/* Persisted here but not yet committed in a tier it is due in: its digests go out. */
static bool to_announce(const struct phx_ckpt *c, const struct ck_gen *g)
{
	if (!g->used || g->jobs_left || g->nstaged < c->nproc)
		return false;
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		if ((g->written & (1u << t)) && g->step > c->committed[t])
			return true;
	}
	return false;
}

/* g's digests after buf's '|'; false when they do not fit (buf unchanged). */
static bool announce(struct phx_ckpt *c, const struct ck_gen *g, char *buf, size_t len)
{
	struct phx_ckpt_shard *s = calloc(c->nproc, sizeof(*s));
	size_t used = strlen(buf);
	int n;

	if (!s || used + 2 >= len) {
		free(s);
		return false;
	}
	for (unsigned i = 0; i < c->nproc; i++) {
		s[i].rank = c->slot[i].rank;
		s[i].bytes = g->len[i];
		memcpy(s[i].digest, g->digest[i], sizeof(s[i].digest));
		s[i].sharded = g->sharded[i];
	}
	buf[used] = '|';
	n = phx_ckpt_digests_format(g->step, s, c->nproc, (int)c->algo, buf + used + 1,
				    len - used - 1);
	free(s);
	if (n >= 0 && (size_t)n < len - used - 1)
		return true;
	buf[used] = '\0';
	return false;
}

/* Rounds while a save is on its way to every node's tiers; half a minute at most. */
#define CKPT_ROUND_NS (25ull * 1000000ull)
#define CKPT_FAST_FOR_NS (30ull * 1000000000ull)

/* Generation g, staged by every local worker, is not yet where its due tiers say it is durable. */
static bool on_its_way(const struct phx_ckpt *c, const struct ck_gen *g)
{
	bool disk = false;

	if (g->jobs_left)
		return true;
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		if (!(g->due & (1u << t)) || g->failed[t])
			continue;
		disk = true;
		if (g->step > c->published_all[t])
			return true;
	}
	return !disk && g->step > c->committed[PHX_TIER_MEMORY];
}

unsigned long long phx_agent_ckpt_round_gap(const struct phx_agent *a, unsigned long long sync_ns)
{
	const struct phx_ckpt *c = a->ckpt;
	uint64_t now = phx_now_ns(CLOCK_MONOTONIC);

	if (!c || sync_ns <= CKPT_ROUND_NS)
		return sync_ns;
	if (c->publishing)
		return CKPT_ROUND_NS;
	for (int i = 0; i < CK_GENS; i++) {
		const struct ck_gen *g = &c->gen[i];

		if (g->used && g->nstaged == c->nproc && now - g->staged_ns < CKPT_FAST_FOR_NS &&
		    on_its_way(c, g))
			return CKPT_ROUND_NS;
	}
	return sync_ns;
}

void phx_agent_ckpt_round_value(struct phx_agent *a, char *buf, size_t len)
{
	struct phx_ckpt *c = a->ckpt;
	struct phx_ckpt_state st;
	size_t used = strlen(buf);
	bool sent[CK_GENS] = { false };

	if (!c || used + 2 >= len)
		return;
	st = c->held;
	st.n[PHX_TIER_MEMORY] = 0;
	memory_held(c, &st);
	memcpy(st.published, c->published, sizeof(st.published));
	buf[used++] = '|';
	phx_ckpt_state_format(&st, buf + used, len - used);
	/*
	 * Every generation the others may still need this node's digests of,
	 * newest first while they fit: the one committed next is the slowest
	 * node's newest, which a fast node may have saved several times past.
	 */
	for (;;) {
		int newest = -1;

		for (int i = 0; i < CK_GENS; i++) {
			if (!sent[i] && to_announce(c, &c->gen[i]) &&
			    (newest < 0 || c->gen[i].step > c->gen[newest].step))
				newest = i;
		}
		if (newest < 0 || !announce(c, &c->gen[newest], buf, len))
			break;
		sent[newest] = true;
	}
}

/* Another agent's shards of a generation, kept for its manifest. */
static void learn(struct phx_agent *a, unsigned agent, const char *text)
{
	struct phx_ckpt *c = a->ckpt;
	struct phx_ckpt_shard *s = calloc(a->nproc, sizeof(*s));
	struct ck_gen *g;
	size_t n;
	long step;

	if (!s)
		return;
	if (phx_ckpt_digests_parse(text, (int)c->algo, &step, s, a->nproc, &n) < 0) {
		phx_error("agent %u sent shard digests '%.80s', not Phalanx's; ignored", agent,
			  text);
		goto out;
	}
	g = gen_find(c, step);
	if (!g)
		g = gen_new(c, step);
	for (size_t i = 0; g && i < n; i++) {
		if (s[i].rank >= c->world)
			continue;
		if (g->agent_of[s[i].rank] == UINT_MAX)
			g->have++;
		g->all[s[i].rank] = s[i];
		g->agent_of[s[i].rank] = agent;
	}
out:
	free(s);
}

static void commit_memory(struct phx_ckpt *c, long step)
{
	for (unsigned i = 0; i < c->nproc; i++) {
		struct ck_slot *s = &c->slot[i];
		int idx, old = s->committed;

		if (!buf_by_step(s, step, &idx))
			continue;
		/* A restored buffer stays while the worker reads it. */
		if (old >= 0 && old != idx && s->pinned)
			continue;
		if (idx != old)
			s->loaded = -1;
		s->committed = idx;
		slot_tidy(s);
	}
}

/* j->manifest NULL: the generation's manifest is another agent's; only collect. */
static void submit_publish(struct phx_ckpt *c, struct ck_job *j, enum phx_ckpt_tier t, long step)
{
	j->kind = J_PUBLISH;
	j->tier = t;
	j->step = step;
	j->gc_bound = c->published_all[t];
	c->publishing++;
	ck_io_submit(c, j);
}

static void commit_tier(struct phx_agent *a, enum phx_ckpt_tier t, long step)
{
	struct phx_ckpt *c = a->ckpt;
	struct ck_gen *g = gen_find(c, step);
	struct ck_job *j;

	c->committed[t] = step;
	if (t == PHX_TIER_LOCAL)
		phx_agent_ckpt_partner_hold(c, step);
	if (a->pmix.me.rank == 0)
		phx_info("checkpoint generation %ld committed in the %s tier on all %u nodes", step,
			 phx_ckpt_tier_name(t), a->pmix.size);
	phx_agent_ckptd_ckpt_commit(a, g, t);
	if (t == PHX_TIER_MEMORY) {
		commit_memory(c, step);
		return;
	}
	if (!g || !(g->written & (1u << t)))
		return;
	if (g->have < c->world) {
		phx_error("generation %ld: the digests of %lu of %lu ranks did not arrive; it is "
			  "not published in the %s tier",
			  step, c->world - g->have, c->world, phx_ckpt_tier_name(t));
		return;
	}
	j = calloc(1, sizeof(*j));
	if (j && c->writer[t])
		j->manifest = ck_manifest_build(c, g, t, a->hosts);
	if (!j || (c->writer[t] && !j->manifest)) {
		phx_error("generation %ld is not published in the %s tier", step,
			  phx_ckpt_tier_name(t));
		free(j);
		return;
	}
	submit_publish(c, j, t, step);
}

void phx_agent_ckpt_round_result(struct phx_agent *a, char **values)
{
	struct phx_ckpt *c = a->ckpt;
	struct phx_ckpt_state *st = calloc(a->pmix.size, sizeof(*st));
	bool ok = c && st;

	for (size_t i = 0; i < a->pmix.size; i++) {
		char *bar = strchr(values[i], '|'), *more = NULL;

		if (bar)
			*bar++ = '\0';
		if (bar && (more = strchr(bar, '|')))
			*more++ = '\0';
		while (ok && more) {
			char *next = strchr(more, '|');

			if (next)
				*next++ = '\0';
			learn(a, (unsigned)i, more);
			more = next;
		}
		if (ok && (!bar || phx_ckpt_state_parse(bar, &st[i]) < 0)) {
			phx_error("agent %zu sent checkpoint state '%.80s', not Phalanx's; no "
				  "generation is committed in this round",
				  i, bar ? bar : "");
			ok = false;
		}
	}
	for (int t = 0; ok && t < PHX_TIER_COUNT; t++) {
		long step = phx_ckpt_common_newest(st, a->pmix.size, (enum phx_ckpt_tier)t);

		c->published_all[t] =
			phx_ckpt_published_everywhere(st, a->pmix.size, (enum phx_ckpt_tier)t);
		if (step > c->committed[t])
			commit_tier(a, (enum phx_ckpt_tier)t, step);
	}
	free(st);
}

static bool persisting(const struct phx_ckpt *c)
{
	for (int i = 0; i < CK_GENS; i++) {
		if (c->gen[i].used && c->gen[i].jobs_left)
			return true;
	}
	return false;
}

/* The workers are done: waiting for the disks is all that is left to do. */
static void wait_io(struct phx_ckpt *c)
{
	struct pollfd pfd = { .fd = c->ev_fd, .events = POLLIN };

	while (persisting(c) || c->publishing) {
		if (poll(&pfd, 1, 1000) > 0)
			io_done(c);
	}
}

/* One agreement round of the end, under its own key; false when it failed. */
static bool final_round(struct phx_agent *a, const char *key)
{
	char **values = calloc(a->pmix.size, sizeof(*values)), mine[8192] = "", err[1024];

	phx_agent_ckpt_round_value(a, mine, sizeof(mine));
	if (!values || phx_pmix_allgather(&a->pmix, key, mine, values, err, sizeof(err)) < 0) {
		phx_error("the last checkpoint agreement failed: %s; generations saved since the "
			  "last round stay unpublished or uncollected",
			  values ? err : "out of memory");
		free(values);
		return false;
	}
	phx_agent_ckpt_round_result(a, values);
	for (size_t i = 0; i < a->pmix.size; i++)
		free(values[i]);
	free(values);
	return true;
}

void phx_agent_ckpt_finish(struct phx_agent *a)
{
	struct phx_ckpt *c = a->ckpt;

	if (!c)
		return;
	wait_io(c);
	if (!final_round(a, "phx.ck.final"))
		return;
	wait_io(c);
	/*
	 * The last generations are published everywhere now: one more round
	 * tells every agent so, and each collects down to `keep` again.
	 */
	if (!final_round(a, "phx.ck.collect"))
		return;
	for (int t = PHX_TIER_LOCAL; t < PHX_TIER_COUNT; t++) {
		struct ck_job *j;

		if (!c->dir[t][0] || c->published[t] < 0 || !(j = calloc(1, sizeof(*j))))
			continue;
		submit_publish(c, j, (enum phx_ckpt_tier)t, c->published[t]);
	}
	wait_io(c);
}

void phx_agent_ckpt_restart(struct phx_agent *a)
{
	struct phx_ckpt *c = a->ckpt;

	if (!c)
		return;
	/* What the stopped workers staged but nobody committed is gone with them. */
	for (int i = 0; i < CK_GENS; i++) {
		if (c->gen[i].used && c->gen[i].step > c->committed[PHX_TIER_MEMORY] &&
		    c->gen[i].nstaged < c->nproc)
			c->gen[i].used = false;
	}
	for (unsigned i = 0; i < c->nproc; i++) {
		struct ck_slot *s = &c->slot[i];

		slot_disconnect(c, s);
		s->pinned = false;
		for (int k = 0; k < CK_BUFS; k++) {
			struct ck_buf *b = &s->buf[k];

			if (b->state == B_STAGED && k != s->committed && !b->refs &&
			    b->step > c->committed[PHX_TIER_MEMORY])
				b->state = B_FREE;
		}
	}
}

/* ------------------------------------------------------------ setup */

static int expand_for(struct phx_agent *a, const char *node, const char *pattern, char *out,
		      size_t len)
{
	const char *job = getenv("SLURM_JOB_ID");
	struct phx_health_ctx ctx = {
		.node = node,
		.job_id = job ? (uint32_t)strtoul(job, NULL, 10) : 0,
		.uid = getuid(),
		.have_uid = true,
	};
	int rc;

	out[0] = '\0';
	if (!pattern || !*pattern)
		return 0;
	rc = phx_health_expand(pattern, &ctx, out, len);
	if (rc < 0) {
		phx_error("checkpoint directory '%s' does not expand on %s: %s (%%j needs a Slurm "
			  "job)",
			  pattern, a->node, strerror(-rc));
		return rc;
	}
	/* Roles in steps of their own save and restore apart: a folder each. */
	if (a->o->step_role && strlen(out) + strlen(a->o->step_role) + 2 > len) {
		phx_error("checkpoint directory '%s/%s' is too long", out, a->o->step_role);
		return -ENAMETOOLONG;
	}
	if (a->o->step_role)
		strcat(strcat(out, "/"), a->o->step_role);
	return 0;
}

static int expand(struct phx_agent *a, const char *pattern, char *out, size_t len)
{
	return expand_for(a, a->node, pattern, out, len);
}

/* Each node's local directory, for the manifest's locations. */
static int node_dirs(struct phx_agent *a, struct phx_ckpt *c)
{
	char dir[4096];

	c->nagents = a->pmix.size;
	c->node_dir = calloc(c->nagents, sizeof(*c->node_dir));
	if (!c->node_dir || !a->hosts)
		return -1;
	for (unsigned i = 0; i < c->nagents; i++) {
		if (expand_for(a, a->hosts[i], a->conf.checkpoint.local_dir, dir, sizeof(dir)) < 0)
			return -1;
		c->node_dir[i] = strdup(dir);
		if (!c->node_dir[i])
			return -1;
	}
	return 0;
}

static int make_socket(struct phx_ckpt *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *tmp = getenv("TMPDIR");
	int rc;

	rc = phx_rundir_make(tmp && *tmp && strlen(tmp) < 64 ? tmp : "/tmp", "phalanx-ckpt",
			     c->sock_dir, sizeof(c->sock_dir), &c->sock_lock);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	snprintf(c->sock_path, sizeof(c->sock_path), "%s/agent.sock", c->sock_dir);
	if (strlen(c->sock_path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, c->sock_path);
	c->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->listen_fd < 0 || bind(c->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(c->listen_fd, 128) < 0)
		return -1;
	c->ep_fd = epoll_create1(EPOLL_CLOEXEC);
	c->ev_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->ep_fd < 0 || c->ev_fd < 0)
		return -1;
	epoll_ctl(c->ep_fd, EPOLL_CTL_ADD, c->listen_fd,
		  &(struct epoll_event){ .events = EPOLLIN, .data.u32 = TAG_LISTEN });
	epoll_ctl(c->ep_fd, EPOLL_CTL_ADD, c->ev_fd,
		  &(struct epoll_event){ .events = EPOLLIN, .data.u32 = TAG_EVENT });
	/* Inherited by every worker through the agent's environment. */
	return setenv(PHX_CKPT_ENV_SOCKET, c->sock_path, 1);
}

static int alloc_state(struct phx_agent *a, struct phx_ckpt *c)
{
	c->slot = calloc(a->nproc, sizeof(*c->slot));
	if (!c->slot)
		return -1;
	for (unsigned i = 0; i < a->nproc; i++) {
		c->slot[i].conn = -1;
		c->slot[i].filling = -1;
		c->slot[i].committed = -1;
		c->slot[i].busy_step = -1;
		c->slot[i].loaded = -1;
		c->slot[i].rank = a->map.slot_rank[i];
		for (int k = 0; k < CK_BUFS; k++)
			c->slot[i].buf[k].fd = -1;
	}
	for (int i = 0; i < CK_GENS; i++) {
		c->gen[i].buf = calloc(a->nproc, sizeof(int));
		c->gen[i].digest = calloc(a->nproc, PHX_DIGEST_MAX);
		c->gen[i].len = calloc(a->nproc, sizeof(size_t));
		c->gen[i].sharded = calloc(a->nproc, sizeof(bool));
		c->gen[i].all = calloc(a->map.world, sizeof(*c->gen[i].all));
		c->gen[i].agent_of = calloc(a->map.world, sizeof(unsigned));
		if (!c->gen[i].buf || !c->gen[i].digest || !c->gen[i].len || !c->gen[i].sharded ||
		    !c->gen[i].all || !c->gen[i].agent_of)
			return -1;
	}
	for (int i = 0; i < NPENDING; i++)
		c->pending[i] = -1;
	return 0;
}

/*
 * The layout the manifest records, resolved over the job's ranks so that
 * each shard gets its coordinates; a restore maps ranks by them. Jobs of
 * several roles keep the spec alone: their ranks are not one layout.
 */
static void ckpt_layout(const struct phx_agent *a, struct phx_ckpt *c)
{
	const char *spec = a->o->layout ? a->o->layout : "dp=*";
	char err[256];

	memset(&c->lay, 0, sizeof(c->lay));
	snprintf(c->layout, sizeof(c->layout), "%s", spec);
	if (a->o->explicit_roles)
		return;
	if (phx_layout_parse(spec, &c->lay, err, sizeof(err)) < 0 ||
	    phx_layout_resolve(&c->lay, c->world, err, sizeof(err)) < 0) {
		memset(&c->lay, 0, sizeof(c->lay));
		return;
	}
	phx_layout_format(&c->lay, c->layout, sizeof(c->layout));
}

static int configure(struct phx_agent *a, struct phx_ckpt *c)
{
	const struct phx_conf *conf = &a->conf;
	const char *job = getenv("SLURM_JOB_ID");

	c->nproc = a->nproc;
	c->world = a->map.world;
	c->hb = a->hb;
	snprintf(c->node, sizeof(c->node), "%s", a->node);
	snprintf(c->job, sizeof(c->job), "%s", job ? job : a->run_id);
	c->job_id = job ? (uint32_t)strtoul(job, NULL, 10) : 0;
	/* The manifest needs a job id; outside Slurm every run is job 1. */
	if (!c->job_id)
		c->job_id = 1;
	/* Every node writes its own directory's manifest; agent 0 the shared one. */
	c->writer[PHX_TIER_LOCAL] = true;
	c->writer[PHX_TIER_SHARED] = a->pmix.me.rank == 0;
	ckpt_layout(a, c);
	c->keep = (unsigned)conf->checkpoint.keep;
	c->algo = (enum phx_digest_algo)conf->checkpoint.digest_algo;
	c->threads = (unsigned)conf->checkpoint.digest_threads;
	c->interval = (unsigned long)conf->checkpoint.interval;
	c->every[PHX_TIER_MEMORY] = 1;
	if (expand(a, conf->checkpoint.local_dir, c->dir[PHX_TIER_LOCAL], 4096) < 0 ||
	    expand(a, conf->checkpoint.shared_dir, c->dir[PHX_TIER_SHARED], 4096) < 0)
		return -1;
	c->every[PHX_TIER_LOCAL] = c->dir[PHX_TIER_LOCAL][0] ? conf->checkpoint.local_every : 0;
	c->every[PHX_TIER_SHARED] = c->dir[PHX_TIER_SHARED][0] ? conf->checkpoint.shared_every : 0;
	for (int t = 0; t < PHX_TIER_COUNT; t++)
		c->committed[t] = c->published[t] = c->published_all[t] = -1;
	return 0;
}

/*
 * The generation every agent can restore: each proposes the newest it
 * verified, all take the oldest proposal, and those that proposed a newer
 * one look again at or below it, until all agree.
 */
static int agree_restore(struct phx_agent *a, struct phx_ckpt *c, long *out)
{
	char **values = calloc(a->pmix.size, sizeof(*values)), mine[32], key[64], err[1024];
	long have = ck_restore_find(c, LONG_MAX);
	int rc = -1;

	for (unsigned round = 0; values && round < 64; round++) {
		long low = LONG_MAX;
		bool same = true;

		snprintf(mine, sizeof(mine), "%ld", have);
		snprintf(key, sizeof(key), "phx.ck.restore.%u.%u", a->epoch, round);
		if (phx_pmix_allgather(&a->pmix, key, mine, values, err, sizeof(err)) < 0) {
			phx_error("checkpoint restore agreement: %s", err);
			break;
		}
		for (size_t i = 0; i < a->pmix.size; i++) {
			long v = strtol(values[i], NULL, 10);

			same &= v == have;
			low = v < low ? v : low;
			free(values[i]);
			values[i] = NULL;
		}
		if (same) {
			*out = have;
			rc = 0;
			break;
		}
		/* -1 nothing, CK_REFUSED (lower) a layout refusal somewhere: all take it. */
		have = low < 0 ? low : ck_restore_find(c, low);
	}
	free(values);
	return rc;
}

int phx_agent_ckpt_setup(struct phx_agent *a)
{
	struct phx_ckpt *c = calloc(1, sizeof(*c));

	if (!c)
		goto oom;
	a->ckpt = c;
	c->listen_fd = c->ep_fd = c->ev_fd = c->sock_lock = -1;
	if (configure(a, c) < 0)
		return PHX_EXIT_USAGE;
	if (alloc_state(a, c) < 0 || node_dirs(a, c) < 0)
		goto oom;
	if (make_socket(c) < 0) {
		phx_error("cannot create the checkpoint socket under %s: %s; set TMPDIR to a "
			  "short, writable directory",
			  c->sock_dir[0] ? c->sock_dir : "TMPDIR", strerror(errno));
		return PHX_EXIT_SETUP;
	}
	return 0;
oom:
	phx_error("out of memory setting up checkpoints");
	return PHX_EXIT_SETUP;
}

/* What every agent agreed to restore becomes each tier's committed generation. */
static void take_restored(struct phx_agent *a, struct phx_ckpt *c, long restored)
{
	c->refused = restored == CK_REFUSED;
	if (c->refused && a->pmix.me.rank == 0)
		phx_error("the newest checkpoint cannot be restored onto this job's layout (the "
			  "nodes' lines above say why); the workers' restore fails with "
			  "PHX_ELAYOUT rather than start from scratch");
	restored = restored < 0 ? -1 : restored;
	c->restored = restored;
	a->resumed_step = restored > 0 ? (uint64_t)restored : 0;
	phx_agent_ckpt_partner_hold(c, restored);
	for (int t = 0; t < PHX_TIER_COUNT && restored >= 0; t++) {
		c->committed[t] = restored;
		if (t != PHX_TIER_MEMORY && c->dir[t][0])
			phx_ckpt_state_add(&c->held, (enum phx_ckpt_tier)t, restored);
	}
	if (restored < 0) {
		for (unsigned i = 0; i < c->nproc; i++) {
			c->slot[i].committed = -1;
			c->slot[i].buf[0].state = B_FREE;
		}
	}
	if (a->pmix.me.rank == 0 && restored >= 0)
		phx_info("restoring checkpoint generation %ld (every shard verified)", restored);
}

int phx_agent_ckpt_agree(struct phx_agent *a)
{
	struct phx_agent_source source = { .fd = dispatch_fd, .handle = dispatch, .ctx = a };
	struct phx_ckpt *c = a->ckpt;
	long restored = -1;

	if (phx_agent_ckpt_partner_setup(a, c) < 0 || agree_restore(a, c, &restored) < 0)
		return PHX_EXIT_PMIX;
	take_restored(a, c, restored);
	if (ck_io_start(c) < 0) {
		phx_error("cannot start the checkpoint writer threads: out of memory or of "
			  "processes (see ulimit -u and the cgroup's pids.max)");
		return PHX_EXIT_SETUP;
	}
	if (phx_agent_pump_add(a, &source) < 0)
		return PHX_EXIT_SETUP;
	return 0;
}

void phx_agent_ckpt_fini(struct phx_agent *a)
{
	struct phx_ckpt *c = a->ckpt;

	if (!c)
		return;
	ck_io_stop(c);
	ck_partner_fini(c);
	for (int i = 0; i < NPENDING; i++) {
		if (c->pending[i] >= 0)
			close(c->pending[i]);
	}
	for (unsigned i = 0; c->slot && i < c->nproc; i++) {
		if (c->slot[i].conn >= 0)
			close(c->slot[i].conn);
		for (int k = 0; k < CK_BUFS; k++)
			ck_buf_free(&c->slot[i].buf[k]);
	}
	for (int i = 0; i < CK_GENS; i++) {
		free(c->gen[i].buf);
		free(c->gen[i].digest);
		free(c->gen[i].len);
		free(c->gen[i].sharded);
		free(c->gen[i].all);
		free(c->gen[i].agent_of);
	}
	for (unsigned i = 0; c->node_dir && i < c->nagents; i++)
		free(c->node_dir[i]);
	free(c->node_dir);
	free(c->slot);
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	if (c->ep_fd >= 0)
		close(c->ep_fd);
	if (c->ev_fd >= 0)
		close(c->ev_fd);
	phx_rundir_remove(c->sock_dir, c->sock_lock);
	free(c);
	a->ckpt = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The trainer's side of checkpoints: a connection to the node agent's
 * socket, staging buffers the agent owns (memfds received over the socket
 * and mapped once), save and restore requests. One lock serialises the
 * calls; the data copies happen outside the library, into the mapping.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/lib/libphalanx_int.h"
#include "checkpoint/proto/ckpt_msg.h"
#include "checkpoint/proto/heartbeat.h"
#include "phalanx.h"

/* The agent keeps at most this many buffers per worker; so does the cache. */
#define MAPS 3

struct map {
	uint64_t id;
	void *p;
	size_t len;
	unsigned long used; /* LRU clock */
	bool pinned; /* by pin_fn */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int sock = -1;
static uint32_t my_slot;
static uint64_t interval, seen_request, clock_tick;
static long last_step = -1; /* last step phx_should_save() said yes to */
static struct map maps[MAPS];
static struct map *open_save; /* between begin and commit */
static long open_step;
static size_t open_bytes; /* what begin asked for */
static void *restore_p;
static size_t restore_len;
/* phx_set_pinning()'s runtime hooks; NULL: the buffers stay pageable. */
static phx_pin_fn pin_fn;
static phx_unpin_fn unpin_fn;
static void *pin_arg;

static void map_pin(struct map *m)
{
	m->pinned = pin_fn && pin_fn(m->p, m->len, pin_arg) == 0;
}

static void map_unpin(struct map *m)
{
	if (m->pinned)
		unpin_fn(m->p, pin_arg);
	m->pinned = false;
}

/* Unpinned first: a runtime must not keep pages it pinned that are unmapped. */
static void map_drop(struct map *m)
{
	if (!m->p)
		return;
	map_unpin(m);
	munmap(m->p, m->len);
	memset(m, 0, sizeof(*m));
}

static void drop_restore(void)
{
	if (restore_p)
		munmap(restore_p, restore_len);
	restore_p = NULL;
	restore_len = 0;
}

static void disconnect(void)
{
	if (sock >= 0)
		close(sock);
	sock = -1;
	for (int i = 0; i < MAPS; i++)
		map_drop(&maps[i]);
	open_save = NULL;
	drop_restore();
}

/* A request and its reply (with a descriptor when fd is not NULL). */
static int call(struct phx_ckpt_msg *m, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1 };
	unsigned type = m->type;
	struct cmsghdr *c;
	ssize_t n;

	m->slot = my_slot;
	if (send(sock, m, sizeof(*m), MSG_NOSIGNAL) != (ssize_t)sizeof(*m))
		goto lost;
	h.msg_control = cbuf;
	h.msg_controllen = sizeof(cbuf);
	do
		n = recvmsg(sock, &h, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0 || phx_ckpt_msg_check(m, (size_t)n, 1) < 0 || m->type != (type | PHX_CKPT_REPLY))
		goto lost;
	c = CMSG_FIRSTHDR(&h);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
		int got;

		memcpy(&got, CMSG_DATA(c), sizeof(got));
		if (fd)
			*fd = got;
		else
			close(got);
	}
	return m->status;
lost:
	/* The agent is gone or speaks another protocol: nothing more works. */
	disconnect();
	return -PHX_ENOAGENT;
}

static int parse_slot(uint32_t *out)
{
	const char *s = getenv(PHX_HB_ENV_SLOT);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return -1;
	v = strtoul(s, &end, 10);
	if (*end || v >= PHX_HB_MAX_SLOTS)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static void ckpt_finalize(void);

static int attach(void)
{
	const char *path = getenv(PHX_CKPT_ENV_SOCKET);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct phx_ckpt_msg m;
	int rc;

	if (sock >= 0)
		return 0;
	/* Before any state phx_finalize() must undo: it runs the hook first. */
	phx_lib_at_finalize(ckpt_finalize);
	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path) || parse_slot(&my_slot) < 0)
		return -PHX_ENOAGENT;
	strcpy(sa.sun_path, path);
	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -PHX_EIO;
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		disconnect();
		return -PHX_ENOAGENT;
	}
	phx_ckpt_msg_init(&m, PHX_CKPT_HELLO);
	rc = call(&m, NULL);
	if (rc)
		return rc;
	interval = m.interval;
	seen_request = m.save_request;
	return 0;
}

static uint64_t save_request(void)
{
	const struct phx_hb_header *h;

	phx_init();
	h = phx_lib_hb_header();
	return h ? atomic_load_explicit(&h->save_request, memory_order_acquire) : 0;
}

int phx_should_save(long step)
{
	uint64_t req;
	int rc;

	if (step < 0)
		return -PHX_EINVAL;
	pthread_mutex_lock(&mu);
	rc = attach();
	if (rc)
		goto out;
	req = save_request();
	if (req != seen_request) {
		seen_request = req;
		rc = 1;
	} else {
		rc = interval && step > 0 && (uint64_t)step % interval == 0 && step != last_step;
	}
	if (rc)
		last_step = step;
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

static struct map *cached(uint64_t id, size_t len)
{
	for (int i = 0; i < MAPS; i++) {
		if (maps[i].p && maps[i].id == id && maps[i].len >= len)
			return &maps[i];
	}
	return NULL;
}

/* A new mapping replaces the least recently used one. */
static struct map *map_new(uint64_t id, int fd, size_t len)
{
	struct map *victim = NULL;
	void *p;

	/* The same buffer grown, else a free entry, else the least recently used. */
	for (int i = 0; i < MAPS && !victim; i++) {
		if (maps[i].p && maps[i].id == id)
			victim = &maps[i];
	}
	for (int i = 0; i < MAPS && !victim; i++) {
		if (!maps[i].p)
			victim = &maps[i];
	}
	if (!victim) {
		victim = &maps[0];
		for (int i = 1; i < MAPS; i++) {
			if (maps[i].used < victim->used)
				victim = &maps[i];
		}
	}
	/* Populated now: the first save's copy then takes no page faults. */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	map_drop(victim);
	victim->id = id;
	victim->p = p;
	victim->len = len;
	map_pin(victim);
	return victim;
}

int phx_set_pinning(phx_pin_fn pin, phx_unpin_fn unpin, void *arg)
{
	if (pin && !unpin)
		return -PHX_EINVAL;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAPS; i++)
		map_unpin(&maps[i]);
	pin_fn = pin;
	unpin_fn = unpin;
	pin_arg = arg;
	for (int i = 0; i < MAPS; i++) {
		if (maps[i].p)
			map_pin(&maps[i]);
	}
	pthread_mutex_unlock(&mu);
	return 0;
}

int phx_save_begin(long step, size_t bytes, void **buf)
{
	return phx_save_begin_kind(step, bytes, PHX_SAVE_REPLICATED, buf);
}

int phx_save_begin_kind(long step, size_t bytes, enum phx_save_kind kind, void **buf)
{
	struct phx_ckpt_msg m;
	struct map *mp;
	int fd = -1, rc;

	if (step < 0 || !buf || bytes > PHX_CKPT_MAX_BYTES ||
	    (kind != PHX_SAVE_REPLICATED && kind != PHX_SAVE_SHARDED))
		return -PHX_EINVAL;
	pthread_mutex_lock(&mu);
	rc = attach();
	if (rc)
		goto out;
	rc = -PHX_ESTATE;
	if (open_save)
		goto out;
	phx_ckpt_msg_init(&m, PHX_CKPT_BEGIN);
	m.step = (uint64_t)step;
	m.bytes = bytes;
	m.flags = kind == PHX_SAVE_SHARDED ? PHX_CKPT_SHARDED : 0;
	rc = call(&m, &fd);
	if (rc)
		goto out;
	rc = -PHX_EIO;
	if (m.bytes < bytes)
		goto out;
	mp = cached(m.buf_id, (size_t)m.bytes);
	if (!mp && (fd < 0 || !(mp = map_new(m.buf_id, fd, (size_t)m.bytes))))
		goto out;
	mp->used = ++clock_tick;
	open_save = mp;
	open_step = step;
	open_bytes = bytes;
	*buf = mp->p;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	pthread_mutex_unlock(&mu);
	return rc;
}

int phx_save_commit(void)
{
	return phx_save_commit_size(0);
}

int phx_save_commit_size(size_t bytes)
{
	struct phx_ckpt_msg m;
	int rc = -PHX_ESTATE;

	pthread_mutex_lock(&mu);
	if (!open_save || sock < 0)
		goto out;
	/* The save stays open: the caller may commit it with a size that fits. */
	rc = -PHX_EINVAL;
	if (bytes > open_bytes)
		goto out;
	phx_ckpt_msg_init(&m, PHX_CKPT_COMMIT);
	m.step = (uint64_t)open_step;
	m.bytes = bytes;
	m.buf_id = open_save->id;
	open_save = NULL;
	/* The agent may reuse the restored buffer from now on. */
	drop_restore();
	rc = call(&m, NULL);
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

void phx_save_abort(void)
{
	pthread_mutex_lock(&mu);
	/* The agent frees the buffer at the next begin; it stays mapped here for reuse. */
	open_save = NULL;
	pthread_mutex_unlock(&mu);
}

/* Milliseconds on CLOCK_MONOTONIC. */
static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int phx_save_wait(long step, int timeout_ms)
{
	int64_t deadline = mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
	int pause_ms = 5;

	if (step < 0)
		return -PHX_EINVAL;
	for (;;) {
		struct phx_ckpt_msg m;
		int rc, left;

		pthread_mutex_lock(&mu);
		rc = attach();
		if (!rc) {
			phx_ckpt_msg_init(&m, PHX_CKPT_STATUS);
			m.step = (uint64_t)step;
			rc = call(&m, NULL);
		}
		pthread_mutex_unlock(&mu);
		if (rc != -PHX_EBUSY)
			return rc;
		/* Commits come with the agents' agreement rounds: poll, backing off to 25 ms. */
		left = timeout_ms < 0 ? pause_ms : (int)(deadline - mono_ms());
		if (left <= 0)
			return -PHX_ETIMEDOUT;
		poll(NULL, 0, left < pause_ms ? left : pause_ms);
		pause_ms = pause_ms < 25 ? pause_ms * 2 : 25;
	}
}

int phx_restore(long *step, const void **data, size_t *bytes)
{
	struct phx_ckpt_msg m;
	int fd = -1, rc;

	if (!step || !data || !bytes)
		return -PHX_EINVAL;
	pthread_mutex_lock(&mu);
	rc = attach();
	if (rc)
		goto out;
	drop_restore();
	phx_ckpt_msg_init(&m, PHX_CKPT_RESTORE);
	rc = call(&m, &fd);
	if (rc)
		goto out;
	rc = -PHX_EIO;
	if (fd < 0)
		goto out;
	/* An empty shard still gets a non-NULL pointer. */
	restore_len = m.bytes ? (size_t)m.bytes : 1;
	restore_p = mmap(NULL, restore_len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (restore_p == MAP_FAILED) {
		restore_p = NULL;
		goto out;
	}
	*step = (long)m.step;
	*data = restore_p;
	*bytes = (size_t)m.bytes;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	pthread_mutex_unlock(&mu);
	return rc;
}

/* Closes the agent socket and unmaps the staging buffers; phx_finalize() runs it. */
static void ckpt_finalize(void)
{
	pthread_mutex_lock(&mu);
	disconnect();
	last_step = -1;
	pthread_mutex_unlock(&mu);
}

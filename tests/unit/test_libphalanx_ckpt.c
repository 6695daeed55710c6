/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libphalanx's checkpoint calls against a scripted agent on a real Unix
 * socket: the save interval and the save request, buffers mapped once and
 * reused, errors passed through, restore, waiting for a save to be durable,
 * and an agent that answers with garbage.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint/proto/ckpt_msg.h"
#include "checkpoint/proto/heartbeat.h"
#include "phalanx.h"
#include "tests/unit/scratch.h"

struct agent {
	int listen_fd;
	int memfd; /* the one staging buffer */
	size_t cap;
	unsigned begins, commits, restores;
	int begin_status; /* forced status of the next BEGIN, 0 = none */
	int garbage; /* answer the next request with a malformed reply */
	uint64_t committed_step;
	uint64_t committed_bytes; /* the last COMMIT's size, 0 = all */
	unsigned statuses; /* STATUS requests */
	unsigned busy_statuses; /* answer this many with -PHX_EBUSY first */
	int status_then; /* then this */
	uint32_t begin_flags; /* the last BEGIN's */
};

static void reply(int fd, struct phx_ckpt_msg *m, int pass)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1 };

	m->type |= PHX_CKPT_REPLY;
	if (pass >= 0) {
		struct cmsghdr *c;

		h.msg_control = cbuf;
		h.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass, sizeof(int));
	}
	assert_int_equal(sendmsg(fd, &h, MSG_NOSIGNAL), sizeof(*m));
}

static void *serve(void *arg)
{
	struct agent *ag = arg;
	int fd = accept(ag->listen_fd, NULL, NULL);
	struct phx_ckpt_msg m;

	while (fd >= 0 && recv(fd, &m, sizeof(m), 0) == sizeof(m)) {
		if (ag->garbage) {
			m.magic = 0;
			send(fd, &m, sizeof(m), MSG_NOSIGNAL);
			continue;
		}
		assert_int_equal(phx_ckpt_msg_check(&m, sizeof(m), 0), 0);
		switch (m.type) {
		case PHX_CKPT_HELLO:
			m.interval = 10;
			m.save_request = 0;
			reply(fd, &m, -1);
			break;
		case PHX_CKPT_BEGIN:
			ag->begins++;
			ag->begin_flags = m.flags;
			m.flags = 0; /* as the agent answers: flags are a request's */
			if (ag->begin_status) {
				m.status = ag->begin_status;
				ag->begin_status = 0;
				reply(fd, &m, -1);
				break;
			}
			if (m.bytes > ag->cap) {
				ag->cap = m.bytes;
				assert_int_equal(ftruncate(ag->memfd, (off_t)ag->cap), 0);
			}
			m.buf_id = ag->cap; /* a new id whenever it grows */
			m.bytes = ag->cap;
			reply(fd, &m, ag->memfd);
			break;
		case PHX_CKPT_COMMIT:
			ag->commits++;
			ag->committed_step = m.step;
			ag->committed_bytes = m.bytes;
			reply(fd, &m, -1);
			break;
		case PHX_CKPT_STATUS:
			ag->statuses++;
			m.status = ag->busy_statuses ? -PHX_EBUSY : ag->status_then;
			if (ag->busy_statuses && ag->busy_statuses != UINT32_MAX)
				ag->busy_statuses--;
			reply(fd, &m, -1);
			break;
		case PHX_CKPT_RESTORE:
			ag->restores++;
			if (!ag->commits) {
				m.status = -PHX_ENOENT;
				reply(fd, &m, -1);
				break;
			}
			m.step = ag->committed_step;
			m.bytes = ag->cap;
			m.buf_id = ag->cap;
			reply(fd, &m, ag->memfd);
			break;
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static struct agent ag;
static pthread_t tid;
static char dir[256], path[300], *page;

static int setup(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char num[32];
	int hb = memfd_create("hb", 0);

	(void)state;
	assert_int_equal(phx_scratch_make(dir, sizeof(dir), "libphalanx"), 0);
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	strcpy(sa.sun_path, path);
	memset(&ag, 0, sizeof(ag));
	ag.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(ag.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ag.listen_fd, 4), 0);
	ag.memfd = memfd_create("stage", MFD_CLOEXEC);
	/* The heartbeat page carries the save request. */
	assert_int_equal(ftruncate(hb, (off_t)phx_hb_size(1)), 0);
	page = mmap(NULL, phx_hb_size(1), PROT_READ | PROT_WRITE, MAP_SHARED, hb, 0);
	phx_hb_format(page, 1);
	snprintf(num, sizeof(num), "%d", hb);
	setenv(PHX_HB_ENV_SHM, num, 1);
	setenv(PHX_HB_ENV_SLOT, "0", 1);
	setenv(PHX_CKPT_ENV_SOCKET, path, 1);
	assert_int_equal(pthread_create(&tid, NULL, serve, &ag), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	phx_finalize();
	pthread_join(tid, NULL);
	close(ag.listen_fd);
	close(ag.memfd);
	unlink(path);
	phx_scratch_remove(dir);
	return 0;
}

static void test_should_save(void **state)
{
	struct phx_hb_header *h;

	(void)state;
	assert_int_equal(phx_should_save(-1), -PHX_EINVAL);
	assert_int_equal(phx_should_save(0), 0);
	assert_int_equal(phx_should_save(9), 0);
	assert_int_equal(phx_should_save(10), 1);
	/* Once per step, however often it is asked. */
	assert_int_equal(phx_should_save(10), 0);
	assert_int_equal(phx_should_save(20), 1);
	/* The agent's save request: true once, at any step. */
	h = (struct phx_hb_header *)page;
	atomic_fetch_add(&h->save_request, 1);
	assert_int_equal(phx_should_save(23), 1);
	assert_int_equal(phx_should_save(24), 0);
}

static void test_save_restore(void **state)
{
	const void *data;
	void *buf, *first;
	size_t bytes;
	long step;

	(void)state;
	assert_int_equal(phx_restore(&step, &data, &bytes), -PHX_ENOENT);
	assert_int_equal(phx_save_commit(), -PHX_ESTATE);
	assert_int_equal(phx_save_begin(10, 4096, &buf), 0);
	/* One save open at a time. */
	assert_int_equal(phx_save_begin(11, 4096, &first), -PHX_ESTATE);
	memset(buf, 0x5a, 4096);
	assert_int_equal(phx_save_commit(), 0);
	first = buf;
	/* The same buffer again: mapped once, the same address. */
	assert_int_equal(phx_save_begin(20, 1000, &buf), 0);
	assert_ptr_equal(buf, first);
	memset(buf, 0x33, 1000);
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(ag.committed_step, 20);
	assert_int_equal(phx_restore(&step, &data, &bytes), 0);
	assert_int_equal(step, 20);
	assert_int_equal(bytes, 4096);
	assert_int_equal(((const unsigned char *)data)[999], 0x33);
	assert_int_equal(((const unsigned char *)data)[1000], 0x5a);
	/* The agent's refusal comes through as it is. */
	ag.begin_status = -PHX_EBUSY;
	assert_int_equal(phx_save_begin(30, 10, &buf), -PHX_EBUSY);
	/* A larger save: a new buffer. */
	assert_int_equal(phx_save_begin(40, 1 << 20, &buf), 0);
	((unsigned char *)buf)[(1 << 20) - 1] = 7;
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(ag.commits, 3);
}

static void test_commit_size(void **state)
{
	void *buf;

	(void)state;
	assert_int_equal(phx_save_commit_size(10), -PHX_ESTATE);
	assert_int_equal(phx_save_begin(50, 8192, &buf), 0);
	/* More than begun: refused, and the save stays open for a size that fits. */
	assert_int_equal(phx_save_commit_size(8193), -PHX_EINVAL);
	assert_int_equal(phx_save_begin(51, 10, &buf), -PHX_ESTATE);
	assert_int_equal(phx_save_commit_size(3000), 0);
	assert_int_equal(ag.committed_step, 50);
	assert_int_equal(ag.committed_bytes, 3000);
	/* The plain commit: everything begun. */
	assert_int_equal(phx_save_begin(60, 100, &buf), 0);
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(ag.committed_bytes, 0);
	assert_int_equal(phx_save_commit_size(0), -PHX_ESTATE);
	/* An aborted save commits nothing; the next begin may follow at once. */
	assert_int_equal(phx_save_begin(70, 100, &buf), 0);
	phx_save_abort();
	assert_int_equal(phx_save_commit(), -PHX_ESTATE);
	assert_int_equal(phx_save_begin(71, 200, &buf), 0);
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(ag.committed_step, 71);
	phx_save_abort(); /* none open: nothing happens */
}

static void test_save_wait(void **state)
{
	(void)state;
	assert_int_equal(phx_save_wait(-1, 0), -PHX_EINVAL);
	/* Not durable yet, then durable: asked again until it is. */
	ag.statuses = 0;
	ag.busy_statuses = 3;
	ag.status_then = 0;
	assert_int_equal(phx_save_wait(40, -1), 0);
	assert_int_equal(ag.statuses, 4);
	/* Never durable: the time given runs out. */
	ag.busy_statuses = UINT32_MAX;
	assert_int_equal(phx_save_wait(40, 50), -PHX_ETIMEDOUT);
	assert_true(ag.statuses > 5);
	assert_int_equal(phx_save_wait(40, 0), -PHX_ETIMEDOUT);
	/* The save's writes failed: said at once. */
	ag.busy_statuses = 0;
	ag.status_then = -PHX_EIO;
	assert_int_equal(phx_save_wait(40, -1), -PHX_EIO);
	assert_string_equal(phx_strerror(-PHX_ETIMEDOUT), "not done within the time given");
}

/* The save's kind goes with BEGIN, and only there; a reply carries none. */
static void test_save_kind(void **state)
{
	struct phx_ckpt_msg m;
	void *buf;

	(void)state;
	assert_int_equal(phx_save_begin_kind(60, 64, PHX_SAVE_SHARDED, &buf), 0);
	assert_int_equal(ag.begin_flags, PHX_CKPT_SHARDED);
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(phx_save_begin(61, 64, &buf), 0);
	assert_int_equal(ag.begin_flags, 0);
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(phx_save_begin_kind(62, 64, (enum phx_save_kind)7, &buf), -PHX_EINVAL);
	phx_ckpt_msg_init(&m, PHX_CKPT_BEGIN);
	m.flags = PHX_CKPT_SHARDED;
	assert_int_equal(phx_ckpt_msg_check(&m, sizeof(m), 0), 0);
	m.flags = 0x2;
	assert_int_equal(phx_ckpt_msg_check(&m, sizeof(m), 0), -1);
	m.flags = PHX_CKPT_SHARDED;
	m.type |= PHX_CKPT_REPLY;
	assert_int_equal(phx_ckpt_msg_check(&m, sizeof(m), 1), -1);
	phx_ckpt_msg_init(&m, PHX_CKPT_COMMIT);
	m.flags = PHX_CKPT_SHARDED;
	assert_int_equal(phx_ckpt_msg_check(&m, sizeof(m), 0), -1);
	assert_string_equal(phx_strerror(-PHX_ELAYOUT),
			    "the checkpoint was saved with another layout and cannot be restored "
			    "onto this one; the launcher's log says why");
}

/* A device runtime's page-locking, as a fake: what is pinned now, and every call. */
static struct {
	void *addr[8];
	size_t len[8];
	unsigned n, pins, unpins;
	int refuse; /* answer pins with an error */
} pinned;

static int fake_pin(void *addr, size_t len, void *arg)
{
	assert_ptr_equal(arg, &pinned);
	pinned.pins++;
	if (pinned.refuse)
		return 1;
	for (unsigned i = 0; i < pinned.n; i++)
		assert_ptr_not_equal(pinned.addr[i], addr); /* never twice */
	assert_true(pinned.n < 8);
	pinned.addr[pinned.n] = addr;
	pinned.len[pinned.n++] = len;
	return 0;
}

static void fake_unpin(void *addr, void *arg)
{
	unsigned i = 0;

	assert_ptr_equal(arg, &pinned);
	pinned.unpins++;
	while (i < pinned.n && pinned.addr[i] != addr)
		i++;
	assert_true(i < pinned.n); /* only what it pinned */
	/* Still mapped when it is unpinned: the first byte reads. */
	assert_int_equal(*(volatile unsigned char *)addr, *(volatile unsigned char *)addr);
	pinned.addr[i] = pinned.addr[--pinned.n];
	pinned.len[i] = pinned.len[pinned.n];
}

static bool is_pinned(const void *addr)
{
	for (unsigned i = 0; i < pinned.n; i++) {
		if (pinned.addr[i] == addr)
			return true;
	}
	return false;
}

/* Each staging buffer is pinned once, reused pinned, unpinned before it is unmapped. */
static void test_pinning(void **state)
{
	unsigned held, pins, unpins;
	void *buf, *first;

	(void)state;
	assert_int_equal(phx_set_pinning(fake_pin, NULL, NULL), -PHX_EINVAL);
	/* The buffers mapped already are pinned at once. */
	assert_int_equal(phx_save_begin(70, 64, &first), 0);
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(phx_set_pinning(fake_pin, fake_unpin, &pinned), 0);
	assert_true(is_pinned(first));
	held = pinned.n;
	/* Saves into it again: no pin more. */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(phx_save_begin(71 + i, 64, &buf), 0);
		assert_ptr_equal(buf, first);
		assert_int_equal(phx_save_commit(), 0);
	}
	assert_int_equal(pinned.pins, held);
	/* A larger save: the agent's new buffer is pinned when mapped (and one it replaces
	 * unpinned). */
	assert_int_equal(phx_save_begin(80, (size_t)4 << 20, &buf), 0);
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(pinned.pins, held + 1);
	assert_true(is_pinned(buf));
	assert_int_equal(pinned.n + pinned.unpins, held + 1);
	/* A runtime that refuses: the buffer is used unpinned, and never unpinned. */
	pinned.refuse = 1;
	pins = pinned.pins;
	assert_int_equal(phx_save_begin(81, (size_t)8 << 20, &buf), 0);
	memset(buf, 1, 64);
	assert_int_equal(phx_save_commit(), 0);
	assert_int_equal(pinned.pins, pins + 1);
	assert_false(is_pinned(buf));
	pinned.refuse = 0;
	/* Off: everything pinned is unpinned, still mapped. */
	assert_int_equal(phx_set_pinning(NULL, NULL, NULL), 0);
	assert_int_equal(pinned.n, 0);
	/* On again; larger saves make the library let go of older buffers: unpinned first. */
	assert_int_equal(phx_set_pinning(fake_pin, fake_unpin, &pinned), 0);
	unpins = pinned.unpins;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(phx_save_begin(90 + i, (size_t)(9 + i) << 20, &buf), 0);
		assert_true(is_pinned(buf));
		assert_int_equal(phx_save_commit(), 0);
	}
	assert_true(pinned.unpins >= unpins + 2);
	assert_true(pinned.n <= 3);
	assert_int_equal(phx_set_pinning(NULL, NULL, NULL), 0);
	assert_int_equal(pinned.n, 0);
}

static void test_garbage(void **state)
{
	void *buf;

	(void)state;
	ag.garbage = 1;
	assert_int_equal(phx_save_begin(50, 10, &buf), -PHX_ENOAGENT);
	assert_string_equal(phx_strerror(-PHX_EBUSY),
			    "the agent is still persisting earlier saves; save at a later step");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_should_save), cmocka_unit_test(test_save_restore),
		cmocka_unit_test(test_save_wait),   cmocka_unit_test(test_save_kind),
		cmocka_unit_test(test_commit_size), cmocka_unit_test(test_pinning),
		cmocka_unit_test(test_garbage),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

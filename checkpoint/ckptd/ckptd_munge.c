/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MUNGE credentials checked on a thread of their own. A credential is
 * good when munged decodes it (right key, not expired, never decoded
 * before) and its payload is PHX_WIRE_MUNGE_PAYLOAD, so a credential
 * minted for Slurm or any other service does not open this door.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <munge.h>

#include "checkpoint/ckptd/ckptd_munge.h"
#include "checkpoint/proto/ckpt_wire.h"
#include "common/log.h"

struct munge_item {
	char *cred;
	struct ckptd_munge_verdict v;
	struct munge_item *next;
};

struct munge_fifo {
	struct munge_item *head, **tail;
};

struct ckptd_munge {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t more;
	struct munge_fifo in, out;
	unsigned queued; /* in the in fifo or being decoded */
	int stop, started;
	munge_ctx_t ctx;
	ckptd_munge_fn done;
};

static void fifo_push(struct munge_fifo *f, struct munge_item *it)
{
	it->next = NULL;
	*f->tail = it;
	f->tail = &it->next;
}

static struct munge_item *fifo_pop(struct munge_fifo *f)
{
	struct munge_item *it = f->head;

	if (it) {
		f->head = it->next;
		if (!f->head)
			f->tail = &f->head;
	}
	return it;
}

static void item_free(struct munge_item *it)
{
	free(it->cred);
	free(it);
}

static void decode(munge_ctx_t ctx, struct munge_item *it)
{
	static const char want[] = PHX_WIRE_MUNGE_PAYLOAD;
	void *payload = NULL;
	int len = 0;
	uid_t uid;
	gid_t gid;
	munge_err_t e = munge_decode(it->cred, ctx, &payload, &len, &uid, &gid);

	if (e != EMUNGE_SUCCESS) {
		const char *s = munge_ctx_strerror(ctx);

		snprintf(it->v.why, sizeof(it->v.why), "MUNGE credential refused: %s",
			 s ? s : munge_strerror(e));
	} else if ((size_t)len != sizeof(want) - 1 || memcmp(payload, want, sizeof(want) - 1)) {
		snprintf(it->v.why, sizeof(it->v.why),
			 "the MUNGE credential was not made for phalanx-ckptd");
	} else {
		it->v.ok = 1;
		it->v.uid = uid;
	}
	free(payload);
}

static void *worker(void *arg)
{
	struct ckptd *d = arg;
	struct ckptd_munge *mu = d->munge;
	uint64_t one = 1;

	pthread_mutex_lock(&mu->mu);
	for (;;) {
		struct munge_item *it;

		while (!mu->stop && !mu->in.head)
			pthread_cond_wait(&mu->more, &mu->mu);
		if (mu->stop)
			break;
		it = fifo_pop(&mu->in);
		pthread_mutex_unlock(&mu->mu);
		decode(mu->ctx, it);
		pthread_mutex_lock(&mu->mu);
		fifo_push(&mu->out, it);
		if (write(d->munge_fd, &one, sizeof(one)) < 0)
			phx_debug("munge: cannot wake the loop: %s", strerror(errno));
	}
	pthread_mutex_unlock(&mu->mu);
	return NULL;
}

int ckptd_munge_start(struct ckptd *d, const char *socket, ckptd_munge_fn done, char *err,
		      size_t errlen)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &d->munge_fd };
	struct ckptd_munge *mu = calloc(1, sizeof(*mu));
	int rc;

	if (!mu)
		return phx_errf(err, errlen, "out of memory");
	mu->in.tail = &mu->in.head;
	mu->out.tail = &mu->out.head;
	mu->done = done;
	pthread_mutex_init(&mu->mu, NULL);
	pthread_cond_init(&mu->more, NULL);
	mu->ctx = munge_ctx_create();
	d->munge = mu;
	if (!mu->ctx)
		return phx_errf(err, errlen, "cannot create a MUNGE context: out of memory");
	if (socket && socket[0] &&
	    munge_ctx_set(mu->ctx, MUNGE_OPT_SOCKET, socket) != EMUNGE_SUCCESS)
		return phx_errf(err, errlen, "ckptd.munge_socket %s: %s", socket,
				munge_ctx_strerror(mu->ctx));
	d->munge_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->munge_fd < 0 || epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->munge_fd, &ev) < 0)
		return phx_errf(err, errlen, "eventfd: %s", strerror(errno));
	rc = pthread_create(&mu->thread, NULL, worker, d);
	if (rc)
		return phx_errf(err, errlen, "cannot start the MUNGE thread: %s", strerror(rc));
	mu->started = 1;
	return 0;
}

int ckptd_munge_check(struct ckptd *d, uint64_t serial, const char *cred)
{
	struct ckptd_munge *mu = d->munge;
	struct munge_item *it;

	if (!mu || mu->queued >= CKPTD_MUNGE_QUEUE)
		return -1;
	it = calloc(1, sizeof(*it));
	if (!it || !(it->cred = strdup(cred))) {
		free(it);
		return -1;
	}
	it->v.serial = serial;
	pthread_mutex_lock(&mu->mu);
	fifo_push(&mu->in, it);
	mu->queued++;
	pthread_cond_signal(&mu->more);
	pthread_mutex_unlock(&mu->mu);
	return 0;
}

void ckptd_munge_collect(struct ckptd *d)
{
	struct ckptd_munge *mu = d->munge;
	struct munge_fifo done = { NULL, &done.head };
	struct munge_item *it;
	uint64_t n;

	if (read(d->munge_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		phx_debug("munge: eventfd: %s", strerror(errno));
	/* Taken in one go, so done() runs without the lock. */
	pthread_mutex_lock(&mu->mu);
	done = mu->out;
	if (!done.head)
		done.tail = &done.head;
	mu->out.head = NULL;
	mu->out.tail = &mu->out.head;
	pthread_mutex_unlock(&mu->mu);
	while ((it = fifo_pop(&done))) {
		mu->queued--;
		mu->done(d, &it->v);
		item_free(it);
	}
}

void ckptd_munge_stop(struct ckptd *d)
{
	struct ckptd_munge *mu = d->munge;
	struct munge_item *it;

	if (!mu)
		return;
	if (mu->started) {
		pthread_mutex_lock(&mu->mu);
		mu->stop = 1;
		pthread_cond_signal(&mu->more);
		pthread_mutex_unlock(&mu->mu);
		pthread_join(mu->thread, NULL);
	}
	while ((it = fifo_pop(&mu->in)))
		item_free(it);
	while ((it = fifo_pop(&mu->out)))
		item_free(it);
	if (mu->ctx)
		munge_ctx_destroy(mu->ctx);
	pthread_cond_destroy(&mu->more);
	pthread_mutex_destroy(&mu->mu);
	free(mu);
	d->munge = NULL;
	if (d->munge_fd >= 0)
		close(d->munge_fd);
	d->munge_fd = -1;
}

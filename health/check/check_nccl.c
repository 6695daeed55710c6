/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL part of phalanx-check: one communicator over the GPUs of two
 * nodes, a warm-up and a few timed all-reduces, and their bus bandwidth
 * as nccl-tests reports it (bytes x 2(n-1)/n per second).
 *
 * The communicators are non-blocking, and every wait polls against the
 * round's deadline: an all-reduce that hangs (a bad link, a stuck peer)
 * is aborted and reported as a timeout, so one bad node never hangs the
 * whole check step.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/hex.h"
#include "common/log.h"
#include "health/check/check.h"

#define TIMED_ITERS 5
#define MAX_GPUS 64

struct pair_run {
	const struct phx_nccl_pair *p;
	struct phx_check_link *link;
	ncclComm_t comm[MAX_GPUS];
	cudaStream_t stream[MAX_GPUS];
	void *buf[MAX_GPUS];
	double deadline;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((format(printf, 3, 4))) static int
link_fail(struct pair_run *r, enum phx_link_status status, const char *fmt, ...)
{
	va_list ap;

	r->link->status = status;
	r->link->busbw_gbps = 0;
	va_start(ap, fmt);
	vsnprintf(r->link->error, sizeof(r->link->error), fmt, ap);
	va_end(ap);
	return -1;
}

int phx_nccl_id(char *hex, size_t len, char *err, size_t errlen)
{
	ncclUniqueId id;
	ncclResult_t rc = ncclGetUniqueId(&id);

	if (rc != ncclSuccess)
		return phx_errf(err, errlen, "ncclGetUniqueId: %s", ncclGetErrorString(rc));
	if (len < 2 * sizeof(id.internal) + 1)
		return phx_errf(err, errlen, "NCCL id buffer too small");
	phx_hex_encode(id.internal, sizeof(id.internal), hex);
	return 0;
}

/* Waits until no communicator is in progress; a failure or the deadline ends it. */
static int wait_comms(struct pair_run *r, const char *what)
{
	for (;;) {
		bool busy = false;

		for (int d = 0; d < r->p->ngpus; d++) {
			ncclResult_t st = ncclInProgress;

			if (!r->comm[d])
				continue;
			if (ncclCommGetAsyncError(r->comm[d], &st) != ncclSuccess)
				st = ncclInternalError;
			if (st == ncclInProgress)
				busy = true;
			else if (st != ncclSuccess)
				return link_fail(r, PHX_LINK_ERROR, "%s: %s", what,
						 ncclGetErrorString(st));
		}
		if (!busy)
			return 0;
		if (now() > r->deadline)
			return link_fail(r, PHX_LINK_TIMEOUT, "%s: no answer after %d s", what,
					 r->p->timeout_s);
		usleep(1000);
	}
}

/* Waits for the queued all-reduces to finish on every GPU. */
static int wait_streams(struct pair_run *r)
{
	for (int d = 0; d < r->p->ngpus; d++) {
		cudaError_t e;

		while ((e = cudaStreamQuery(r->stream[d])) == cudaErrorNotReady) {
			if (wait_comms(r, "all-reduce") < 0)
				return -1;
			if (now() > r->deadline)
				return link_fail(r, PHX_LINK_TIMEOUT,
						 "all-reduce did not finish within %d s",
						 r->p->timeout_s);
			usleep(200);
		}
		if (e != cudaSuccess)
			return link_fail(r, PHX_LINK_ERROR, "all-reduce on GPU %d: %s", d,
					 cudaGetErrorString(e));
	}
	return 0;
}

static int setup(struct pair_run *r, const ncclUniqueId *id)
{
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	ncclResult_t rc;

	config.blocking = 0;
	for (int d = 0; d < r->p->ngpus; d++) {
		cudaError_t e;

		if ((e = cudaSetDevice(d)) != cudaSuccess ||
		    (e = cudaStreamCreateWithFlags(&r->stream[d], cudaStreamNonBlocking)) !=
			    cudaSuccess ||
		    (e = cudaMalloc(&r->buf[d], r->p->bytes)) != cudaSuccess ||
		    (e = cudaMemset(r->buf[d], 0, r->p->bytes)) != cudaSuccess)
			return link_fail(r, PHX_LINK_ERROR, "GPU %d: %s", d, cudaGetErrorString(e));
	}
	ncclGroupStart();
	for (int d = 0; d < r->p->ngpus; d++) {
		cudaSetDevice(d);
		rc = ncclCommInitRankConfig(&r->comm[d], r->p->nranks, *id, r->p->first_rank + d,
					    &config);
		if (rc != ncclSuccess && rc != ncclInProgress) {
			ncclGroupEnd();
			return link_fail(r, PHX_LINK_ERROR, "ncclCommInitRankConfig: %s",
					 ncclGetErrorString(rc));
		}
	}
	rc = ncclGroupEnd();
	if (rc != ncclSuccess && rc != ncclInProgress)
		return link_fail(r, PHX_LINK_ERROR, "NCCL init: %s", ncclGetErrorString(rc));
	return wait_comms(r, "NCCL init");
}

static int all_reduce(struct pair_run *r)
{
	size_t count = r->p->bytes / sizeof(float);
	ncclResult_t rc;

	ncclGroupStart();
	for (int d = 0; d < r->p->ngpus; d++) {
		rc = ncclAllReduce(r->buf[d], r->buf[d], count, ncclFloat, ncclSum, r->comm[d],
				   r->stream[d]);
		if (rc != ncclSuccess && rc != ncclInProgress) {
			ncclGroupEnd();
			return link_fail(r, PHX_LINK_ERROR, "ncclAllReduce: %s",
					 ncclGetErrorString(rc));
		}
	}
	rc = ncclGroupEnd();
	if (rc != ncclSuccess && rc != ncclInProgress)
		return link_fail(r, PHX_LINK_ERROR, "ncclAllReduce: %s", ncclGetErrorString(rc));
	if (wait_comms(r, "all-reduce") < 0)
		return -1;
	return wait_streams(r);
}

static void abort_all(struct pair_run *r)
{
	for (int d = 0; d < r->p->ngpus; d++) {
		if (!r->comm[d])
			continue;
		cudaSetDevice(d);
		ncclCommAbort(r->comm[d]);
		r->comm[d] = NULL;
	}
}

static void teardown(struct pair_run *r, bool failed)
{
	if (failed)
		abort_all(r);
	for (int d = 0; d < r->p->ngpus; d++) {
		cudaSetDevice(d);
		if (r->comm[d])
			ncclCommFinalize(r->comm[d]);
	}
	if (wait_comms(r, "NCCL finalize") < 0)
		abort_all(r);
	for (int d = 0; d < r->p->ngpus; d++) {
		cudaSetDevice(d);
		if (r->comm[d])
			ncclCommDestroy(r->comm[d]);
		if (r->stream[d])
			cudaStreamDestroy(r->stream[d]);
		cudaFree(r->buf[d]);
	}
}

void phx_nccl_run(const struct phx_nccl_pair *pair, struct phx_check_link *link)
{
	struct pair_run r = { .p = pair, .link = link };
	ncclUniqueId id;
	double t0, secs, n = pair->nranks;
	int rc;

	link->status = PHX_LINK_OK;
	if (pair->ngpus < 1 || pair->ngpus > MAX_GPUS ||
	    phx_hex_decode(pair->id_hex, strlen(pair->id_hex), id.internal, sizeof(id.internal))) {
		link_fail(&r, PHX_LINK_ERROR, "bad pair: %d GPUs or a malformed NCCL id",
			  pair->ngpus);
		return;
	}
	r.deadline = now() + pair->timeout_s;
	rc = setup(&r, &id);
	if (!rc)
		rc = all_reduce(&r); /* warm-up: connections are made lazily */
	t0 = now();
	for (int i = 0; !rc && i < TIMED_ITERS; i++)
		rc = all_reduce(&r);
	secs = now() - t0;
	if (!rc && secs > 0) {
		double algbw = (double)pair->bytes * TIMED_ITERS / secs / 1e9;

		/* One rank moves nothing over a bus: its bus bandwidth is 0 by definition. */
		link->busbw_gbps = algbw * 2 * (n - 1) / n;
		phx_info("check: all-reduce with %s over %d GPUs, %zu MiB each: algorithm "
			 "bandwidth %.1f GB/s, bus bandwidth %.1f GB/s",
			 link->peer, pair->nranks, pair->bytes >> 20, algbw, link->busbw_gbps);
	}
	teardown(&r, rc < 0);
	if (link->status != PHX_LINK_OK)
		phx_error("check: NCCL all-reduce with %s: %s", link->peer, link->error);
}

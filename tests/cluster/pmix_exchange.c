/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PMIx wire-up probe for the lab cluster tests.
 *
 * Every rank publishes "hello-from-rank-R@HOST" under the key "phx.test",
 * joins a collecting fence and reads the value of rank (R + 1) % size.
 * On success it prints one line:
 *
 *	rank=R size=S host=HOST peer=P value=hello-from-rank-P@PEERHOST
 *
 * and exits 0. Any failure prints a "phalanx:" message and exits 1.
 * Run it under "srun --mpi=pmix".
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

#define KEY "phx.test"
#define PREFIX "hello-from-rank-"

static void fail(const char *what, pmix_status_t rc)
{
	fprintf(stderr,
		"phalanx: pmix_exchange: %s failed: %s; run it under "
		"'srun --mpi=pmix' and check the slurmd log for PMIx errors\n",
		what, PMIx_Error_string(rc));
}

static int job_size(const pmix_proc_t *me, uint32_t *size)
{
	pmix_proc_t job;
	pmix_value_t *val = NULL;
	pmix_status_t rc;

	PMIX_LOAD_PROCID(&job, me->nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &val);
	if (rc != PMIX_SUCCESS) {
		fail("PMIx_Get(PMIX_JOB_SIZE)", rc);
		return -1;
	}
	if (val->type != PMIX_UINT32 || val->data.uint32 == 0) {
		fprintf(stderr,
			"phalanx: pmix_exchange: PMIX_JOB_SIZE has type %d "
			"and not a positive uint32; the PMIx server is not usable\n",
			(int)val->type);
		PMIX_VALUE_RELEASE(val);
		return -1;
	}
	*size = val->data.uint32;
	PMIX_VALUE_RELEASE(val);
	return 0;
}

static int publish(const char *host, pmix_rank_t rank)
{
	char buf[320];
	pmix_value_t val;
	pmix_status_t rc;

	snprintf(buf, sizeof(buf), PREFIX "%u@%s", rank, host);
	PMIX_VALUE_CONSTRUCT(&val);
	val.type = PMIX_STRING;
	val.data.string = buf;
	rc = PMIx_Put(PMIX_GLOBAL, KEY, &val);
	if (rc != PMIX_SUCCESS) {
		fail("PMIx_Put(" KEY ")", rc);
		return -1;
	}
	rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS) {
		fail("PMIx_Commit", rc);
		return -1;
	}
	return 0;
}

static int fence(const pmix_proc_t *me)
{
	pmix_proc_t all;
	pmix_info_t info;
	pmix_status_t rc;
	bool collect = true;

	PMIX_LOAD_PROCID(&all, me->nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	rc = PMIx_Fence(&all, 1, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	if (rc != PMIX_SUCCESS) {
		fail("PMIx_Fence(PMIX_COLLECT_DATA)", rc);
		return -1;
	}
	return 0;
}

/* Reads the peer's value and checks that it names the peer's rank. */
static int read_peer(const pmix_proc_t *me, pmix_rank_t peer, char *out, size_t len)
{
	pmix_proc_t proc;
	pmix_value_t *val = NULL;
	pmix_status_t rc;
	const char *s, *at;
	char *end;
	unsigned long got;

	PMIX_LOAD_PROCID(&proc, me->nspace, peer);
	rc = PMIx_Get(&proc, KEY, NULL, 0, &val);
	if (rc != PMIX_SUCCESS) {
		fail("PMIx_Get(" KEY ") from the neighbour rank", rc);
		return -1;
	}
	if (val->type != PMIX_STRING || !val->data.string) {
		fprintf(stderr,
			"phalanx: pmix_exchange: rank %u's " KEY " has type %d, "
			"not a string; the exchange mixed up keys\n",
			peer, (int)val->type);
		PMIX_VALUE_RELEASE(val);
		return -1;
	}
	s = val->data.string;
	at = strchr(s, '@');
	got = 0;
	end = NULL;
	if (!strncmp(s, PREFIX, strlen(PREFIX)))
		got = strtoul(s + strlen(PREFIX), &end, 10);
	if (!at || !end || end != at || got != peer || !at[1]) {
		fprintf(stderr,
			"phalanx: pmix_exchange: rank %u's " KEY " is '%s', "
			"expected '" PREFIX "%u@HOST'; the fence delivered a wrong value\n",
			peer, s, peer);
		PMIX_VALUE_RELEASE(val);
		return -1;
	}
	snprintf(out, len, "%s", s);
	PMIX_VALUE_RELEASE(val);
	return 0;
}

int main(void)
{
	pmix_proc_t me;
	pmix_status_t rc;
	pmix_rank_t peer;
	uint32_t size = 0;
	char host[256];
	char value[512];
	int ret = 1;

	if (gethostname(host, sizeof(host)) < 0) {
		perror("phalanx: pmix_exchange: gethostname");
		return 1;
	}
	host[sizeof(host) - 1] = '\0';

	rc = PMIx_Init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		fail("PMIx_Init", rc);
		return 1;
	}
	if (job_size(&me, &size) < 0 || publish(host, me.rank) < 0 || fence(&me) < 0)
		goto out;
	peer = (me.rank + 1) % size;
	if (read_peer(&me, peer, value, sizeof(value)) < 0)
		goto out;
	printf("rank=%u size=%u host=%s peer=%u value=%s\n", me.rank, size, host, peer, value);
	fflush(stdout);
	ret = 0;
out:
	rc = PMIx_Finalize(NULL, 0);
	if (rc != PMIX_SUCCESS) {
		fail("PMIx_Finalize", rc);
		ret = 1;
	}
	return ret;
}

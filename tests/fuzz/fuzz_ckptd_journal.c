/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-ckptd replays its journal on start: whatever a crash or a bad
 * disk left there must give a catalog or a cut journal, never a crash.
 * The input is the journal's bytes; the catalog that results must keep
 * every job's generations in order and within keep.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckptd/ckptd_catalog.h"
#include "checkpoint/ckptd/ckptd_job.h"
#include "checkpoint/ckptd/ckptd_journal.h"
#include "common/log.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "ckptd_journal";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ckptd d;
	uint64_t records = 0, refused = 0;
	size_t good;

	phx_log_set_level(PHX_LOG_ERROR);
	memset(&d, 0, sizeof(d));
	d.keep = 2;
	d.journal.fd = -1;
	good = ckptd_journal_replay(data, size, ckptd_catalog_replay, &d, &records, &refused, NULL,
				    "fuzz");
	if (good > size)
		abort();
	for (size_t b = 0; b < CKPTD_JOB_BUCKETS; b++)
		for (struct ckptd_job *j = d.jobs[b]; j; j = j->next) {
			if (j->ngens > 2)
				abort();
			for (size_t i = 1; i < j->ngens; i++)
				if (j->gens[i - 1].gen >= j->gens[i].gen)
					abort();
			if (j->ngens && j->commit.committed < j->gens[j->ngens - 1].gen)
				abort();
			/* A driver's roles: bounded in number and in every time. */
			if (j->r.nroles > PHX_RL_ROLES_MAX || (j->r.nroles && !j->r.roles))
				abort();
			for (size_t i = 0; i < j->r.nroles; i++)
				for (int k = 0; k < PHX_RL_PARTS; k++)
					if (j->r.roles[i].base_ms[k] > PHX_RL_VALUE_MAX ||
					    j->r.roles[i].cur.part_ms[k] > PHX_RL_VALUE_MAX)
						abort();
		}
	ckptd_jobs_free(&d);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Jobs' registrations and committed generations, through the journal. */
#ifndef PHX_CKPTD_CATALOG_H
#define PHX_CKPTD_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckptd/ckptd.h"

extern const double ckptd_commit_buckets[8];

int ckptd_job_register(struct ckptd *d, struct ckptd_job *j, uint32_t nodes, uint32_t world,
		       const char *layout, const char *interval, char *err, size_t errlen);
/* Journals the ready generation, then publishes it; 0 or -1 (journal failed: not published). */
int ckptd_publish(struct ckptd *d, struct ckptd_job *j, uint64_t gen, char *err, size_t errlen);
const struct ckptd_entry *ckptd_entry_find(const struct ckptd_job *j, uint64_t gen);
int ckptd_remove(struct ckptd *d, struct ckptd_job *j, uint64_t gen, char *err, size_t errlen);
int ckptd_note_failure(struct ckptd *d, struct ckptd_job *j);
/* Once a second: node-seconds observed, for the failure rate. */
void ckptd_tick(struct ckptd *d);
int ckptd_catalog_load(struct ckptd *d, char *err, size_t errlen);
/* Applies one journal record (a ckptd_replay_fn; arg is the daemon). */
int ckptd_catalog_replay(void *arg, const char *body, size_t len, char *err, size_t errlen);
uint64_t ckptd_interval_for(struct ckptd *d, struct ckptd_job *j, const char **mode,
			    uint64_t *steps);

#endif

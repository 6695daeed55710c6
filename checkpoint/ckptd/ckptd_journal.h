/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon's append-only journal of checksummed records; what the
 * records say is the catalog's and recovery's business.
 */
#ifndef PHX_CKPTD_JOURNAL_H
#define PHX_CKPTD_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

struct ckptd_journal {
	int fd;
	char path[4096];
	uint64_t bytes, records;
	uint64_t refused; /* records replay refused, kept in PATH.refused */
	int broken; /* a failed sync could not be undone: nothing more is written */
	int (*sync)(int fd); /* fdatasync; tests put a failing one here */
};

typedef int (*ckptd_replay_fn)(void *arg, const char *body, size_t len, char *err, size_t errlen);
/*
 * Replays the records of a journal's bytes; returns the length of the good
 * prefix, which ends only at a torn or corrupt record (a bad length or
 * checksum: a crash while writing). A whole record that fn refuses is
 * counted in *refused, appended to the file qpath (unless NULL; created
 * only then, in the journal's own format) and skipped: the records after it
 * still count.
 */
size_t ckptd_journal_replay(const unsigned char *data, size_t len, ckptd_replay_fn fn, void *arg,
			    uint64_t *records, uint64_t *refused, const char *qpath,
			    const char *path);
int ckptd_journal_open(struct ckptd_journal *jr, const char *path, ckptd_replay_fn fn, void *arg,
		       char *err, size_t errlen);
int ckptd_journal_append(struct ckptd_journal *jr, const char *body, size_t len, char *err,
			 size_t errlen);
/* Writes a fresh journal from the records emit() appends, and swaps it in atomically. */
typedef int (*ckptd_emit_fn)(void *arg, struct ckptd_journal *out, char *err, size_t errlen);
int ckptd_journal_compact(struct ckptd_journal *jr, ckptd_emit_fn emit, void *arg, char *err,
			  size_t errlen);
/* An append without a sync, for compaction's emit(). */
int ckptd_journal_put(struct ckptd_journal *jr, const char *body, size_t len, char *err,
		      size_t errlen);
void ckptd_journal_close(struct ckptd_journal *jr);
uint32_t ckptd_crc32(const void *data, size_t len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon's journal: records of [4-byte big-endian length][4-byte
 * CRC-32 of the body][body], appended and synced before the change they
 * describe is acted on. Replay stops at the first record that is short or
 * does not check (a write cut by a crash) and cuts the file there.
 * Compaction writes the live state as a new journal and renames it over
 * the old one, so a crash at any point leaves one whole journal.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckptd/ckptd_journal.h"
#include "checkpoint/proto/ckpt_manifest.h"
#include "common/file.h"
#include "common/log.h"

#define MAX_RECORD (PHX_MANIFEST_MAX_BYTES + 4096u)

/* CRC-32 (IEEE, as zlib's), eight bytes a step: a 16k-rank commit record is megabytes. */
uint32_t ckptd_crc32(const void *data, size_t len)
{
	static uint32_t t[8][256];
	const unsigned char *p = data;
	uint32_t crc = 0xffffffffu;

	if (!t[0][1]) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			t[0][i] = c;
		}
		for (uint32_t i = 0; i < 256; i++)
			for (int k = 1; k < 8; k++)
				t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
	}
	for (; len >= 8; len -= 8, p += 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				     (uint32_t)p[3] << 24);

		crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
		      t[4][lo >> 24] ^ t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
	}
	while (len--)
		crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc ^ 0xffffffffu;
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

size_t ckptd_journal_replay(const unsigned char *data, size_t len, ckptd_replay_fn fn, void *arg,
			    uint64_t *records, uint64_t *refused, const char *qpath, const char *path)
{
	size_t off = 0;
	char err[512];
	int qfd = -1;

	while (len - off >= 8) {
		uint32_t n = get32(data + off), crc = get32(data + off + 4);

		if (!n || n > MAX_RECORD || len - off - 8 < n) {
			phx_warn("journal %s: record at byte %zu is cut short (a crash while "
				 "writing); the journal ends there",
				 path, off);
			return off;
		}
		if (ckptd_crc32(data + off + 8, n) != crc) {
			phx_warn("journal %s: record at byte %zu fails its checksum; the journal "
				 "ends there",
				 path, off);
			return off;
		}
		if (fn(arg, (const char *)data + off + 8, n, err, sizeof(err)) < 0) {
			/* Whole and checksummed: what follows is good, and is kept. */
			phx_warn("journal %s: record at byte %zu is refused (%s); it is kept in "
				 "%s.refused and the records after it are replayed",
				 path, off, err, path);
			(*refused)++;
			if (qpath && qfd < 0)
				qfd = open(qpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			if (qfd >= 0 && phx_write_all(qfd, data + off, 8 + (size_t)n) < 0)
				phx_warn("journal %s: cannot keep the refused record: %s", path,
					 strerror(errno));
		} else {
			(*records)++;
		}
		off += 8 + n;
	}
	if (off != len)
		phx_warn("journal %s: %zu stray bytes at the end are dropped", path, len - off);
	if (qfd >= 0 && (fsync(qfd) < 0 || close(qfd) < 0))
		phx_warn("journal %s: cannot sync %s: %s", path, qpath, strerror(errno));
	return off;
}

int ckptd_journal_open(struct ckptd_journal *jr, const char *path, ckptd_replay_fn fn, void *arg,
		       char *err, size_t errlen)
{
	char *data = NULL;
	size_t len = 0, good;
	char qpath[4096 + 16];
	int rc;

	memset(jr, 0, sizeof(*jr));
	jr->fd = -1;
	jr->sync = fdatasync;
	snprintf(jr->path, sizeof(jr->path), "%s", path);
	rc = phx_file_read(path, (size_t)1 << 40, &data, &len);
	if (rc < 0 && rc != -ENOENT)
		return phx_errf(err, errlen, "cannot read journal %s: %s", path, strerror(-rc));
	snprintf(qpath, sizeof(qpath), "%s.refused", path);
	good = data ? ckptd_journal_replay((unsigned char *)data, len, fn, arg, &jr->records,
					   &jr->refused, qpath, path)
		    : 0;
	free(data);
	jr->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (jr->fd < 0)
		return phx_errf(err, errlen, "cannot open journal %s: %s", path, strerror(errno));
	if (good != len && (ftruncate(jr->fd, (off_t)good) < 0 || fsync(jr->fd) < 0))
		return phx_errf(err, errlen, "cannot cut journal %s at byte %zu: %s", path, good,
				strerror(errno));
	if (lseek(jr->fd, (off_t)good, SEEK_SET) < 0)
		return phx_errf(err, errlen, "cannot seek in journal %s: %s", path,
				strerror(errno));
	jr->bytes = good;
	if (rc == -ENOENT && phx_file_sync_parent(path) < 0)
		return phx_errf(err, errlen, "cannot sync the folder of %s", path);
	return 0;
}

static int append_nosync(struct ckptd_journal *jr, const char *body, size_t len, char *err,
			 size_t errlen)
{
	unsigned char head[8];
	int rc;

	if (!len || len > MAX_RECORD)
		return phx_errf(err, errlen, "journal record of %zu bytes is out of range", len);
	put32(head, (uint32_t)len);
	put32(head + 4, ckptd_crc32(body, len));
	rc = phx_write_all(jr->fd, head, sizeof(head));
	if (!rc)
		rc = phx_write_all(jr->fd, body, len);
	if (rc < 0) {
		/* Cut a half-written record so the next append starts clean. */
		if (ftruncate(jr->fd, (off_t)jr->bytes) == 0)
			lseek(jr->fd, (off_t)jr->bytes, SEEK_SET);
		return phx_errf(err, errlen, "cannot write journal %s: %s", jr->path,
				strerror(-rc));
	}
	jr->bytes += sizeof(head) + len;
	jr->records++;
	return 0;
}

/*
 * A record whose sync failed must not come back on the next start (an
 * aborted generation would replay as committed): it is cut off and the cut
 * synced. Where even that fails, the file's state is unknown, and the
 * journal takes nothing more until the daemon is restarted.
 */
static int undo_unsynced(struct ckptd_journal *jr, uint64_t bytes, uint64_t records)
{
	jr->bytes = bytes;
	jr->records = records;
	if (ftruncate(jr->fd, (off_t)bytes) < 0 || lseek(jr->fd, (off_t)bytes, SEEK_SET) < 0 ||
	    jr->sync(jr->fd) < 0) {
		jr->broken = 1;
		return -1;
	}
	return 0;
}

int ckptd_journal_append(struct ckptd_journal *jr, const char *body, size_t len, char *err,
			 size_t errlen)
{
	uint64_t bytes = jr->bytes, records = jr->records;
	int e;

	if (jr->broken)
		return phx_errf(err, errlen,
				"journal %s is not written after a failed sync; restart "
				"phalanx-ckptd once the disk is healthy",
				jr->path);
	if (append_nosync(jr, body, len, err, errlen) < 0)
		return -1;
	if (jr->sync(jr->fd) == 0)
		return 0;
	e = errno;
	if (undo_unsynced(jr, bytes, records) < 0)
		return phx_errf(err, errlen,
				"cannot sync journal %s (%s), nor cut the record off again; "
				"nothing more is journaled: restart phalanx-ckptd once the disk "
				"is healthy",
				jr->path, strerror(e));
	return phx_errf(err, errlen, "cannot sync journal %s: %s; the record was cut off",
			jr->path, strerror(e));
}

int ckptd_journal_compact(struct ckptd_journal *jr, ckptd_emit_fn emit, void *arg, char *err,
			  size_t errlen)
{
	struct ckptd_journal tmp = { .fd = -1, .sync = jr->sync };

	if (strlen(jr->path) + 5 > sizeof(tmp.path))
		return phx_errf(err, errlen, "journal path %s is too long", jr->path);
	memcpy(tmp.path, jr->path, strlen(jr->path));
	memcpy(tmp.path + strlen(jr->path), ".new", 5);
	tmp.fd = open(tmp.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (tmp.fd < 0)
		return phx_errf(err, errlen, "cannot create %s: %s", tmp.path, strerror(errno));
	/* Records go through the unsynced path; one fsync covers them all. */
	if (emit(arg, &tmp, err, errlen) < 0)
		goto fail;
	if (fsync(tmp.fd) < 0 || rename(tmp.path, jr->path) < 0 ||
	    phx_file_sync_parent(jr->path) < 0) {
		phx_errf(err, errlen, "cannot replace journal %s: %s", jr->path, strerror(errno));
		goto fail;
	}
	close(jr->fd);
	jr->fd = tmp.fd;
	jr->bytes = tmp.bytes;
	jr->records = tmp.records;
	/* A fresh file, synced, written from memory: whatever broke is behind it. */
	jr->broken = 0;
	return 0;
fail:
	close(tmp.fd);
	unlink(tmp.path);
	return -1;
}

/* Used by compaction's emit callbacks: an append without its own fsync. */
int ckptd_journal_put(struct ckptd_journal *jr, const char *body, size_t len, char *err,
		      size_t errlen)
{
	return append_nosync(jr, body, len, err, errlen);
}

void ckptd_journal_close(struct ckptd_journal *jr)
{
	if (jr->fd >= 0)
		close(jr->fd);
	jr->fd = -1;
}

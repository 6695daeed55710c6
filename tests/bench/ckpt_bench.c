/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoint benchmark (tests/bench/ckpt runs it), each figure against a
 * floor measured in the same run:
 *
 *   ckpt_bench stall BYTES SAVES   (a worker under phalanx-launch)
 *       the stall of a save through libphalanx (phx_save_begin + copy of
 *       BYTES + phx_save_commit) against memcpy of the same bytes: the
 *       first two saves (each into a new agent buffer: the committed one
 *       is kept while the next is filled) against a copy into fresh
 *       memory, later ones (buffers reused) against a copy into memory
 *       already touched.
 *   ckpt_bench io BYTES DIR ALGO
 *       persisting a shard (digest on helper threads while it is written,
 *       fsync, rename, fsync of the directory) against dd writing the same
 *       bytes with conv=fsync; restoring it with verification against
 *       reading the same file; both digests' speed alone.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/proto/digest.h"
#include "checkpoint/node/ckpt.h"
#include "phalanx.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *must_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "phalanx: bench: cannot allocate %zu bytes\n", n);
		exit(2);
	}
	return p;
}

static void fill(unsigned char *p, size_t n)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

static double gib_s(size_t n, double s)
{
	return (double)n / s / (double)(1u << 30);
}

static int stall(size_t n, int saves)
{
	unsigned char *src = must_alloc(n), *dst;
	double t, cold, warm;
	void *buf;
	int rc;

	fill(src, n);
	/* The floors: one copy into fresh memory, one into memory already touched. */
	dst = must_alloc(n);
	t = now();
	memcpy(dst, src, n);
	cold = now() - t;
	t = now();
	memcpy(dst, src, n);
	warm = now() - t;
	munmap(dst, n);
	printf("memcpy %zu MiB: fresh %.3f s (%.2f GiB/s), touched %.3f s (%.2f GiB/s)\n", n >> 20,
	       cold, gib_s(n, cold), warm, gib_s(n, warm));
	for (int i = 1; i <= saves; i++) {
		double floor = i <= 2 ? cold : warm;

		t = now();
		rc = phx_save_begin(i, n, &buf);
		if (rc) {
			fprintf(stderr, "phalanx: bench: phx_save_begin: %s\n", phx_strerror(rc));
			return 1;
		}
		memcpy(buf, src, n);
		rc = phx_save_commit();
		t = now() - t;
		if (rc) {
			fprintf(stderr, "phalanx: bench: phx_save_commit: %s\n", phx_strerror(rc));
			return 1;
		}
		printf("save %d of %zu MiB: stall %.3f s, %.3fx memcpy into %s memory "
		       "(target <= 1.2x)\n",
		       i, n >> 20, t, t / floor, i <= 2 ? "fresh" : "touched");
		fflush(stdout);
		/* A training step between saves: the agent digests the last one meanwhile. */
		sleep(2);
	}
	munmap(src, n);
	return 0;
}

static double run_dd(const char *path, size_t n)
{
	char count[64], of[4300];
	double t = now();
	pid_t pid;
	int status;

	snprintf(count, sizeof(count), "count=%zu", n >> 20);
	snprintf(of, sizeof(of), "of=%s", path);
	pid = fork();
	if (pid == 0) {
		execlp("dd", "dd", "if=/dev/zero", of, "bs=1M", count, "conv=fsync", "status=none",
		       (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "phalanx: bench: dd failed\n");
		exit(2);
	}
	return now() - t;
}

/* The file's pages out of the page cache, so both reads come from the disk. */
static void uncache(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

static double plain_read(const char *path, unsigned char *dst, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	double t = now();
	size_t off = 0;

	while (fd >= 0 && off < n) {
		ssize_t r = read(fd, dst + off, n - off < (16u << 20) ? n - off : (16u << 20));

		if (r <= 0)
			break;
		off += (size_t)r;
	}
	t = now() - t;
	if (fd >= 0)
		close(fd);
	if (off != n) {
		fprintf(stderr, "phalanx: bench: short read of %s\n", path);
		exit(2);
	}
	return t;
}

static int io(size_t n, const char *dir, const char *algo_name)
{
	unsigned char *src = must_alloc(n), *dst = must_alloc(n);
	char path[4200], ddpath[4200], err[512];
	struct phx_ckpt_entry e = { .bytes = n };
	enum phx_digest_algo algo;
	double t_dd, t_ours, t_read, t_load, t;
	/* Digest threads of a restore, as checkpoint.digest_threads (0: one per CPU). */
	unsigned threads = getenv("PHX_BENCH_DIGEST_THREADS")
				   ? (unsigned)atoi(getenv("PHX_BENCH_DIGEST_THREADS"))
				   : 0;

	if (phx_digest_parse(algo_name, &algo) < 0) {
		fprintf(stderr, "phalanx: bench: unknown digest '%s'\n", algo_name);
		return 2;
	}
	e.algo = (int)algo;
	fill(src, n);
	memset(dst, 0, n);
	snprintf(path, sizeof(path), "%s/bench-rank-0.shard", dir);
	snprintf(ddpath, sizeof(ddpath), "%s/bench-dd.bin", dir);
	t = now();
	if (phx_digest_compute(algo, src, n, 0, NULL, e.digest) < 0)
		return 2;
	t = now() - t;
	printf("digest %s of %zu MiB in memory: %.3f s (%.2f GiB/s, all CPUs)\n", algo_name,
	       n >> 20, t, gib_s(n, t));
	t_dd = run_dd(ddpath, n);
	/* Both writes start from the same page cache: dd's clean pages would go during ours. */
	unlink(ddpath);
	t = now();
	if (phx_ckpt_persist_file(path, src, n, (int)algo, 0, e.digest) < 0) {
		fprintf(stderr, "phalanx: bench: cannot persist %s\n", path);
		return 2;
	}
	t_ours = now() - t;
	printf("persist %zu MiB (%s): %.3f s (%.2f GiB/s); dd conv=fsync %.3f s (%.2f GiB/s); "
	       "ratio %.3f (target >= 0.9)\n",
	       n >> 20, algo_name, t_ours, gib_s(n, t_ours), t_dd, gib_s(n, t_dd), t_dd / t_ours);
	uncache(path);
	t_read = plain_read(path, dst, n);
	for (int cached = 0; cached < 2; cached++) {
		if (!cached) {
			uncache(path);
			t_read = plain_read(path, dst, n);
			uncache(path);
		} else {
			t_read = plain_read(path, dst, n);
		}
		memset(dst, 0, n);
		t = now();
		if (phx_ckpt_load_file(path, &e, threads, dst, err, sizeof(err)) < 0) {
			fprintf(stderr, "phalanx: bench: %s\n", err);
			return 2;
		}
		t_load = now() - t;
		if (memcmp(dst, src, n)) {
			fprintf(stderr, "phalanx: bench: the restored bytes differ\n");
			return 2;
		}
		printf("restore+verify %zu MiB (%s, %s): %.3f s (%.2f GiB/s); plain read %.3f s "
		       "(%.2f GiB/s); ratio %.3f (target >= 0.8)\n",
		       n >> 20, algo_name, cached ? "page cache" : "from disk", t_load,
		       gib_s(n, t_load), t_read, gib_s(n, t_read), t_read / t_load);
	}
	unlink(path);
	unlink(ddpath);
	munmap(src, n);
	munmap(dst, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "stall"))
		return stall(strtoull(argv[2], NULL, 0), atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "io"))
		return io(strtoull(argv[2], NULL, 0), argv[3], argv[4]);
	fprintf(stderr, "usage: ckpt_bench stall BYTES SAVES | io BYTES DIR sha256|xxh3-128\n");
	return 2;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Simulated node agents for phalanx-ckptd: many clients (common/ckpt_client)
 * in one process and one poll loop, each a node of one job with some ranks.
 * Used by the commit benchmark (tests/bench/ckpt-commit) and the cluster
 * test (tests/cluster/80-ckptd.bats).
 *
 *   ckpt_sim run   --address A (--key FILE | --token HEX) --job J --uid U --nodes N
 *                  [--job-nodes M --first-node I] [--ranks-per-node R] [--gens G]
 *                  [--first-gen S] [--prepare-nodes K] [--no-wait] [--abort-gen X]
 *                  [--shard-dir DIR] [--stats] [--daemon-pid PID]
 *                  [--hold-after G --hold-file PATH]
 *   ckpt_sim query --address A (--key FILE | --token HEX) --job J --uid U
 *                  [--job-nodes M] [--ranks-per-node R] [--gen G]
 *   ckpt_sim train --address A (--key FILE | --token HEX) --job J --uid U
 *                  --node-name NAME [--job-nodes M --first-node I] [--seconds S]
 *                  [--save-every N] [--report KIND[:REASON]] [--report-at STEP]
 *                  [--report-times K] [--report-node NAME] [--report-value V]
 *
 *   ckpt_sim report --address A (--key FILE | --token HEX) --job J --uid U
 *                  --node-name NAME --report KIND[:REASON] [--report-node N]
 *                  [--report-value V] [--job-nodes M --first-node I]
 *
 * train: one node NAME of the job trains: one step per heartbeat period
 * the daemon asked for, a heartbeat each step, and (first node only) a
 * generation every N steps (default 10) with its save stall reported;
 * prints "step STEP" now and then. At step STEP (--report-at) it sends the
 * report KIND ("crash", "check", ...) K times, one step apart, then goes
 * on; S seconds (0 = until killed) end it with "done".
 * report: registers, sends one report, leaves.
 *
 * run: this process's nodes (N of the job's M, from node I) connect; for
 * each generation every node (or only the first K, or with --no-wait: then
 * the command leaves without waiting for a commit) sends prepare for its
 * ranks; prints "committed GEN STEP", "aborted GEN" or "prepared GEN".
 * --shard-dir writes each rank's shard there (4 KiB) with its SHA-256, so
 * 'phalanx ckpt verify' can check them.
 * --stats prints, p50 and p99, the commit latency (from the last prepare
 * handed to the clients to each agent's commit notice), the whole round
 * (from the round's start, when this one process still has to build every
 * node's prepare), and the floor: the same burst of interval requests.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/proto/ckpt_client.h"
#include "checkpoint/proto/digest.h"
#include "common/log.h"
#include "common/token.h"

struct agent {
	struct sim *sim;
	struct phx_ckpt_client *c;
	int ready;
	uint64_t committed, aborted;
	double commit_t;
	int queried;
	double interval_t; /* when the last interval answer came */
	uint64_t q_gen, q_step;
	uint32_t q_world;
	uint64_t resume_step; /* the committed step the daemon told at registration */
};

struct sim {
	const char *address, *key_file, *token;
	uint32_t job, uid, nodes, rpn, gens, prepare_nodes;
	uint32_t job_nodes; /* the job's shape, for register */
	uint32_t first_node; /* this process simulates nodes first_node.. */
	const char *shard_dir; /* write real shards there, with real digests */
	int no_wait;
	uint64_t first_gen, abort_gen, query_gen;
	int stats, timeout_s;
	int daemon_pid; /* sampled around the commit rounds when set */
	const char *node_name; /* train: this node's name */
	const char *report, *report_node;
	uint64_t report_at, report_value, save_every;
	uint64_t hold_after; /* run: after this generation, wait for hold_file */
	const char *hold_file;
	uint32_t report_times;
	double seconds;
	uint64_t prep_step; /* train: the step a prepare names */
	struct agent *a;
	double *lat, *round; /* from the last prepare, and from the round's start */
	size_t nlat;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_connected(void *arg, uint64_t committed, uint64_t step)
{
	struct agent *a = arg;

	a->ready = 1;
	a->resume_step = step;
	if (committed > a->committed)
		a->committed = committed;
}

static void on_commit(void *arg, uint64_t gen, uint64_t step, uint64_t keep_from)
{
	struct agent *a = arg;

	(void)step;
	(void)keep_from;
	if (gen > a->committed) {
		a->committed = gen;
		a->commit_t = now();
	}
}

static void on_aborted(void *arg, uint64_t gen, const char *reason)
{
	struct agent *a = arg;

	(void)reason;
	a->aborted = gen;
}

static void on_manifest(void *arg, uint64_t gen, const struct phx_manifest *m)
{
	struct agent *a = arg;

	a->queried = 1;
	a->q_gen = gen;
	a->q_step = m ? m->step : 0;
	a->q_world = m ? m->world : 0;
}

static void on_interval(void *arg, const char *mode, uint64_t steps, uint64_t seconds)
{
	(void)mode;
	(void)steps;
	(void)seconds;
	((struct agent *)arg)->interval_t = now();
}

static void on_refused(void *arg, const char *reason)
{
	struct agent *a = arg;

	fprintf(stdout, "refused %s\n", reason);
	fflush(stdout);
	a->aborted = UINT64_MAX;
}

static const struct phx_ckpt_client_ops ops = {
	.connected = on_connected,
	.commit = on_commit,
	.aborted = on_aborted,
	.manifest = on_manifest,
	.interval = on_interval,
	.refused = on_refused,
};

/* Polls every client once; ms is the longest wait. */
static void pump(struct sim *s, int ms)
{
	static struct pollfd *p;
	static size_t cap;
	nfds_t n = s->nodes;
	int t = ms;

	if (cap < n) {
		free(p);
		p = calloc(n, sizeof(*p));
		cap = n;
	}
	for (nfds_t i = 0; i < n; i++) {
		int ct = phx_ckpt_client_timeout_ms(s->a[i].c);

		p[i].fd = phx_ckpt_client_fd(s->a[i].c);
		p[i].events = phx_ckpt_client_events(s->a[i].c);
		p[i].revents = 0;
		if (ct >= 0 && ct < t)
			t = ct;
	}
	poll(p, n, t);
	for (nfds_t i = 0; i < n; i++)
		phx_ckpt_client_handle(s->a[i].c, p[i].revents);
}

typedef int (*until_fn)(struct sim *s, uint64_t arg);

static int wait_until(struct sim *s, until_fn fn, uint64_t arg)
{
	double end = now() + s->timeout_s;

	while (!fn(s, arg)) {
		if (now() > end)
			return -1;
		pump(s, 50);
	}
	return 0;
}

static int all_ready(struct sim *s, uint64_t arg)
{
	(void)arg;
	for (uint32_t i = 0; i < s->nodes; i++) {
		if (s->a[i].aborted == UINT64_MAX)
			return 1; /* refused: stop waiting */
		if (!s->a[i].ready)
			return 0;
	}
	return 1;
}

static int all_settled(struct sim *s, uint64_t gen)
{
	for (uint32_t i = 0; i < s->nodes; i++)
		if (s->a[i].committed < gen && s->a[i].aborted != gen)
			return 0;
	return 1;
}

static int all_flushed(struct sim *s, uint64_t arg)
{
	(void)arg;
	for (uint32_t i = 0; i < s->nodes; i++)
		if (phx_ckpt_client_events(s->a[i].c) & POLLOUT)
			return 0;
	return 1;
}

static int start(struct sim *s)
{
	struct phx_key key;
	char err[512], token[PHX_TOKEN_HEX_LEN + 1];

	if (s->token) {
		snprintf(token, sizeof(token), "%s", s->token);
	} else if (phx_key_load(s->key_file, geteuid(), &key, err, sizeof(err)) < 0 ||
		   phx_token_mint(&key, s->job, s->uid, token) < 0) {
		phx_error("%s", err);
		return -1;
	}
	s->a = calloc(s->nodes, sizeof(*s->a));
	for (uint32_t i = 0; i < s->nodes; i++) {
		struct phx_ckpt_client_conf conf = {
			.address = s->address,
			.job = s->job,
			.uid = s->uid,
			.token = token,
			.nodes = s->job_nodes,
			.ranks = s->job_nodes * s->rpn,
			.layout = "",
			.backoff_min_ms = 50,
			.backoff_max_ms = 1000,
		};
		char node[32];

		snprintf(node, sizeof(node), "sim%05u", s->first_node + i);
		if (s->node_name)
			snprintf(node, sizeof(node), "%s", s->node_name);
		/* One agent in a Slurm step is its node's, named as Slurm names it (the daemon
		 * checks). */
		else if (s->nodes == 1 && getenv("SLURMD_NODENAME"))
			snprintf(node, sizeof(node), "%s", getenv("SLURMD_NODENAME"));
		conf.node = node;
		s->a[i].sim = s;
		s->a[i].c = phx_ckpt_client_new(&conf, &ops, &s->a[i], err, sizeof(err));
		if (!s->a[i].c) {
			phx_error("%s", err);
			return -1;
		}
	}
	if (wait_until(s, all_ready, 0) < 0) {
		phx_error("agents did not all connect within %d s", s->timeout_s);
		return -1;
	}
	for (uint32_t i = 0; i < s->nodes; i++)
		if (s->a[i].aborted == UINT64_MAX)
			return -1;
	return 0;
}

/* A real shard file of the rank, and its digest as the agents compute it; 0 or -1. */
static int write_shard(struct sim *s, uint32_t rank, uint64_t gen, char *path, size_t plen,
		       char hex[PHX_DIGEST_HEX_LEN])
{
	unsigned char buf[4096];
	uint8_t md[PHX_DIGEST_MAX];
	FILE *f;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(s->job * 31 + gen * 7 + rank * 3 + i);
	snprintf(path, plen, "%s/%u-%llu-%u", s->shard_dir, s->job, (unsigned long long)gen, rank);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, sizeof(buf), f) != sizeof(buf) || fflush(f) || fsync(fileno(f))) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	if (phx_digest_compute(PHX_DIGEST_SHA256, buf, sizeof(buf), 1, NULL, md) < 0)
		return -1;
	phx_digest_hex(PHX_DIGEST_SHA256, md, hex);
	return 0;
}

static void prepare(struct sim *s, uint32_t i, uint64_t gen)
{
	struct phx_manifest_shard *sh = calloc(s->rpn, sizeof(*sh));
	char(*path)[512] = calloc(s->rpn, sizeof(*path));

	for (uint32_t k = 0; k < s->rpn; k++) {
		uint32_t rank = (s->first_node + i) * s->rpn + k;

		sh[k].rank = rank;
		sh[k].bytes = 1u << 30;
		sh[k].filled = 1;
		snprintf(sh[k].digest.alg, sizeof(sh[k].digest.alg), "%s",
			 phx_digest_name(PHX_DIGEST_SHA256));
		for (int h = 0; h < 64; h++)
			sh[k].digest.hex[h] = "0123456789abcdef"[(rank * 7 + gen * 13 + h) & 15];
		snprintf(sh[k].locations[0].tier, sizeof(sh[k].locations[0].tier), "shared");
		snprintf(path[k], sizeof(path[k]), "/ckpt/%u/%llu/%u", s->job,
			 (unsigned long long)gen, rank);
		if (s->shard_dir) {
			sh[k].bytes = 4096;
			if (write_shard(s, rank, gen, path[k], sizeof(path[k]), sh[k].digest.hex) <
			    0)
				phx_error("cannot write the shard of rank %u under %s", rank,
					  s->shard_dir);
		}
		sh[k].locations[0].path = path[k];
		sh[k].nlocations = 1;
	}
	/* One prepare per node, carrying all its ranks, as an agent sends it. */
	phx_ckpt_client_prepare(s->a[i].c, gen, s->prep_step ? s->prep_step : gen * 100, sh,
				s->rpn);
	free(path);
	free(sh);
}

/* The daemon's CPU seconds (user + system) so far, from /proc. */
static double daemon_cpu(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* After the command name: state, then fields 4..13, then utime and stime. */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long daemon_rss_kib(int pid, const char *field)
{
	char path[64], line[256];
	long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)))
			v = atol(line + strlen(field) + 1);
	fclose(f);
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print_pct(const char *what, double *v, size_t n)
{
	qsort(v, n, sizeof(double), cmp_double);
	printf("%s p50 %.2f p99 %.2f max %.2f samples %zu\n", what, 1e3 * v[n / 2],
	       1e3 * v[(n * 99) / 100], 1e3 * v[n - 1], n);
}

static int all_answered(struct sim *s, uint64_t arg)
{
	double t0;

	memcpy(&t0, &arg, sizeof(t0));
	for (uint32_t i = 0; i < s->nodes; i++)
		if (s->a[i].interval_t < t0)
			return 0;
	return 1;
}

/*
 * The floor: every agent asks for the interval at once and waits for the
 * answer, the same burst of messages over the same connections as a
 * commit round, without the commit's work.
 */
static void round_trips(struct sim *s, uint32_t rounds)
{
	double *v = calloc((size_t)rounds * s->nodes, sizeof(double));
	size_t n = 0;

	for (uint32_t r = 0; r < rounds; r++) {
		double t0 = now();
		uint64_t arg;

		for (uint32_t i = 0; i < s->nodes; i++)
			phx_ckpt_client_interval(s->a[i].c);
		memcpy(&arg, &t0, sizeof(arg));
		/* Like commits, counted from the last request handed over. */
		t0 = now();
		if (wait_until(s, all_answered, arg) < 0)
			break;
		for (uint32_t i = 0; i < s->nodes; i++)
			v[n++] = s->a[i].interval_t - t0;
	}
	if (n)
		print_pct("roundtrip_ms", v, n);
	free(v);
}

static int run(struct sim *s)
{
	uint32_t k = s->prepare_nodes ? s->prepare_nodes : s->nodes;
	int rc = 0;

	double cpu0, wall0;

	if (start(s) < 0)
		return 1;
	s->lat = calloc((size_t)s->gens * s->nodes, sizeof(double));
	s->round = calloc((size_t)s->gens * s->nodes, sizeof(double));
	cpu0 = s->daemon_pid ? daemon_cpu(s->daemon_pid) : 0;
	wall0 = now();
	for (uint64_t g = s->first_gen; g < s->first_gen + s->gens; g++) {
		double t0 = now(), t_last;

		if (g == s->abort_gen)
			phx_ckpt_client_abort(s->a[0].c, g, "a simulated rank failure");
		for (uint32_t i = 0; i < k; i++)
			prepare(s, i, g);
		t_last = now();
		if (k < s->nodes || s->no_wait) {
			/* Prepared by some nodes only: leave once the daemon has them. */
			wait_until(s, all_flushed, 0);
			pump(s, 200);
			printf("prepared %llu by %u nodes\n", (unsigned long long)g, k);
			continue;
		}
		if (wait_until(s, all_settled, g) < 0) {
			phx_error("generation %llu did not settle within %d s",
				  (unsigned long long)g, s->timeout_s);
			rc = 1;
			break;
		}
		if (s->a[0].committed >= g) {
			printf("committed %llu %llu\n", (unsigned long long)g,
			       (unsigned long long)g * 100);
			for (uint32_t i = 0; i < s->nodes; i++) {
				s->round[s->nlat] = s->a[i].commit_t - t0;
				s->lat[s->nlat++] = s->a[i].commit_t - t_last;
			}
		} else {
			printf("aborted %llu\n", (unsigned long long)g);
		}
		fflush(stdout);
		/* Lets a test act (kill the daemon) at a known generation. */
		while (g == s->hold_after && s->hold_file && access(s->hold_file, F_OK) < 0)
			pump(s, 20);
	}
	if (s->daemon_pid) {
		double cpu = daemon_cpu(s->daemon_pid) - cpu0, wall = now() - wall0;

		printf("daemon cpu_ms_per_generation %.1f cpu_share %.2f rss_mib %.1f "
		       "peak_mib %.1f\n",
		       1e3 * cpu / s->gens, cpu / wall,
		       daemon_rss_kib(s->daemon_pid, "VmRSS:") / 1024.0,
		       daemon_rss_kib(s->daemon_pid, "VmHWM:") / 1024.0);
	}
	if (s->stats && s->nlat) {
		print_pct("commit_ms", s->lat, s->nlat);
		print_pct("round_ms", s->round, s->nlat);
		round_trips(s, s->gens);
	}
	for (uint32_t i = 0; i < s->nodes; i++)
		phx_ckpt_client_free(s->a[i].c);
	return rc;
}

static void send_report(struct sim *s, uint64_t step)
{
	char kind[32], *colon;

	snprintf(kind, sizeof(kind), "%s", s->report);
	colon = strchr(kind, ':');
	if (colon)
		*colon = '\0';
	colon = strchr(s->report, ':');
	/* Checks and XIDs name a node: this one unless told. */
	phx_ckpt_client_report(s->a[0].c, kind,
			       s->report_node				      ? s->report_node
			       : strcmp(kind, "check") && strcmp(kind, "xid") ? NULL
									      : s->node_name,
			       step, s->report_value, colon ? colon + 1 : NULL);
	printf("reported %s at step %llu\n", s->report, (unsigned long long)step);
	fflush(stdout);
}

static int train(struct sim *s)
{
	double end, next;
	uint64_t step = 0, gen = 0;
	uint32_t reported = 0;

	s->nodes = 1;
	if (start(s) < 0)
		return 1;
	/* Resume where the newest committed generation left off, as a restore would. */
	gen = s->a[0].committed;
	step = s->a[0].resume_step;
	printf("resumed at generation %llu step %llu\n", (unsigned long long)gen,
	       (unsigned long long)step);
	fflush(stdout);
	end = s->seconds > 0 ? now() + s->seconds : 0;
	next = now();
	while (!end || now() < end) {
		unsigned period = phx_ckpt_client_heartbeat_ms(s->a[0].c);

		pump(s, 20);
		if (now() < next)
			continue;
		next += period / 1000.0;
		step++;
		phx_ckpt_client_heartbeat(s->a[0].c, step);
		if (s->save_every && !(step % s->save_every)) {
			/* A save stalls training for a twentieth of a step; one node says so. */
			if (s->first_node == 0)
				phx_ckpt_client_report(s->a[0].c, "save", NULL, step, period * 50,
						       NULL);
			s->prep_step = step;
			prepare(s, 0, ++gen);
		}
		if (s->report && step >= s->report_at && reported < s->report_times) {
			send_report(s, step);
			reported++;
		}
		if (!(step % 10)) {
			printf("step %llu\n", (unsigned long long)step);
			fflush(stdout);
		}
	}
	phx_ckpt_client_report(s->a[0].c, "done", NULL, step, 0, NULL);
	wait_until(s, all_flushed, 0);
	pump(s, 100);
	phx_ckpt_client_free(s->a[0].c);
	free(s->a);
	return 0;
}

/* report: one report from a registered agent, then leave. */
static int report_only(struct sim *s)
{
	s->nodes = 1;
	if (start(s) < 0)
		return 1;
	send_report(s, s->a[0].resume_step);
	wait_until(s, all_flushed, 0);
	pump(s, 100);
	phx_ckpt_client_free(s->a[0].c);
	free(s->a);
	return 0;
}

static int query_done(struct sim *s, uint64_t arg)
{
	(void)arg;
	return s->a[0].queried || s->a[0].aborted == UINT64_MAX;
}

static int query(struct sim *s)
{
	s->nodes = 1;
	if (start(s) < 0)
		return 1;
	phx_ckpt_client_query(s->a[0].c, s->query_gen);
	if (wait_until(s, query_done, 0) < 0 || !s->a[0].queried)
		return 1;
	printf("manifest %llu step %llu world %u\n", (unsigned long long)s->a[0].q_gen,
	       (unsigned long long)s->a[0].q_step, s->a[0].q_world);
	phx_ckpt_client_free(s->a[0].c);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "address", required_argument, NULL, 'a' },
		{ "key", required_argument, NULL, 'k' },
		{ "token", required_argument, NULL, 'T' },
		{ "job", required_argument, NULL, 'j' },
		{ "uid", required_argument, NULL, 'u' },
		{ "nodes", required_argument, NULL, 'n' },
		{ "ranks-per-node", required_argument, NULL, 'r' },
		{ "gens", required_argument, NULL, 'g' },
		{ "first-gen", required_argument, NULL, 'f' },
		{ "prepare-nodes", required_argument, NULL, 'p' },
		{ "abort-gen", required_argument, NULL, 'A' },
		{ "gen", required_argument, NULL, 'G' },
		{ "timeout", required_argument, NULL, 't' },
		{ "stats", no_argument, NULL, 's' },
		{ "daemon-pid", required_argument, NULL, 'P' },
		{ "job-nodes", required_argument, NULL, 'N' },
		{ "first-node", required_argument, NULL, 'F' },
		{ "shard-dir", required_argument, NULL, 'D' },
		{ "no-wait", no_argument, NULL, 'W' },
		{ "node-name", required_argument, NULL, 'M' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "save-every", required_argument, NULL, 'e' },
		{ "report", required_argument, NULL, 'R' },
		{ "report-at", required_argument, NULL, 'x' },
		{ "report-times", required_argument, NULL, 'X' },
		{ "report-node", required_argument, NULL, 'o' },
		{ "report-value", required_argument, NULL, 'v' },
		{ "hold-after", required_argument, NULL, 'H' },
		{ "hold-file", required_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sim s = { .job = 1,
			 .uid = 0,
			 .nodes = 1,
			 .rpn = 1,
			 .gens = 1,
			 .first_gen = 1,
			 .timeout_s = 60,
			 .save_every = 10,
			 .report_times = 1 };
	struct rlimit rl;
	const char *cmd = argc > 1 ? argv[1] : "";
	int c;

	optind = 2;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			s.address = optarg;
			break;
		case 'k':
			s.key_file = optarg;
			break;
		case 'T':
			s.token = optarg;
			break;
		case 'j':
			s.job = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'u':
			s.uid = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'n':
			s.nodes = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			s.rpn = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'g':
			s.gens = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'f':
			s.first_gen = strtoull(optarg, NULL, 10);
			break;
		case 'p':
			s.prepare_nodes = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'A':
			s.abort_gen = strtoull(optarg, NULL, 10);
			break;
		case 'G':
			s.query_gen = strtoull(optarg, NULL, 10);
			break;
		case 't':
			s.timeout_s = atoi(optarg);
			break;
		case 's':
			s.stats = 1;
			break;
		case 'P':
			s.daemon_pid = atoi(optarg);
			break;
		case 'N':
			s.job_nodes = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'F':
			s.first_node = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'D':
			s.shard_dir = optarg;
			break;
		case 'W':
			s.no_wait = 1;
			break;
		case 'M':
			s.node_name = optarg;
			break;
		case 'S':
			s.seconds = atof(optarg);
			break;
		case 'e':
			s.save_every = strtoull(optarg, NULL, 10);
			break;
		case 'R':
			s.report = optarg;
			break;
		case 'x':
			s.report_at = strtoull(optarg, NULL, 10);
			break;
		case 'X':
			s.report_times = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'o':
			s.report_node = optarg;
			break;
		case 'v':
			s.report_value = strtoull(optarg, NULL, 10);
			break;
		case 'H':
			s.hold_after = strtoull(optarg, NULL, 10);
			break;
		case 'h':
			s.hold_file = optarg;
			break;
		default:
			fprintf(stderr, "ckpt_sim: bad option\n");
			return 2;
		}
	}
	if (!s.address || (!s.key_file && !s.token) || !s.nodes || !s.rpn) {
		fprintf(stderr, "ckpt_sim: --address and --key (or --token) are needed\n");
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!s.job_nodes)
		s.job_nodes = s.nodes;
	if (s.first_node + s.nodes > s.job_nodes) {
		fprintf(stderr, "ckpt_sim: nodes %u.. of %u are outside the job's %u\n",
			s.first_node, s.nodes, s.job_nodes);
		return 2;
	}
	if (!strcmp(cmd, "run"))
		return run(&s);
	if (!strcmp(cmd, "query"))
		return query(&s);
	if (!strcmp(cmd, "train"))
		return train(&s);
	if (!strcmp(cmd, "report") && s.report)
		return report_only(&s);
	fprintf(stderr, "ckpt_sim: command is run, query, train or report (with --report)\n");
	return 2;
}

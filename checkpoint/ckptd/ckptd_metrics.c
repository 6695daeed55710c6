/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus text metrics over HTTP (GET /metrics). libmicrohttpd runs in
 * external-epoll mode: its epoll descriptor sits in the daemon's loop, so
 * no thread reads the counters while the loop changes them.
 */
#include "config.h"

#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include <slurm/slurm.h>

#include "checkpoint/ckptd/ckptd_catalog.h"
#include "checkpoint/ckptd/ckptd_clock.h"
#include "checkpoint/ckptd/ckptd_metrics.h"
#include "common/log.h"

struct buf {
	char *s;
	size_t len, cap;
};

static void out(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->s && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		b->cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			return;
	}
}

static void metric(struct buf *b, const char *name, const char *type, const char *help, double v)
{
	out(b, "# HELP phalanx_ckptd_%s %s\n# TYPE phalanx_ckptd_%s %s\nphalanx_ckptd_%s %.17g\n",
	    name, help, name, type, name, v);
}

/* Per job: where its wall time went (phalanx-ckptd(8), GOODPUT). */
static void goodput_metrics(struct buf *b, struct ckptd *d)
{
	double now = ckptd_wall(), p[PHX_GP_PARTS], wall;

	out(b, "# HELP phalanx_ckptd_goodput_seconds A job's wall time by part.\n"
	       "# TYPE phalanx_ckptd_goodput_seconds gauge\n");
	for (size_t i = 0; i < CKPTD_JOB_BUCKETS; i++)
		for (struct ckptd_job *j = d->jobs[i]; j; j = j->next) {
			if (!j->r.on)
				continue;
			phx_gp_snapshot(&j->r.gp, now, p);
			for (int k = 0; k < PHX_GP_PARTS; k++)
				out(b,
				    "phalanx_ckptd_goodput_seconds{job=\"%u\",part=\"%s\"} %.3f\n",
				    j->id, phx_gp_part_name(k), p[k]);
		}
	out(b, "# HELP phalanx_ckptd_goodput_ratio Productive time over wall time.\n"
	       "# TYPE phalanx_ckptd_goodput_ratio gauge\n");
	for (size_t i = 0; i < CKPTD_JOB_BUCKETS; i++)
		for (struct ckptd_job *j = d->jobs[i]; j; j = j->next) {
			if (!j->r.on)
				continue;
			wall = phx_gp_snapshot(&j->r.gp, now, p);
			out(b, "phalanx_ckptd_goodput_ratio{job=\"%u\"} %.6f\n", j->id,
			    wall > 0 ? p[PHX_GP_PRODUCTIVE] / wall : 0.0);
		}
	metric(b, "heartbeats_total", "counter", "Agent heartbeats received.",
	       (double)d->rm.heartbeats);
	metric(b, "agents_lost_total", "counter", "Agents declared lost (no heartbeat).",
	       (double)d->rm.lost);
	out(b,
	    "# HELP phalanx_ckptd_detect_seconds From a lost agent's last heartbeat to its "
	    "declaration.\n# TYPE phalanx_ckptd_detect_seconds summary\n"
	    "phalanx_ckptd_detect_seconds_sum %.3f\nphalanx_ckptd_detect_seconds_count %llu\n",
	    d->rm.detect_s_sum, (unsigned long long)d->rm.lost);
	out(b,
	    "# HELP phalanx_ckptd_requeue_queue_seconds From a requeue to running again.\n"
	    "# TYPE phalanx_ckptd_requeue_queue_seconds summary\n"
	    "phalanx_ckptd_requeue_queue_seconds_sum %.3f\n"
	    "phalanx_ckptd_requeue_queue_seconds_count %llu\n",
	    d->rm.queue_s_sum, (unsigned long long)d->rm.queue_n);
	metric(b, "restarts_total", "counter", "In-job restarts recorded.", (double)d->rm.restarts);
	metric(b, "requeues_total", "counter", "Jobs requeued.", (double)d->rm.requeues);
	metric(b, "drains_total", "counter", "Nodes drained by recovery.", (double)d->rm.drains);
	metric(b, "resumes_total", "counter", "Drained nodes resumed after a passing check.",
	       (double)d->rm.resumes);
	metric(b, "stops_total", "counter", "Jobs given up (user error or max_requeues).",
	       (double)d->rm.stops);
	metric(b, "slurm_errors_total", "counter", "Slurm calls of recovery that failed.",
	       (double)d->rm.slurm_errors);
}

/* A gauge or counter with one sample per job: "NAME{job=...} value" for each. */
static void per_job(struct buf *b, struct ckptd *d, const char *name, const char *type,
		    const char *help, double (*value)(const struct ckptd_job *j, double now))
{
	double now = ckptd_now();

	out(b, "# HELP phalanx_ckptd_%s %s\n# TYPE phalanx_ckptd_%s %s\n", name, help, name, type);
	for (size_t i = 0; i < CKPTD_JOB_BUCKETS; i++)
		for (struct ckptd_job *j = d->jobs[i]; j; j = j->next) {
			double v = value(j, now);

			if (v >= 0)
				out(b, "phalanx_ckptd_%s{job=\"%u\"} %.17g\n", name, j->id, v);
		}
}

/* Negative: no sample for that job. */
static double last_commit_time(const struct ckptd_job *j, double now)
{
	(void)now;
	return j->ngens ? (double)j->gens[j->ngens - 1].created : -1;
}

static double last_commit_step(const struct ckptd_job *j, double now)
{
	(void)now;
	return j->ngens ? (double)j->gens[j->ngens - 1].step : -1;
}

static double job_agents(const struct ckptd_job *j, double now)
{
	(void)now;
	return (double)j->nagents;
}

static double job_stall(const struct ckptd_job *j, double now)
{
	(void)now;
	return j->saves ? j->stall_avg_s : -1;
}

static double job_lost(const struct ckptd_job *j, double now)
{
	(void)now;
	return (double)j->r.lost;
}

static double job_restarts(const struct ckptd_job *j, double now)
{
	(void)now;
	return (double)j->r.restarts;
}

static void job_metrics(struct buf *b, struct ckptd *d)
{
	per_job(b, d, "job_last_commit_timestamp_seconds", "gauge",
		"When the job's newest committed generation was made (seconds since the epoch).",
		last_commit_time);
	per_job(b, d, "job_last_commit_step", "gauge",
		"Training step of the job's newest committed generation.", last_commit_step);
	per_job(b, d, "job_agents", "gauge", "The job's connected node agents.", job_agents);
	per_job(b, d, "job_save_stall_seconds", "gauge",
		"Moving average of the training stall per save.", job_stall);
	per_job(b, d, "job_nodes_lost_total", "counter",
		"The job's agents declared lost (no heartbeat).", job_lost);
	per_job(b, d, "job_restarts_total", "counter", "In-job restarts recorded for the job.",
		job_restarts);
}

/* Per node of a job's current run, as its heartbeats show it. */
static void member_metrics(struct buf *b, struct ckptd *d)
{
	double now = ckptd_now();

	out(b, "# HELP phalanx_ckptd_node_heartbeat_age_seconds Since the node's agent last "
	       "sent a heartbeat for the job.\n"
	       "# TYPE phalanx_ckptd_node_heartbeat_age_seconds gauge\n");
	for (size_t i = 0; i < CKPTD_JOB_BUCKETS; i++)
		for (struct ckptd_job *j = d->jobs[i]; j; j = j->next)
			for (size_t k = 0; k < j->r.nmembers; k++)
				if (j->r.members[k].last_hb > 0)
					out(b,
					    "phalanx_ckptd_node_heartbeat_age_seconds{job=\"%u\","
					    "node=\"%s\"} %.3f\n",
					    j->id, j->r.members[k].node,
					    now - j->r.members[k].last_hb);
	out(b, "# HELP phalanx_ckptd_node_lost Whether the node was declared lost in the job's "
	       "current run (1) or not (0).\n# TYPE phalanx_ckptd_node_lost gauge\n");
	for (size_t i = 0; i < CKPTD_JOB_BUCKETS; i++)
		for (struct ckptd_job *j = d->jobs[i]; j; j = j->next)
			for (size_t k = 0; k < j->r.nmembers; k++)
				out(b, "phalanx_ckptd_node_lost{job=\"%u\",node=\"%s\"} %d\n",
				    j->id, j->r.members[k].node, j->r.members[k].lost ? 1 : 0);
	out(b, "# HELP phalanx_ckptd_node_faults_total Faults recorded against the node, all "
	       "jobs.\n# TYPE phalanx_ckptd_node_faults_total counter\n");
	for (size_t k = 0; k < d->nnodes; k++)
		out(b, "phalanx_ckptd_node_faults_total{node=\"%s\"} %u\n", d->nodes[k].name,
		    d->nodes[k].r.n);
	out(b, "# HELP phalanx_ckptd_node_drained Whether Phalanx drained the node and it awaits "
	       "a passing check (1) or not (0).\n# TYPE phalanx_ckptd_node_drained gauge\n");
	for (size_t k = 0; k < d->nnodes; k++)
		out(b, "phalanx_ckptd_node_drained{node=\"%s\"} %d\n", d->nodes[k].name,
		    d->nodes[k].r.untrusted ? 1 : 0);
}

/* The names every Prometheus client exports, and the build. */
static void process_metrics(struct buf *b, struct ckptd *d)
{
	out(b,
	    "# HELP phalanx_build_info The Phalanx version and the Slurm API it was built "
	    "against.\n# TYPE phalanx_build_info gauge\n"
	    "phalanx_build_info{version=\"%s\",slurm=\"%d.%02d.%d\",program=\"phalanx-ckptd\"} "
	    "1\n",
	    PACKAGE_VERSION, SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
	    SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER), SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
	out(b,
	    "# HELP process_start_time_seconds Start time of the process since unix epoch in "
	    "seconds.\n# TYPE process_start_time_seconds gauge\n"
	    "process_start_time_seconds %.3f\n",
	    d->started_wall);
}

char *ckptd_metrics_text(struct ckptd *d)
{
	const struct ckptd_metrics *m = &d->m;
	struct buf b = { 0 };
	uint64_t gens = 0, bytes = 0;

	for (size_t i = 0; i < CKPTD_JOB_BUCKETS; i++)
		for (struct ckptd_job *j = d->jobs[i]; j; j = j->next)
			for (size_t g = 0; g < j->ngens; g++) {
				gens++;
				bytes += j->gens[g].bytes;
			}
	metric(&b, "saves_total", "counter", "Saves reported by agents.", (double)m->saves);
	metric(&b, "saved_bytes_total", "counter", "Bytes staged by reported saves.",
	       (double)m->saved_bytes);
	out(&b,
	    "# HELP phalanx_ckptd_save_stall_seconds Training stall per save.\n"
	    "# TYPE phalanx_ckptd_save_stall_seconds summary\n"
	    "phalanx_ckptd_save_stall_seconds_sum %.6f\n"
	    "phalanx_ckptd_save_stall_seconds_count %llu\n",
	    (double)m->stall_us_sum / 1e6, (unsigned long long)m->saves);
	out(&b,
	    "# HELP phalanx_ckptd_persist_lag_seconds From staging to durable in a tier.\n"
	    "# TYPE phalanx_ckptd_persist_lag_seconds summary\n"
	    "phalanx_ckptd_persist_lag_seconds_sum %.3f\n"
	    "phalanx_ckptd_persist_lag_seconds_count %llu\n",
	    (double)m->persist_ms_sum / 1e3, (unsigned long long)m->persists);
	metric(&b, "persisted_bytes_total", "counter", "Bytes persisted to tiers.",
	       (double)m->persist_bytes);
	metric(&b, "commits_total", "counter", "Generations committed.", (double)m->commits);
	out(&b, "# HELP phalanx_ckptd_commit_seconds From a generation's first prepare to its "
		"commit.\n# TYPE phalanx_ckptd_commit_seconds histogram\n");
	for (int i = 0; i < 8; i++)
		out(&b, "phalanx_ckptd_commit_seconds_bucket{le=\"%g\"} %llu\n",
		    ckptd_commit_buckets[i], (unsigned long long)m->commit_le[i]);
	out(&b,
	    "phalanx_ckptd_commit_seconds_bucket{le=\"+Inf\"} %llu\n"
	    "phalanx_ckptd_commit_seconds_sum %.6f\nphalanx_ckptd_commit_seconds_count %llu\n",
	    (unsigned long long)m->commits, m->commit_s_sum, (unsigned long long)m->commits);
	metric(&b, "aborts_total", "counter", "Generations aborted.", (double)m->aborts);
	metric(&b, "failures_total", "counter", "Failures reported by agents.",
	       (double)m->failures);
	metric(&b, "node_bad_total", "counter", "Bad-node reports.", (double)m->node_bad);
	metric(&b, "auth_failures_total", "counter", "Agents that failed the token challenge.",
	       (double)m->auth_failures);
	metric(&b, "munge_refused_total", "counter",
	       "Admin clients on the TCP port whose MUNGE credential was refused.",
	       (double)m->munge_refused);
	metric(&b, "protocol_errors_total", "counter", "Connections closed for a bad message.",
	       (double)m->protocol_errors);
	metric(&b, "preauth_refused_total", "counter",
	       "Connections dropped at accept: too many unauthenticated ones.",
	       (double)m->preauth_refused);
	metric(&b, "authz_refused_total", "counter",
	       "Tokens refused, or events dropped, because Slurm's view of the job does not "
	       "allow them (job not running, not the token's user, node not in the allocation).",
	       (double)d->authz.refused);
	metric(&b, "authz_slurm_queries_total", "counter",
	       "Job lookups in Slurm for authorization (answers are cached).",
	       (double)d->authz.queries);
	metric(&b, "unauthenticated_connections", "gauge",
	       "TCP connections that have not proven a job token yet.", (double)d->preauth);
	metric(&b, "loop_late_seconds_total", "counter",
	       "Time the event loop spent on slow batches, credited to heartbeats.", m->late_s_sum);
	metric(&b, "agents_connected", "gauge", "Registered agent connections.", (double)d->agents);
	metric(&b, "jobs", "gauge", "Jobs in the catalog.", (double)d->njobs);
	metric(&b, "generations", "gauge", "Committed generations in the catalog.", (double)gens);
	metric(&b, "catalog_bytes", "gauge", "Bytes of the committed generations in the catalog.",
	       (double)bytes);
	metric(&b, "journal_bytes", "gauge", "Size of the journal.", (double)d->journal.bytes);
	metric(&b, "journal_compactions_total", "counter", "Journal rewrites.",
	       (double)m->journal_compactions);
	metric(&b, "uptime_seconds", "gauge", "Seconds since the daemon started.",
	       ckptd_now() - d->started);
	goodput_metrics(&b, d);
	job_metrics(&b, d);
	member_metrics(&b, d);
	process_metrics(&b, d);
	return b.s;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **state)
{
	struct ckptd *d = cls;
	struct MHD_Response *r;
	enum MHD_Result rc;
	unsigned status = MHD_HTTP_OK;
	char *text;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)state;
	if (strcmp(method, "GET")) {
		text = strdup("only GET\n");
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics")) {
		text = strdup("phalanx-ckptd: metrics are at /metrics\n");
		status = MHD_HTTP_NOT_FOUND;
	} else {
		text = ckptd_metrics_text(d);
	}
	if (!text)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
	rc = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return rc;
}

int ckptd_metrics_start(struct ckptd *d, const char *hostport, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
	struct epoll_event ev = { .events = EPOLLIN };
	const union MHD_DaemonInfo *info;
	char host[256], port[16];
	const char *colon = strrchr(hostport, ':');
	size_t n;
	unsigned flags = MHD_USE_EPOLL;
	int rc;

	d->mhd_fd = -1;
	if (!*hostport)
		return 0;
	n = colon ? (size_t)(colon - hostport) : 0;
	if (!colon || n >= sizeof(host))
		return phx_errf(err, errlen, "ckptd.metrics \"%s\" is not HOST:PORT", hostport);
	if (hostport[0] == '[' && n >= 2) {
		memcpy(host, hostport + 1, n - 2);
		host[n - 2] = '\0';
	} else {
		memcpy(host, hostport, n);
		host[n] = '\0';
	}
	snprintf(port, sizeof(port), "%s", colon + 1);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc)
		return phx_errf(err, errlen, "ckptd.metrics \"%s\": %s", hostport,
				gai_strerror(rc));
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	d->mhd = MHD_start_daemon(flags, (uint16_t)atoi(port), NULL, NULL, answer, d,
				  MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
				  (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
				  MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!d->mhd)
		return phx_errf(err, errlen,
				"cannot serve metrics on %s; is the port taken? Set ckptd.metrics "
				"to another HOST:PORT or to \"\"",
				hostport);
	info = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	d->mhd_fd = info ? info->epoll_fd : -1;
	ev.data.ptr = &d->mhd_fd;
	if (d->mhd_fd < 0 || epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->mhd_fd, &ev) < 0) {
		MHD_stop_daemon(d->mhd);
		d->mhd = NULL;
		return phx_errf(err, errlen, "libmicrohttpd gave no epoll descriptor");
	}
	return 0;
}

void ckptd_metrics_run(struct ckptd *d)
{
	if (d->mhd)
		MHD_run(d->mhd);
}

void ckptd_metrics_stop(struct ckptd *d)
{
	if (d->mhd)
		MHD_stop_daemon(d->mhd);
	d->mhd = NULL;
}

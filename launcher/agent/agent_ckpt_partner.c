/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Partner copies in the agent; checkpoint/node/partner.h has the design.
 *
 * While training, the writer thread sends each shard that went to the
 * local tier to this node's partner, whose agent verifies it and keeps it
 * in memory and under LOCAL_DIR/partner.
 *
 * When a step starts, every agent announces its partner endpoint, the
 * copies it keeps on disk of generations its own local tier published,
 * and, per rank it now runs, the newest generation its local directory
 * has. The keeper of the newest copy of a rank sends it to the rank's node
 * when that node has nothing as new (a spare, or a node whose ranks
 * moved), and that node waits for what was announced before the restore
 * agreement, so its workers start from the partner's copy.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/proto/ckpt_msg.h"
#include "checkpoint/node/partner.h"
#include "checkpoint/node/partner_io.h"
#include "checkpoint/node/partner_server.h"
#include "placement/fabric.h"
#include "common/file.h"
#include "common/log.h"
#include "checkpoint/node/ckpt_int.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_ckpt.h"
#include "launcher/agent/agent_pmix.h"

#define RECV_TIMEOUT_MS 30000
/* How long a node waits for the copies announced to it before it restores without them. */
#define FETCH_WAIT_S 120

/* What one agent announced: its endpoint, its kept copies, its ranks' local generations. */
struct announce {
	unsigned port;
	size_t nheld, nlocal;
	unsigned long *held_rank, *local_rank;
	long *held_step, *local_step;
};

/* ------------------------------------------------------------ this node's copies */

/*
 * Every copy under dir/rank-R/ whose header verifies and whose generation
 * this node's local tier published (rank, step pairs, at most cap): the
 * plan may need an older one than the newest (plan_make).
 */
static size_t scan_held(const struct phx_ckpt *c, const struct ck_partner *p, unsigned long *rank,
			long *step, size_t cap)
{
	struct phx_partner_limits lim = { .job_id = c->job_id,
					  .nranks = (uint32_t)c->world,
					  .max_bytes = PHX_CKPT_MAX_BYTES };
	DIR *d = opendir(p->dir);
	struct dirent *e;
	size_t n = 0;

	while (d && (e = readdir(d)) && n < cap) {
		unsigned long r;
		int end = 0;
		char sub[4500];
		DIR *rd;
		struct dirent *f;

		if (sscanf(e->d_name, "rank-%lu%n", &r, &end) != 1 || e->d_name[end] ||
		    r >= c->world)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", p->dir, e->d_name);
		rd = opendir(sub);
		while (rd && (f = readdir(rd)) && n < cap) {
			uint8_t buf[PHX_PARTNER_HDR_BYTES];
			struct phx_partner_hdr h;
			char path[4800], err[256];
			FILE *fp;
			size_t got;

			if (!strstr(f->d_name, ".copy") || strstr(f->d_name, ".tmp"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", sub, f->d_name);
			fp = fopen(path, "rbe");
			got = fp ? fread(buf, 1, sizeof(buf), fp) : 0;
			if (fp)
				fclose(fp);
			if (phx_partner_hdr_decode(buf, got, p->secret, &lim, &h, err,
						   sizeof(err)) < 0 ||
			    h.rank != r || h.step > (uint64_t)LONG_MAX)
				continue;
			if (ck_published(c, PHX_TIER_LOCAL, (long)h.step, NULL)) {
				rank[n] = r;
				step[n++] = (long)h.step;
			}
		}
		if (rd)
			closedir(rd);
	}
	if (d)
		closedir(d);
	return n;
}

/* The newest step the local tier published with rank's shard in it, -1. */
static long local_newest(const struct phx_ckpt *c, unsigned long rank)
{
	char file[64];
	DIR *d = opendir(c->dir[PHX_TIER_LOCAL]);
	struct dirent *e;
	long best = -1;

	snprintf(file, sizeof(file), "rank-%lu.shard", rank);
	while (d && (e = readdir(d))) {
		long s = phx_ckpt_gen_parse(e->d_name);

		if (s > best && ck_published(c, PHX_TIER_LOCAL, s, file))
			best = s;
	}
	if (d)
		closedir(d);
	return best;
}

/* ------------------------------------------------------------ announcements */

/* "PORT h=R:S,R:S l=R:S,R:S" */
static char *announce_text(struct phx_ckpt *c, struct ck_partner *p)
{
	size_t cap = 64 + 48 * (2 * (size_t)c->nproc + 8), len, nheld;
	/* Per rank, the newest disk_keep copies and the held one. */
	size_t most = c->world * (phx_partner_server_disk_keep(&p->srv) + 1);
	unsigned long *hr = calloc(most, sizeof(*hr));
	long *hs = calloc(most, sizeof(*hs));
	char *s = malloc(cap);

	if (!s || !hr || !hs)
		goto fail;
	nheld = scan_held(c, p, hr, hs, most);
	cap += 48 * nheld;
	free(s);
	s = malloc(cap);
	if (!s)
		goto fail;
	len = (size_t)snprintf(s, cap, "%u h=", p->serving ? p->srv.port : 0u);
	for (size_t i = 0; i < nheld; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s%lu:%ld", i ? "," : "", hr[i],
					hs[i]);
	len += (size_t)snprintf(s + len, cap - len, " l=");
	for (unsigned i = 0; i < c->nproc; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s%lu:%ld", i ? "," : "",
					c->slot[i].rank, local_newest(c, c->slot[i].rank));
	free(hr);
	free(hs);
	return s;
fail:
	free(s);
	free(hr);
	free(hs);
	return NULL;
}

/* "R:S,R:S" into fresh arrays; 0 or -1. */
static int parse_pairs(const char *t, unsigned long **rank, long **step, size_t *n)
{
	size_t cap = 1;

	for (const char *q = t; *q && *q != ' '; q++)
		cap += *q == ',';
	*rank = calloc(cap, sizeof(**rank));
	*step = calloc(cap, sizeof(**step));
	*n = 0;
	if (!*rank || !*step)
		return -1;
	while (*t && *t != ' ') {
		char *end;
		unsigned long r = strtoul(t, &end, 10);
		long s;

		if (end == t || *end != ':')
			return -1;
		s = strtol(end + 1, &end, 10);
		if (*end && *end != ',' && *end != ' ')
			return -1;
		(*rank)[*n] = r;
		(*step)[(*n)++] = s;
		t = *end == ',' ? end + 1 : end;
	}
	return 0;
}

static int parse_announce(const char *t, struct announce *an)
{
	const char *h = strstr(t, " h="), *l = strstr(t, " l=");

	memset(an, 0, sizeof(*an));
	if (!h || !l || sscanf(t, "%u", &an->port) != 1 || an->port > 65535)
		return -1;
	if (parse_pairs(h + 3, &an->held_rank, &an->held_step, &an->nheld) < 0 ||
	    parse_pairs(l + 3, &an->local_rank, &an->local_step, &an->nlocal) < 0)
		return -1;
	return 0;
}

static void announce_free(struct announce *an, size_t n)
{
	for (size_t i = 0; an && i < n; i++) {
		free(an[i].held_rank);
		free(an[i].held_step);
		free(an[i].local_rank);
		free(an[i].local_step);
	}
	free(an);
}

/* ------------------------------------------------------------ the plan of the start */

struct fetch_plan {
	long *best; /* [world]: the kept copy of each rank to send, -1 */
	unsigned *keeper; /* [world]: the agent keeping it */
	unsigned *runner; /* [world]: the agent running the rank now */
	long *have; /* [world]: the newest its runner has locally */
};

static void plan_free(struct fetch_plan *f)
{
	free(f->best);
	free(f->keeper);
	free(f->runner);
	free(f->have);
}

/* Each rank's newest kept copy at or below bound, and its keeper (the lowest agent on ties). */
static void plan_pick(const struct phx_ckpt *c, const struct announce *an, size_t n, long bound,
		      struct fetch_plan *f)
{
	for (unsigned long r = 0; r < c->world; r++)
		f->best[r] = -1;
	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0; i < an[k].nheld; i++) {
			unsigned long r = an[k].held_rank[i];
			long step = an[k].held_step[i];

			if (r < c->world && an[k].port && step <= bound && step > f->best[r]) {
				f->best[r] = step;
				f->keeper[r] = (unsigned)k;
			}
		}
	}
}

/*
 * What each node receives before the restore agreement. The agreement
 * settles on the newest generation every rank has somewhere (the nodes'
 * tiers publish at their own pace, so the keepers' newest copies differ):
 * send each rank's copy of that one, not its newest, or a rank whose node
 * moved would hold only a generation the others cannot match.
 */
static int plan_make(const struct phx_ckpt *c, const struct announce *an, size_t n,
		     struct fetch_plan *f)
{
	long all = LONG_MAX;

	f->best = malloc(c->world * sizeof(*f->best));
	f->have = malloc(c->world * sizeof(*f->have));
	f->keeper = calloc(c->world, sizeof(*f->keeper));
	f->runner = calloc(c->world, sizeof(*f->runner));
	if (!f->best || !f->have || !f->keeper || !f->runner)
		return -1;
	for (unsigned long r = 0; r < c->world; r++)
		f->have[r] = -1;
	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0; i < an[k].nlocal; i++) {
			unsigned long r = an[k].local_rank[i];

			if (r < c->world) {
				f->runner[r] = (unsigned)k;
				f->have[r] = an[k].local_step[i];
			}
		}
	}
	plan_pick(c, an, n, LONG_MAX, f);
	for (unsigned long r = 0; r < c->world; r++) {
		long newest = f->best[r] > f->have[r] ? f->best[r] : f->have[r];

		all = newest < all ? newest : all;
	}
	/* A rank with nothing anywhere: no generation is whole; keep the newest copies. */
	if (all >= 0)
		plan_pick(c, an, n, all, f);
	return 0;
}

static bool plan_sends(const struct fetch_plan *f, unsigned long r)
{
	return f->best[r] >= 0 && f->best[r] > f->have[r];
}

/* ------------------------------------------------------------ sending and waiting */

static void copy_path(const struct ck_partner *p, unsigned long rank, long step, char *buf,
		      size_t len)
{
	snprintf(buf, len, "%s/rank-%lu/gen-%012llu.copy", p->dir, rank,
		 (unsigned long long)ck_gen_of(step));
}

/* This agent's kept copies that another node needs now, one connection per node. */
static void send_kept(struct phx_agent *a, struct phx_ckpt *c, const struct announce *an,
		      const struct fetch_plan *f)
{
	unsigned me = a->pmix.me.rank;

	for (unsigned k = 0; k < a->pmix.size; k++) {
		int fd = -1;

		for (unsigned long r = 0; r < c->world; r++) {
			char path[4600], err[512];
			int rc;

			if (!plan_sends(f, r) || f->keeper[r] != me || f->runner[r] != k)
				continue;
			copy_path(c->partner, r, f->best[r], path, sizeof(path));
			rc = phx_partner_send_file(&fd, a->addrs[k], (uint16_t)an[k].port,
						   RECV_TIMEOUT_MS, path, err, sizeof(err));
			if (rc < 0) {
				phx_warn(
					"cannot send the partner copy of rank %lu (generation %ld) "
					"to %s: %s; its ranks restore from the other tiers",
					r, f->best[r], a->hosts[k], err);
				break;
			}
			phx_info("rank %lu: sent its partner copy of generation %ld to %s", r,
				 f->best[r], a->hosts[k]);
		}
		if (fd >= 0)
			close(fd);
	}
}

static bool arrived(struct ck_partner *p, unsigned long rank, long step)
{
	bool ok;

	pthread_mutex_lock(&p->srv.mu);
	ok = phx_partner_store_get(&p->srv.store, (uint32_t)rank, ck_gen_of(step)) != NULL;
	pthread_mutex_unlock(&p->srv.mu);
	return ok;
}

/* Waits for the copies announced to this node; logs the ones that did not come. */
static void wait_for_copies(struct phx_agent *a, struct phx_ckpt *c, const struct fetch_plan *f)
{
	struct ck_partner *p = c->partner;
	time_t deadline = time(NULL) + FETCH_WAIT_S;
	unsigned long refused0 = p->srv.refused;

	for (;;) {
		unsigned missing = 0;
		unsigned long refused;

		for (unsigned i = 0; i < c->nproc; i++) {
			unsigned long r = c->slot[i].rank;

			missing += plan_sends(f, r) && !arrived(p, r, f->best[r]);
		}
		if (!missing)
			return;
		pthread_mutex_lock(&p->srv.mu);
		refused = p->srv.refused;
		pthread_mutex_unlock(&p->srv.mu);
		if (refused != refused0 || time(NULL) > deadline) {
			phx_warn("%u partner copies announced to %s did not arrive intact; those "
				 "ranks restore from the other tiers",
				 missing, a->node);
			return;
		}
		usleep(10000);
	}
}

/* ------------------------------------------------------------ setup */

static int find_peer(struct phx_agent *a, struct ck_partner *p, const struct announce *an)
{
	char topo_buf[4096], err[1024];
	const char *topo_conf = phx_conf_topology_conf(&a->conf, topo_buf, sizeof(topo_buf));
	struct phx_fabric *fabric = NULL;
	long *partner = calloc(a->pmix.size, sizeof(*partner)), me = a->pmix.me.rank, same_leaf;
	bool switches;

	if (!partner)
		return -1;
	if (phx_fabric_load(a->conf.has_fabric ? a->conf.source : NULL, topo_conf, &fabric, err,
			    sizeof(err)) < 0)
		phx_warn("partner copies: cannot read the fabric (%s); partners are chosen "
			 "without it",
			 err);
	same_leaf =
		phx_partner_assign((const char *const *)a->hosts, a->pmix.size, fabric, partner);
	switches = fabric && fabric->has_switches && fabric->n_leaves > 1;
	phx_fabric_free(fabric);
	/* Without switches every pair shares "the" leaf: nothing to warn about. */
	if (switches && same_leaf > 0 && me == 0)
		phx_warn("partner copies: %ld node(s) keep their partner copies on their own "
			 "leaf switch (the step's nodes leave no room to cross); a leaf's "
			 "failure loses those copies",
			 same_leaf);
	if (same_leaf >= 0 && partner[me] >= 0 && an[partner[me]].port) {
		snprintf(p->peer_host, sizeof(p->peer_host), "%s", a->hosts[partner[me]]);
		snprintf(p->peer_addr, sizeof(p->peer_addr), "%s", a->addrs[partner[me]]);
		p->peer_port = an[partner[me]].port;
	}
	free(partner);
	return 0;
}

static int start_server(struct phx_agent *a, struct phx_ckpt *c, struct ck_partner *p)
{
	char err[1024];
	int rc;

	if (snprintf(p->dir, sizeof(p->dir), "%s/partner", c->dir[PHX_TIER_LOCAL]) >=
	    (int)sizeof(p->dir)) {
		phx_warn("partner copies off on %s: checkpoint.local_dir is too long", a->node);
		return -1;
	}
	rc = phx_mkdirs(p->dir, 0700);
	if (rc < 0) {
		phx_warn("partner copies off on %s: cannot create %s: %s", a->node, p->dir,
			 strerror(-rc));
		return -1;
	}
	memcpy(p->srv.secret, p->secret, sizeof(p->secret));
	p->srv.lim = (struct phx_partner_limits){ .job_id = c->job_id,
						  .nranks = (uint32_t)c->world,
						  .max_bytes = PHX_CKPT_MAX_BYTES };
	p->srv.digest_threads = c->threads;
	p->srv.timeout_ms = RECV_TIMEOUT_MS;
	/* On disk as long as the local tier keeps generations, and the two in flight. */
	p->srv.disk_keep = c->keep + 2;
	memcpy(p->srv.dir, p->dir, sizeof(p->srv.dir));
	if (phx_partner_server_start(&p->srv, a->addrs[a->pmix.me.rank], 0, err, sizeof(err)) < 0) {
		phx_warn("partner copies off on %s: %s", a->node, err);
		return -1;
	}
	p->serving = true;
	return 0;
}

/* Every agent reaches the same answer from the same configuration and environment. */
static bool wanted(struct phx_agent *a, struct phx_ckpt *c)
{
	if (!a->conf.checkpoint.partner || a->pmix.size < 2)
		return false;
	if (!c->dir[PHX_TIER_LOCAL][0]) {
		if (a->pmix.me.rank == 0)
			phx_info("partner copies off: they go with checkpoint.local_dir, which "
				 "is not set");
		return false;
	}
	if (!getenv("PHALANX_JOB_TOKEN")) {
		if (a->pmix.me.rank == 0)
			phx_warn("partner copies off: PHALANX_JOB_TOKEN is not set (the SPANK "
				 "plugin mints it); load spank_phalanx.so or set "
				 "checkpoint.partner: false");
		return false;
	}
	return true;
}

void phx_agent_ckpt_partner_hold(struct phx_ckpt *c, long step)
{
	if (c->partner && c->partner->serving && step >= 0)
		phx_partner_server_hold(&c->partner->srv, ck_gen_of(step));
}

int phx_agent_ckpt_partner_setup(struct phx_agent *a, struct phx_ckpt *c)
{
	size_t n = a->pmix.size;
	char **values = NULL, *mine = NULL, key[64], err[1024];
	struct announce *an = NULL;
	struct fetch_plan f = { 0 };
	struct ck_partner *p;
	int rc = -1;

	if (!wanted(a, c))
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -1;
	p->fd = -1;
	c->partner = p;
	/* A node without a secret or a server still announces (port 0): the gather needs all. */
	if (phx_partner_secret_from_token(getenv("PHALANX_JOB_TOKEN"), p->secret) < 0)
		phx_warn("partner copies off on %s: PHALANX_JOB_TOKEN is not a job token", a->node);
	else
		start_server(a, c, p);
	values = calloc(n, sizeof(*values));
	an = calloc(n, sizeof(*an));
	mine = announce_text(c, p);
	if (!values || !an || !mine)
		goto out;
	snprintf(key, sizeof(key), "phx.ck.partner.%u", a->epoch);
	if (phx_pmix_allgather(&a->pmix, key, mine, values, err, sizeof(err)) < 0) {
		phx_error("partner copies: %s", err);
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		if (parse_announce(values[k], &an[k]) < 0) {
			phx_error("partner copies: agent %zu announced '%.80s', not Phalanx's", k,
				  values[k]);
			goto out;
		}
	}
	if (find_peer(a, p, an) < 0 || plan_make(c, an, n, &f) < 0)
		goto out;
	if (p->serving) {
		send_kept(a, c, an, &f);
		wait_for_copies(a, c, &f);
	}
	if (a->pmix.me.rank == 0)
		phx_info("partner copies on: each node's local-tier shards also go to its "
			 "partner");
	rc = 0;
out:
	plan_free(&f);
	announce_free(an, n);
	for (size_t k = 0; values && k < n; k++)
		free(values[k]);
	free(values);
	free(mine);
	return rc;
}

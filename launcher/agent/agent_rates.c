/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Step rates for straggler detection: the agent samples its workers'
 * heartbeat slots once per round, sends each worker's mean step time over
 * --straggler-window in the round report every few rounds, and every agent
 * runs the same detection over all reports (straggler.c). Agent 0
 * reports each straggler once: a log line, and with --log-dir a JSON line
 * in DIR/stragglers.jsonl for the tools that look at a job later.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "checkpoint/proto/heartbeat.h"
#include "common/clock.h"
#include "common/log.h"
#include "launcher/options.h"
#include "launcher/restart.h"
#include "launcher/straggler.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_ckptd.h"
#include "launcher/agent/agent_rates.h"

void phx_agent_sample_rates(struct phx_agent *a)
{
	struct phx_hb_snapshot snap;

	for (unsigned i = 0; i < a->nproc; i++) {
		struct phx_worker *w = &a->w[i];

		phx_hb_read(a->hb, i, &snap);
		if (!w->running || !snap.beat_ns ||
		    (w->nsamples && w->samples[w->nsamples - 1].beat_ns == snap.beat_ns))
			continue;
		if (w->nsamples == PHX_RATE_SAMPLES) {
			memmove(w->samples, w->samples + 1,
				sizeof(w->samples[0]) * (PHX_RATE_SAMPLES - 1));
			w->nsamples--;
		}
		w->samples[w->nsamples].beat_ns = snap.beat_ns;
		w->samples[w->nsamples].step = snap.step;
		w->nsamples++;
	}
}

/* The worker's mean step time over the window, 0 when it has too few steps in it. */
static int worker_rate(const struct phx_agent *a, const struct phx_worker *w, uint64_t now,
		       struct phx_rate *r)
{
	uint64_t window = (uint64_t)a->o->straggler_window_s * 1000000000ull, b1, s1;
	unsigned j;

	if (!w->running || w->nsamples < 2)
		return -1;
	b1 = w->samples[w->nsamples - 1].beat_ns;
	s1 = w->samples[w->nsamples - 1].step;
	/* Not beating now: a hang, not a straggler. */
	if (now - b1 > window)
		return -1;
	for (j = 0; j + 1 < w->nsamples && b1 - w->samples[j].beat_ns > window; j++)
		;
	if (s1 <= w->samples[j].step ||
	    s1 - w->samples[j].step < (uint64_t)a->o->straggler_min_steps)
		return -1;
	r->rank = w->rank;
	r->steps = s1 - w->samples[j].step;
	r->step_ns = (b1 - w->samples[j].beat_ns) / r->steps;
	return r->step_ns ? 0 : -1;
}

void phx_agent_rates_text(struct phx_agent *a, char *buf, size_t len)
{
	uint64_t now = phx_now_ns(CLOCK_MONOTONIC);
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < a->nproc; i++) {
		struct phx_rate r;

		if (worker_rate(a, &a->w[i], now, &r) == 0 &&
		    phx_rate_format(&r, buf, len, &off) < 0)
			break;
	}
}

static int alloc_rates(struct phx_agent *a)
{
	if (a->rates)
		return 0;
	a->rates = calloc(a->world, sizeof(*a->rates));
	a->rate_median = calloc(a->world, sizeof(*a->rate_median));
	a->rate_peers = calloc(a->world, sizeof(*a->rate_peers));
	a->rate_slow = calloc(a->world, sizeof(*a->rate_slow));
	a->straggler_reported = calloc(a->world, sizeof(*a->straggler_reported));
	return a->rates && a->rate_median && a->rate_peers && a->rate_slow && a->straggler_reported
		       ? 0
		       : -1;
}

static void record(struct phx_agent *a, const struct phx_rate *r, uint64_t median, unsigned peers)
{
	struct json_object *o = json_object_new_object();
	char path[4096];
	const char *line;
	int fd;

	if (!a->o->log_dir || !o)
		goto out;
	json_object_object_add(o, "time", json_object_new_int64((int64_t)time(NULL)));
	json_object_object_add(o, "run_id", json_object_new_string(a->run_id));
	json_object_object_add(o, "rank", json_object_new_int64((int64_t)r->rank));
	json_object_object_add(o, "role", json_object_new_string(a->o->roles[r->role].name));
	json_object_object_add(o, "node", json_object_new_string(a->hosts[r->agent]));
	json_object_object_add(o, "step_ms", json_object_new_double(r->step_ns / 1e6));
	json_object_object_add(o, "median_ms", json_object_new_double(median / 1e6));
	json_object_object_add(o, "ratio",
			       json_object_new_double((double)r->step_ns / (double)median));
	json_object_object_add(o, "peers", json_object_new_int((int)peers));
	json_object_object_add(o, "steps", json_object_new_int64((int64_t)r->steps));
	json_object_object_add(o, "window_s", json_object_new_int(a->o->straggler_window_s));
	snprintf(path, sizeof(path), "%s/stragglers.jsonl", a->o->log_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		phx_warn("cannot record the straggler in %s: %s", path, strerror(errno));
		goto out;
	}
	line = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	/* One write: a reader never sees half a line. */
	if (dprintf(fd, "%s\n", line) < 0)
		phx_warn("cannot record the straggler in %s: %s", path, strerror(errno));
	close(fd);
out:
	json_object_put(o);
}

static void report(struct phx_agent *a, const struct phx_rate *r, uint64_t median, unsigned peers)
{
	char why[128];

	phx_warn("straggler: rank %lu (role %s) on %s takes %.1f ms per step, %.2fx the median "
		 "%.1f ms of the %u ranks of its role (%llu steps in the last %d s); look at %s "
		 "(phalanx health, GPU clocks, other processes)",
		 r->rank, a->o->roles[r->role].name, a->hosts[r->agent], r->step_ns / 1e6,
		 (double)r->step_ns / (double)median, median / 1e6, peers,
		 (unsigned long long)r->steps, a->o->straggler_window_s, a->hosts[r->agent]);
	record(a, r, median, peers);
	snprintf(why, sizeof(why), "rank %lu %.2fx the median", r->rank,
		 (double)r->step_ns / (double)median);
	phx_agent_ckptd_straggler(a, a->hosts[r->agent],
				  phx_straggler_lost_us(r->step_ns, median, r->steps), why);
}

void phx_agent_find_stragglers(struct phx_agent *a, char **values, const struct phx_report *rep)
{
	size_t n = 0;

	if (a->o->straggler_pct <= 0 || alloc_rates(a) < 0)
		return;
	for (size_t i = 0; i < a->pmix.size; i++) {
		if (!rep[i].rates_at)
			continue;
		if (phx_rates_parse(values[i] + rep[i].rates_at, rep[i].role, (unsigned)i, a->world,
				    a->rates, a->world, &n) < 0) {
			phx_warn("agent %zu sent step rates that are not Phalanx's: '%.80s'", i,
				 values[i] + rep[i].rates_at);
			return;
		}
	}
	if (!phx_straggler_detect(a->rates, n, (unsigned)a->o->straggler_pct, a->rate_median,
				  a->rate_peers, a->rate_slow))
		return;
	for (size_t i = 0; i < n; i++) {
		const struct phx_rate *r = &a->rates[i];

		if (!a->rate_slow[i] || a->straggler_reported[r->rank])
			continue;
		a->straggler_reported[r->rank] = true;
		if (a->pmix.me.rank == 0)
			report(a, r, a->rate_median[i], a->rate_peers[i]);
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "checkpoint/ckptd/ckpt_interval.h"
#include "checkpoint/ckptd/goodput.h"

static const char *const part_names[PHX_GP_PARTS] = {
	[PHX_GP_PRODUCTIVE] = "productive", [PHX_GP_STALL] = "checkpoint_stall",
	[PHX_GP_LOST] = "lost_work",	    [PHX_GP_DETECT] = "detection",
	[PHX_GP_RESTART] = "restart",	    [PHX_GP_QUEUE] = "queue",
	[PHX_GP_STRAGGLER] = "straggler",
};

static const char *const phase_names[] = { "restart", "run", "queue", "done" };

const char *phx_gp_part_name(enum phx_gp_part p)
{
	return p < PHX_GP_PARTS ? part_names[p] : "?";
}

const char *phx_gp_phase_name(enum phx_gp_phase p)
{
	return p <= PHX_GP_PH_DONE ? phase_names[p] : "?";
}

int phx_gp_phase_parse(const char *s)
{
	for (int i = 0; i <= PHX_GP_PH_DONE; i++)
		if (!strcmp(s, phase_names[i]))
			return i;
	return -1;
}

void phx_gp_begin(struct phx_goodput *g, double now)
{
	memset(g, 0, sizeof(*g));
	g->start = g->since = now;
	g->phase = PHX_GP_PH_RESTART;
}

static int phase_part(enum phx_gp_phase ph)
{
	return ph == PHX_GP_PH_RUN     ? PHX_GP_PRODUCTIVE
	       : ph == PHX_GP_PH_QUEUE ? PHX_GP_QUEUE
				       : PHX_GP_RESTART;
}

/* Closes the open phase at now (never backwards). */
static void advance(struct phx_goodput *g, double now)
{
	double dt;

	if (g->phase == PHX_GP_PH_DONE || now <= g->since)
		return;
	dt = now - g->since;
	g->part[phase_part(g->phase)] += dt;
	if (g->phase == PHX_GP_PH_RUN)
		g->since_commit += dt;
	g->since = now;
}

/* Moves up to s seconds of productive time into part; returns what moved. */
static double take(struct phx_goodput *g, enum phx_gp_part part, double s)
{
	if (s < 0)
		s = 0;
	if (s > g->part[PHX_GP_PRODUCTIVE])
		s = g->part[PHX_GP_PRODUCTIVE];
	g->part[PHX_GP_PRODUCTIVE] -= s;
	g->part[part] += s;
	return s;
}

static void take_recent(struct phx_goodput *g, enum phx_gp_part part, double s)
{
	s = take(g, part, s);
	g->since_commit = g->since_commit > s ? g->since_commit - s : 0;
}

void phx_gp_step(struct phx_goodput *g, double now)
{
	if (g->phase == PHX_GP_PH_DONE || g->phase == PHX_GP_PH_RUN)
		return;
	advance(g, now);
	g->phase = PHX_GP_PH_RUN;
}

void phx_gp_stall(struct phx_goodput *g, double now, double s)
{
	advance(g, now);
	take_recent(g, PHX_GP_STALL, s);
}

void phx_gp_straggler(struct phx_goodput *g, double now, double s)
{
	advance(g, now);
	take_recent(g, PHX_GP_STRAGGLER, s);
}

void phx_gp_commit(struct phx_goodput *g, double now)
{
	advance(g, now);
	g->since_commit = 0;
}

void phx_gp_fault(struct phx_goodput *g, double now, double detect_s)
{
	if (g->phase == PHX_GP_PH_DONE)
		return;
	advance(g, now);
	if (g->phase == PHX_GP_PH_RUN) {
		/* The failure happened detect_s ago: that time trained nothing. */
		take_recent(g, PHX_GP_DETECT, detect_s);
		take(g, PHX_GP_LOST, g->since_commit);
		g->since_commit = 0;
	}
	g->failures++;
	g->phase = PHX_GP_PH_RESTART;
}

void phx_gp_requeue(struct phx_goodput *g, double now)
{
	if (g->phase == PHX_GP_PH_DONE)
		return;
	advance(g, now);
	if (g->phase == PHX_GP_PH_RUN) {
		take(g, PHX_GP_LOST, g->since_commit);
		g->since_commit = 0;
	}
	g->requeues++;
	g->phase = PHX_GP_PH_QUEUE;
}

void phx_gp_running(struct phx_goodput *g, double start)
{
	if (g->phase != PHX_GP_PH_QUEUE)
		return;
	advance(g, start);
	g->phase = PHX_GP_PH_RESTART;
}

void phx_gp_end(struct phx_goodput *g, double now)
{
	if (g->phase == PHX_GP_PH_DONE)
		return;
	advance(g, now);
	g->end = g->since;
	g->phase = PHX_GP_PH_DONE;
}

double phx_gp_snapshot(const struct phx_goodput *g, double now, double part[PHX_GP_PARTS])
{
	struct phx_goodput c = *g;
	double sum = 0;

	advance(&c, now);
	for (int i = 0; i < PHX_GP_PARTS; i++) {
		part[i] = c.part[i];
		sum += c.part[i];
	}
	return sum;
}

void phx_gp_model(struct phx_gp_model *m)
{
	double seg, loss;

	m->mtbf_s = 1.0 / (m->rate_per_gpu_s * m->gpus);
	m->interval_s = phx_interval_daly(m->stall_s, m->mtbf_s);
	seg = m->interval_s + m->stall_s;
	loss = (m->mttr_s + seg / 2.0) / m->mtbf_s;
	m->goodput = m->interval_s / seg * (loss < 1.0 ? 1.0 - loss : 0.0);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli/progress.h"

#define EVERY_TTY_S 1.0
#define EVERY_LOG_S 10.0

void phx_progress_init(struct phx_progress *p, const char *what, const char *unit, uint64_t total,
		       uint64_t total_bytes, FILE *out, bool tty, double now)
{
	memset(p, 0, sizeof(*p));
	p->what = what;
	p->unit = unit;
	p->total = total;
	p->total_bytes = total_bytes;
	p->out = out;
	p->tty = tty;
	p->every = tty ? EVERY_TTY_S : EVERY_LOG_S;
	p->start = now;
	p->next = now + p->every;
	pthread_mutex_init(&p->lock, NULL);
}

/* 1536 -> "1.5 KiB": binary units, as du -h and Slurm print them. */
static void bytes_text(double b, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	size_t u = 0;

	while (b >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, units[u]);
}

void phx_progress_format(const struct phx_progress *p, double now, char *buf, size_t len)
{
	double took = now - p->start, rate = took > 0 ? p->bytes / took : 0;
	char done[32], total[32], speed[32];
	int n;

	bytes_text((double)p->bytes, done, sizeof(done));
	bytes_text((double)p->total_bytes, total, sizeof(total));
	bytes_text(rate, speed, sizeof(speed));
	n = snprintf(buf, len, "%s: %llu of %llu %s, %s of %s, %s/s", p->what,
		     (unsigned long long)p->done, (unsigned long long)p->total, p->unit, done,
		     total, speed);
	/* The rest at the rate so far; by units when there are no bytes to go by. */
	if (n > 0 && (size_t)n < len && took > 0 && p->done && p->done < p->total) {
		double left = p->total_bytes && p->bytes
				      ? (double)(p->total_bytes - p->bytes) / rate
				      : took * (double)(p->total - p->done) / (double)p->done;

		snprintf(buf + n, len - (size_t)n, ", about %.0f s left", left);
	}
}

void phx_progress_add(struct phx_progress *p, uint64_t n, uint64_t bytes, double now)
{
	char line[256];

	pthread_mutex_lock(&p->lock);
	p->done += n;
	p->bytes += bytes;
	if (now >= p->next && p->done < p->total) {
		phx_progress_format(p, now, line, sizeof(line));
		/* \033[K clears what a longer earlier line left. */
		fprintf(p->out, p->tty ? "\rphalanx: %s\033[K" : "phalanx: %s\n", line);
		fflush(p->out);
		p->shown = true;
		p->next = now + p->every;
	}
	pthread_mutex_unlock(&p->lock);
}

void phx_progress_clear(struct phx_progress *p)
{
	pthread_mutex_lock(&p->lock);
	if (p->tty && p->shown) {
		fputs("\r\033[K", p->out);
		fflush(p->out);
		p->shown = false;
	}
	pthread_mutex_unlock(&p->lock);
}

void phx_progress_end(struct phx_progress *p)
{
	phx_progress_clear(p);
	pthread_mutex_destroy(&p->lock);
}

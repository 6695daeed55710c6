/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents' UDP channel: see agent_wake.h. One socket per agent, read by
 * one thread of its own, so that beats go out and are heard while the main
 * loop is busy (a spawn, a restore, a slow file system). Every datagram is
 * a fixed 32-byte message (magic, sender, round, key):
 *   wake: sent to every other agent, O(nodes) per piece of news. Only a
 *         round later than any heard counts: no agent can be more than one
 *         round ahead of another, since a round is a fence every agent enters.
 *   beat: every timeout/PHX_LIVENESS_BEATS to the agents that watch this one
 *         (launcher/liveness.h); "settling" while this agent's workers start,
 *         "end" when this agent exits on its own.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "checkpoint/proto/heartbeat.h"
#include "common/clock.h"
#include "common/hex.h"
#include "common/log.h"
#include "launcher/liveness.h"
#include "launcher/options.h"
#include "launcher/result.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_wake.h"

#define WAKE_KEY_LEN (PHX_WAKE_KEY_HEX / 2)

static const char magic_wake[4] = "PHXW";
/* By enum phx_beat. */
static const char magic_beat[][4] = { "PHXB", "PHXS", "PHXE" };

/*
 * Settled when every worker started here has beaten once through
 * libphalanx, or this long after its start for workers that never do.
 */
#define SETTLE_MAX_NS (30ull * 1000000000ull)
#define PROGRESS_EVERY_NS 1000000000ull

struct wake_msg {
	char magic[4];
	uint32_t from; /* big-endian agent rank */
	uint64_t round; /* big-endian, wakes only */
	uint8_t key[WAKE_KEY_LEN];
};

struct phx_agent_wake {
	int fd;
	int news_fd; /* eventfd: the thread heard a wake, for the main loop */
	int stop_fd; /* eventfd: the main loop asks the thread to end */
	unsigned port;
	uint8_t key[WAKE_KEY_LEN]; /* the step's, once connected */
	char key_hex[PHX_WAKE_KEY_HEX + 1]; /* this agent's own */
	struct sockaddr_in *peers; /* [size] by agent rank; sin_port 0: none */
	uint32_t me, size;
	struct sockaddr_in driver; /* where lost reports go too; sin_port 0: nowhere */
	char driver_key[PHX_LOST_KEY_HEX + 1];
	char *const *hosts; /* the agent's, for the lost lines */
	const char *node;
	atomic_ulong due; /* the latest round another agent said it started */
	atomic_bool settling; /* this agent's workers are starting (the main loop's word) */
	struct phx_liveness live; /* the thread's only */
	uint64_t latest_beat_ns; /* the thread's: the most a beat went out after it was due */
	bool watching; /* beats on (a timeout, and peers) */
	bool to_driver; /* alone in its step: it beats to the driver instead */
	bool progress; /* in a role's step: its workers' progress goes to the driver */
	uint64_t progress_at; /* the thread's: when the next report is due */
	/* The main loop's word to the thread: the lowest step (UINT64_MAX: none yet), the waits. */
	_Atomic uint64_t low_step;
	_Atomic uint64_t wait_ms;
	_Atomic long resumed; /* the checkpoint step its workers resumed from; -1: none */
	uint64_t wait_ns; /* the main loop's: every worker's waits, restarts included */
	bool threaded;
	pthread_t thread;
};

void phx_agent_wake_open(struct phx_agent *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct phx_agent_wake *w = calloc(1, sizeof(*w));

	if (!w)
		return;
	w->news_fd = w->stop_fd = -1;
	w->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (w->fd < 0 || bind(w->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(w->fd, (struct sockaddr *)&sa, &len) < 0 ||
	    getrandom(w->key, sizeof(w->key), 0) != (ssize_t)sizeof(w->key) ||
	    (w->news_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		phx_info("no wake-up socket on %s (%s): the agents hear of failures at their "
			 "next --sync-interval-ms tick, and of its death from Slurm",
			 a->node, strerror(errno));
		a->wake = w;
		phx_agent_wake_close(a);
		return;
	}
	w->port = ntohs(sa.sin_port);
	atomic_init(&w->settling, true);
	atomic_init(&w->low_step, UINT64_MAX);
	atomic_init(&w->wait_ms, 0);
	atomic_init(&w->resumed, -1);
	phx_hex_encode(w->key, sizeof(w->key), w->key_hex);
	a->wake = w;
}

unsigned phx_agent_wake_port(const struct phx_agent *a)
{
	return a->wake ? a->wake->port : 0;
}

const char *phx_agent_wake_key(const struct phx_agent *a)
{
	return a->wake ? a->wake->key_hex : "";
}

static void send_to(struct phx_agent_wake *w, uint32_t rank, const char *magic, uint64_t round)
{
	struct wake_msg m = { .from = htobe32(w->me), .round = htobe64(round) };

	if (rank == w->me || !w->peers[rank].sin_port)
		return;
	memcpy(m.magic, magic, sizeof(m.magic));
	memcpy(m.key, w->key, sizeof(m.key));
	/* Best effort: a lost wake leaves that agent to its tick, a lost beat is one of several. */
	(void)sendto(w->fd, &m, sizeof(m), MSG_DONTWAIT, (struct sockaddr *)&w->peers[rank],
		     sizeof(w->peers[rank]));
}

static void heard_wake(struct phx_agent_wake *w, uint64_t round)
{
	unsigned long due = atomic_load(&w->due);
	uint64_t one = 1;

	while (round > due) {
		if (atomic_compare_exchange_weak(&w->due, &due, (unsigned long)round)) {
			if (write(w->news_fd, &one, sizeof(one)) < 0)
				phx_debug("wake-up: cannot tell the main loop: %s",
					  strerror(errno));
			return;
		}
	}
}

/*
 * Bounded: a flood is read in batches, one datagram costs one compare.
 * True once the socket is empty: only then has every beat that came been
 * heard.
 */
static bool receive(struct phx_agent_wake *w)
{
	struct wake_msg m;

	for (int i = 0; i < 64; i++) {
		ssize_t n = recv(w->fd, &m, sizeof(m), MSG_TRUNC);

		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK;
		if (n != (ssize_t)sizeof(m) || CRYPTO_memcmp(m.key, w->key, WAKE_KEY_LEN))
			continue;
		if (!memcmp(m.magic, magic_wake, 4)) {
			heard_wake(w, be64toh(m.round));
			continue;
		}
		for (enum phx_beat b = PHX_BEAT_STEADY; w->watching && b <= PHX_BEAT_END; b++) {
			if (!memcmp(m.magic, magic_beat[b], 4))
				phx_liveness_heard(&w->live, be32toh(m.from), b,
						   phx_now_ns(CLOCK_MONOTONIC));
		}
	}
	return false;
}

/* The line, straight to the driver as well: srun's output may be queued behind the workers'. */
static void tell_driver(struct phx_agent_wake *w, const char *line, size_t n)
{
	char d[PHX_LOST_REPORT_MAX];
	int k;

	if (!w->driver.sin_port)
		return;
	k = snprintf(d, sizeof(d), "%s %.*s", w->driver_key, (int)n, line);
	if (k > 0 && (size_t)k < sizeof(d))
		(void)sendto(w->fd, d, (size_t)k, MSG_DONTWAIT, (struct sockaddr *)&w->driver,
			     sizeof(w->driver));
}

/* For the role's goodput ledger, once a second. */
static void tell_progress(struct phx_agent_wake *w, uint64_t now)
{
	uint64_t low = atomic_load(&w->low_step);
	long resumed = atomic_load(&w->resumed);
	struct phx_progress p = {
		.stepped = low != UINT64_MAX,
		.step = low,
		.wait_ms = atomic_load(&w->wait_ms),
		.resumed = resumed >= 0,
		.resumed_step = resumed >= 0 ? (uint64_t)resumed : 0,
	};
	char line[512];
	int n;

	if (!w->progress || now < w->progress_at)
		return;
	w->progress_at = now + PROGRESS_EVERY_NS;
	n = phx_progress_format(w->node, &p, line, sizeof(line));
	if (n > 0 && (size_t)n < sizeof(line))
		tell_driver(w, line, (size_t)n);
}

static void beat(struct phx_agent_wake *w, enum phx_beat what, uint64_t now)
{
	char line[512];
	int n;

	for (unsigned i = 0; i < w->live.n; i++)
		send_to(w, phx_liveness_target(&w->live, i), magic_beat[what], 0);
	tell_progress(w, now);
	if (!w->to_driver)
		return;
	n = phx_alive_format(w->node, what, line, sizeof(line));
	if (n > 0 && (size_t)n < sizeof(line))
		tell_driver(w, line, (size_t)n);
}

/* One line per silent agent, in one write: the driver reads them from srun's stderr. */
static void report_silent(struct phx_agent_wake *w, uint64_t now)
{
	uint64_t quiet;
	long r;

	while ((r = phx_liveness_silent(&w->live, now, &quiet)) >= 0) {
		char line[1024];
		int n = phx_lost_format(w->hosts[r], (unsigned long)(quiet / 1000000u), w->node,
					line, sizeof(line));

		if (n <= 0 || (size_t)n >= sizeof(line))
			continue;
		tell_driver(w, line, (size_t)n);
		if (write(STDERR_FILENO, line, (size_t)n) < 0)
			return;
	}
}

static void *watch_thread(void *arg)
{
	struct phx_agent_wake *w = arg;
	uint64_t interval = phx_liveness_interval(&w->live), next = 0;

	for (;;) {
		struct pollfd pf[2] = { { w->fd, POLLIN, 0 }, { w->stop_fd, POLLIN, 0 } };
		uint64_t now = phx_now_ns(CLOCK_MONOTONIC);
		/*
		 * Read after now: beats queued while this thread itself was
		 * not scheduled, or behind a batch of wakes, are no silence of
		 * their sender's; silence is judged on an empty socket only.
		 * An error pending on the socket is read (and cleared) too.
		 */
		bool drained = receive(w);
		int timeout = -1;

		if (w->watching || w->to_driver) {
			if (now >= next) {
				beat(w,
				     atomic_load(&w->settling) ? PHX_BEAT_SETTLING
							       : PHX_BEAT_STEADY,
				     now);
				if (next && now - next > w->latest_beat_ns)
					w->latest_beat_ns = now - next;
				next = now + interval;
			}
			if (drained && w->watching)
				report_silent(w, now);
			timeout = drained ? (int)((next - now + 999999u) / 1000000u) : 0;
		} else if (!drained) {
			timeout = 0;
		}
		if (poll(pf, 2, timeout) < 0 && errno != EINTR) {
			phx_warn("the liveness watch on %s stopped: poll: %s; its death is left to "
				 "Slurm",
				 w->node, strerror(errno));
			break;
		}
		if (pf[1].revents) {
			if (!(pf[1].revents & POLLIN))
				phx_warn("the liveness watch on %s stopped: its stop descriptor "
					 "failed (revents %#x)",
					 w->node, (unsigned)pf[1].revents);
			break;
		}
	}
	/* Ending: the watchers are not to take the silence for a death. */
	if (w->watching || w->to_driver) {
		w->progress_at = 0; /* the last word on its waits */
		beat(w, PHX_BEAT_END, phx_now_ns(CLOCK_MONOTONIC));
	}
	if (w->watching && w->latest_beat_ns > w->live.timeout_ns / 3)
		phx_warn("the liveness beats on %s went out up to %llu ms late (its CPUs were "
			 "saturated); its watchers take %llu ms of silence for a loss: keep "
			 "--peer-timeout-ms well above the first if this node was reported lost",
			 w->node, (unsigned long long)(w->latest_beat_ns / 1000000u),
			 (unsigned long long)(w->live.timeout_ns / 1000000u));
	return NULL;
}

static int resolve(const char *addr, unsigned port, struct sockaddr_in *out)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *res;

	if (!port || !addr || getaddrinfo(addr, NULL, &hints, &res) != 0)
		return -1;
	memcpy(out, res->ai_addr, sizeof(*out));
	out->sin_port = htons((uint16_t)port);
	freeaddrinfo(res);
	return 0;
}

/* The main loop's source: -1 once the wake-up is closed (sources stay registered). */
static int news_fd(void *ctx, short *events)
{
	struct phx_agent *a = ctx;

	*events = POLLIN;
	return a->wake ? a->wake->news_fd : -1;
}

static void news_handle(void *ctx, short revents)
{
	struct phx_agent *a = ctx;
	uint64_t n;

	if (a->wake && (revents & POLLIN) && read(a->wake->news_fd, &n, sizeof(n)) < 0)
		phx_debug("wake-up: %s", strerror(errno));
}

/*
 * The driver's address for lost reports (PHX_LOST_ENV, "ADDR:PORT:KEY"),
 * taken out of the environment: the workers have no use for it. Agents
 * started by hand have none.
 */
static void find_driver(struct phx_agent_wake *w)
{
	const char *v = getenv(PHX_LOST_ENV), *c1, *c2;
	char addr[64];
	unsigned long port;
	char *end;

	if (!v)
		return;
	c1 = strchr(v, ':');
	c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	if (c2 && (size_t)(c1 - v) < sizeof(addr) && strlen(c2 + 1) == PHX_LOST_KEY_HEX) {
		memcpy(addr, v, (size_t)(c1 - v));
		addr[c1 - v] = '\0';
		port = strtoul(c1 + 1, &end, 10);
		w->driver.sin_family = AF_INET;
		if (end == c2 && port && port < 65536 &&
		    inet_pton(AF_INET, addr, &w->driver.sin_addr) == 1) {
			w->driver.sin_port = htons((uint16_t)port);
			memcpy(w->driver_key, c2 + 1, PHX_LOST_KEY_HEX + 1);
		}
	}
	if (!w->driver.sin_port)
		phx_warn("%s is not ADDR:PORT:KEY: lost nodes are reported on stderr only; was "
			 "the agent started by another version's driver?",
			 PHX_LOST_ENV);
	unsetenv(PHX_LOST_ENV);
}

/*
 * Beats on when asked for and someone is there to watch; every agent gets
 * the same answer. An agent alone in a role's step has the driver watch it.
 */
static void watch_start(struct phx_agent *a, struct phx_agent_wake *w)
{
	unsigned timeout_ms = (unsigned)a->o->peer_timeout_ms;

	phx_liveness_init(&w->live, w->me, w->size, (uint64_t)timeout_ms * 1000000u,
			  phx_now_ns(CLOCK_MONOTONIC));
	w->watching = timeout_ms && w->live.n;
	w->to_driver = timeout_ms && !w->live.n && a->o->step_role && w->driver.sin_port;
	/* With the beats: detection off (--peer-timeout-ms 0) leaves the ledger without it. */
	w->progress = timeout_ms && a->o->step_role && w->driver.sin_port;
	if (w->to_driver)
		phx_info("role %s on %s: alone in its step, its agent beats to the driver, which "
			 "takes %u ms of silence for the node's loss (--peer-timeout-ms)",
			 a->o->step_role, a->node, timeout_ms);
	if (w->watching && a->pmix.me.rank == 0)
		phx_info("the agents watch each other: a node whose agent is silent for %u ms is "
			 "lost (--peer-timeout-ms)",
			 timeout_ms);
}

void phx_agent_wake_connect(struct phx_agent *a, const unsigned *ports, const char *key)
{
	struct phx_agent_wake *w = a->wake;
	struct phx_agent_source source = {
		.fd = news_fd,
		.handle = news_handle,
		.ctx = a,
	};

	if (!w)
		return;
	if (!key || phx_hex_decode(key, strlen(key), w->key, sizeof(w->key)) < 0)
		goto off;
	w->peers = calloc(a->pmix.size, sizeof(*w->peers));
	if (!w->peers)
		goto off;
	w->me = a->pmix.me.rank;
	w->size = a->pmix.size;
	w->hosts = a->hosts;
	w->node = a->node;
	for (uint32_t r = 0; r < a->pmix.size; r++) {
		if (r != w->me && resolve(a->addrs[r], ports[r], &w->peers[r]) < 0)
			w->peers[r].sin_port = 0;
	}
	find_driver(w);
	watch_start(a, w);
	if (phx_agent_pump_add(a, &source) < 0)
		goto off;
	w->threaded = pthread_create(&w->thread, NULL, watch_thread, w) == 0;
	if (!w->threaded)
		goto off;
	return;
off:
	if (a->pmix.me.rank == 0)
		phx_info("the agents have no wake-up: they hear of failures at their next "
			 "--sync-interval-ms tick, and of a node's death from Slurm");
	phx_agent_wake_close(a);
}

void phx_agent_wake_send(struct phx_agent *a, unsigned long round)
{
	struct phx_agent_wake *w = a->wake;

	if (!w || !w->peers)
		return;
	for (uint32_t r = 0; r < w->size; r++)
		send_to(w, r, magic_wake, round);
}

void phx_agent_wake_check_settled(struct phx_agent *a)
{
	uint64_t now = phx_now_ns(CLOCK_MONOTONIC), low = UINT64_MAX;
	struct phx_agent_wake *wk = a->wake;
	struct phx_hb_snapshot snap;
	bool settling = false;

	if (!wk)
		return;
	for (unsigned i = 0; i < a->nproc; i++) {
		struct phx_worker *w = &a->w[i];

		phx_hb_read(a->hb, w->slot, &snap);
		/* A (re)started worker's heartbeat slot is reset: no beat yet. */
		settling |= w->running && !snap.beat_ns && now - w->start_ns < SETTLE_MAX_NS;
		if (w->running && snap.beat_ns && snap.step < low)
			low = snap.step;
		/* A restart zeroes the slot's count: what it had is counted already. */
		wk->wait_ns += snap.wait_ns >= w->wait_seen_ns ? snap.wait_ns - w->wait_seen_ns
							       : snap.wait_ns;
		w->wait_seen_ns = snap.wait_ns;
	}
	atomic_store(&wk->settling, settling);
	atomic_store(&wk->low_step, low);
	atomic_store(&wk->wait_ms, wk->wait_ns / 1000000u);
	atomic_store(&wk->resumed, a->resumed_step ? (long)a->resumed_step : -1);
}

bool phx_agent_wake_due(const struct phx_agent *a)
{
	return a->wake && atomic_load(&a->wake->due) == a->rounds + 1;
}

void phx_agent_wake_close(struct phx_agent *a)
{
	struct phx_agent_wake *w = a->wake;
	uint64_t one = 1;

	if (!w)
		return;
	if (w->threaded) {
		if (write(w->stop_fd, &one, sizeof(one)) < 0)
			phx_debug("wake-up: cannot stop its thread: %s", strerror(errno));
		pthread_join(w->thread, NULL);
	}
	if (w->fd >= 0)
		close(w->fd);
	if (w->news_fd >= 0)
		close(w->news_fd);
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	free(w->peers);
	free(w);
	a->wake = NULL;
}

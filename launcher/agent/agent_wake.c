/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents' wake-up: see agent_wake.h. One UDP socket per agent; a wake
 * is a fixed 32-byte datagram (magic, round, key) sent to every other
 * agent, O(nodes) datagrams per piece of news. A receiver keeps only the
 * round right after its own: no agent can be more than one round ahead of
 * another, since a round is a fence every agent enters.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/hex.h"
#include "common/log.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_wake.h"

#define WAKE_MAGIC "PHXW"
#define WAKE_KEY_LEN (PHX_WAKE_KEY_HEX / 2)

struct wake_msg {
	char magic[4];
	uint32_t zero;
	uint64_t round; /* big-endian */
	uint8_t key[WAKE_KEY_LEN];
};

struct phx_agent_wake {
	int fd;
	unsigned port;
	uint8_t key[WAKE_KEY_LEN]; /* the step's, once connected */
	char key_hex[PHX_WAKE_KEY_HEX + 1]; /* this agent's own */
	struct sockaddr_in *peers; /* [npeers], the other agents */
	size_t npeers;
	unsigned long due; /* the latest round another agent said it started */
};

void phx_agent_wake_open(struct phx_agent *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct phx_agent_wake *w = calloc(1, sizeof(*w));

	if (!w)
		return;
	w->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (w->fd < 0 || bind(w->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(w->fd, (struct sockaddr *)&sa, &len) < 0 ||
	    getrandom(w->key, sizeof(w->key), 0) != (ssize_t)sizeof(w->key)) {
		phx_info("no wake-up socket on %s (%s): the agents hear of failures at their "
			 "next --sync-interval-ms tick",
			 a->node, strerror(errno));
		if (w->fd >= 0)
			close(w->fd);
		free(w);
		return;
	}
	w->port = ntohs(sa.sin_port);
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

static int wake_fd(void *ctx, short *events)
{
	struct phx_agent *a = ctx;

	*events = POLLIN;
	return a->wake->fd;
}

static void wake_handle(void *ctx, short revents)
{
	struct phx_agent *a = ctx;
	struct phx_agent_wake *w = a->wake;
	struct wake_msg m;
	ssize_t n;

	if (!(revents & POLLIN))
		return;
	/* Bounded: a flood is read in batches, one datagram costs one compare. */
	for (int i = 0; i < 64; i++) {
		uint64_t round;

		n = recv(w->fd, &m, sizeof(m), MSG_TRUNC);
		if (n < 0)
			return;
		if (n != (ssize_t)sizeof(m) || memcmp(m.magic, WAKE_MAGIC, 4) ||
		    CRYPTO_memcmp(m.key, w->key, WAKE_KEY_LEN))
			continue;
		round = be64toh(m.round);
		if (round == a->rounds + 1 && round > w->due)
			w->due = round;
	}
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

void phx_agent_wake_connect(struct phx_agent *a, const unsigned *ports, const char *key)
{
	struct phx_agent_wake *w = a->wake;
	struct phx_agent_source source = {
		.fd = wake_fd,
		.handle = wake_handle,
		.ctx = a,
	};

	if (!w)
		return;
	if (!key || phx_hex_decode(key, strlen(key), w->key, sizeof(w->key)) < 0)
		goto off;
	w->peers = calloc(a->pmix.size, sizeof(*w->peers));
	if (!w->peers)
		goto off;
	for (uint32_t r = 0; r < a->pmix.size; r++) {
		if (r != a->pmix.me.rank &&
		    resolve(a->addrs[r], ports[r], &w->peers[w->npeers]) == 0)
			w->npeers++;
	}
	if (phx_agent_pump_add(a, &source) < 0)
		goto off;
	return;
off:
	if (a->pmix.me.rank == 0)
		phx_info("the agents have no wake-up: they hear of failures at their next "
			 "--sync-interval-ms tick");
	phx_agent_wake_close(a);
}

void phx_agent_wake_send(struct phx_agent *a, unsigned long round)
{
	struct phx_agent_wake *w = a->wake;
	struct wake_msg m = { .zero = 0 };

	if (!w)
		return;
	memcpy(m.magic, WAKE_MAGIC, sizeof(m.magic));
	m.round = htobe64(round);
	memcpy(m.key, w->key, sizeof(m.key));
	/* Best effort: a lost wake only leaves that agent to its tick. */
	for (size_t i = 0; i < w->npeers; i++)
		(void)sendto(w->fd, &m, sizeof(m), MSG_DONTWAIT, (struct sockaddr *)&w->peers[i],
			     sizeof(w->peers[i]));
}

bool phx_agent_wake_due(const struct phx_agent *a)
{
	return a->wake && a->wake->due == a->rounds + 1;
}

void phx_agent_wake_close(struct phx_agent *a)
{
	struct phx_agent_wake *w = a->wake;

	if (!w)
		return;
	close(w->fd);
	free(w->peers);
	free(w);
	a->wake = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Frames reach phalanx-ckptd from any host that can connect, and reach the
 * agents from the daemon: any bytes, split anywhere, must give messages or
 * a refusal. The first input byte picks the reading side and a split point.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/proto/ckpt_wire.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "ckpt_wire";

static void body(const char *b, size_t len, enum phx_wire_side side, struct phx_wire_order *o)
{
	struct phx_wire_msg m;
	char err[512];

	if (phx_wire_decode(b, len, side, &m, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		return;
	}
	if (phx_wire_order_accept(o, &m, err, sizeof(err)) < 0 && !err[0])
		abort();
	phx_wire_msg_free(&m);
}

static void same(int ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "phalanx: fuzz: the fast prepare reader and json-c differ on %s\n", what);
	abort();
}

/* What the fast prepare reader takes, the json-c path takes the same way. */
static void differential(const char *b, size_t len)
{
	struct phx_wire_msg f, j;
	char err[512];

	if (!phx_wire_decode_prepare_fast(b, len, &f))
		return;
	same(phx_wire_decode_json(b, len, PHX_SIDE_DAEMON, &j, err, sizeof(err)) == 0, "accepting");
	same(j.type == f.type && j.gen == f.gen && j.step == f.step && j.nshards == f.nshards,
	     "the header");
	for (size_t i = 0; i < f.nshards; i++) {
		const struct phx_manifest_shard *a = &f.shards[i], *z = &j.shards[i];

		same(a->rank == z->rank && a->bytes == z->bytes &&
			     !strcmp(a->digest.alg, z->digest.alg) &&
			     !strcmp(a->digest.hex, z->digest.hex) &&
			     a->nlocations == z->nlocations,
		     "a shard");
		for (size_t k = 0; k < a->nlocations; k++)
			same(!strcmp(a->locations[k].tier, z->locations[k].tier) &&
				     !strcmp(a->locations[k].path, z->locations[k].path),
			     "a location");
	}
	phx_wire_msg_free(&f);
	phx_wire_msg_free(&j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_wire_reader r;
	struct phx_wire_order o;
	enum phx_wire_side side;
	enum phx_wire_role role;
	const char *b;
	size_t len, split;
	char err[256];
	int rc;

	if (!size)
		return 0;
	side = data[0] & 1 ? PHX_SIDE_CLIENT : PHX_SIDE_DAEMON;
	split = size > 1 ? (data[0] >> 1) % size : 0;
	/* The daemon learns the role from hello; a client is an agent or a driver. */
	role = data[0] & 0x80 ? PHX_ROLE_DRIVER : PHX_ROLE_AGENT;
	data++, size--;
	/* The input whole as one message body. */
	phx_wire_order_init(&o, side, role);
	body((const char *)data, size, side, &o);
	differential((const char *)data, size);
	/* And as a stream of frames arriving in two pieces. */
	phx_wire_reader_init(&r, 1 << 16);
	phx_wire_order_init(&o, side, role);
	if (split > size)
		split = size;
	phx_wire_reader_feed(&r, data, split);
	while ((rc = phx_wire_reader_next(&r, &b, &len, err, sizeof(err))) == 1)
		body(b, len, side, &o);
	if (rc == 0) {
		phx_wire_reader_feed(&r, data + split, size - split);
		while ((rc = phx_wire_reader_next(&r, &b, &len, err, sizeof(err))) == 1)
			body(b, len, side, &o);
	}
	phx_wire_reader_free(&r);
	return 0;
}

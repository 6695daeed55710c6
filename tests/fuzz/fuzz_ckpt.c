/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checkpoint decoders that read outside input: a worker's message on
 * the agent socket, another agent's round state and shard digests, a
 * manifest file. The first byte picks the decoder; any bytes must give an answer, never a
 * crash. A state that parses must format back to the same text.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/proto/ckpt_msg.h"
#include "checkpoint/node/ckpt.h"
#include "checkpoint/proto/ckpt_manifest.h"
#include "placement/layout.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "ckpt";

static void state(const char *text)
{
	struct phx_ckpt_state s, back;
	char buf[1024];

	if (phx_ckpt_state_parse(text, &s) < 0)
		return;
	phx_fuzz_check(phx_ckpt_state_format(&s, buf, sizeof(buf)) < (int)sizeof(buf),
		       "state too long");
	phx_fuzz_check(!strcmp(buf, text), "state does not format back to its text");
	phx_fuzz_check(phx_ckpt_state_parse(buf, &back) == 0 && !memcmp(&s, &back, sizeof(s)),
		       "formatted state parses differently");
	for (int t = 0; t < PHX_TIER_COUNT; t++)
		phx_fuzz_check(phx_ckpt_common_newest(&s, 1, (enum phx_ckpt_tier)t) ==
				       (s.n[t] ? s.steps[t][0] : -1),
			       "newest of one state");
}

/* Field by field: the struct has padding that assignments need not copy. */
static int shards_equal(const struct phx_ckpt_shard *a, const struct phx_ckpt_shard *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].rank != b[i].rank || a[i].bytes != b[i].bytes ||
		    a[i].sharded != b[i].sharded || memcmp(a[i].digest, b[i].digest, 32))
			return 0;
	return 1;
}

static void digests(const char *text, int algo)
{
	struct phx_ckpt_shard s[8], back[8];
	char buf[1024];
	size_t n, m;
	long step, step2;

	if (phx_ckpt_digests_parse(text, algo, &step, s, 8, &n) < 0)
		return;
	phx_fuzz_check(n > 0 && n <= 8, "digest count");
	phx_fuzz_check(phx_ckpt_digests_format(step, s, n, algo, buf, sizeof(buf)) <
			       (int)sizeof(buf),
		       "digests too long");
	phx_fuzz_check(phx_ckpt_digests_parse(buf, algo, &step2, back, 8, &m) == 0 && m == n &&
			       step2 == step && shards_equal(s, back, n),
		       "formatted digests parse differently");
}

/*
 * Where each rank of a job of another layout restores from: a saved rank
 * of the manifest, of the same pipeline stage, or a refusal with a reason.
 */
static void sources(const char *text, unsigned char pick)
{
	static const char *const specs[] = { "dp=*", "pp=2,dp=*", "tp=2,dp=*", "tp=2,pp=2,dp=*" };
	struct phx_manifest m;
	struct phx_layout now;
	unsigned long world;
	char err[512];

	if (phx_manifest_parse(text, strlen(text), &m, err, sizeof(err)) < 0)
		return;
	/* Bits 0-2 picked the rank above; 3-4 the layout, 5-6 the same, a smaller or larger world.
	 */
	world = (pick & 0x20) ? m.world - m.world / 4 : m.world;
	world += (pick & 0x40) ? m.world / 2 : 0;
	if (phx_layout_parse(specs[(pick >> 3) & 3], &now, err, sizeof(err)) == 0 &&
	    phx_layout_resolve(&now, world, err, sizeof(err)) == 0) {
		for (unsigned long r = 0; r < world && r < 64; r++) {
			unsigned long src = ULONG_MAX, c[PHX_DIM_COUNT];

			err[0] = '\0';
			if (phx_ckpt_source_rank(&m, &now, world, r, &src, err, sizeof(err)) < 0) {
				phx_fuzz_check(err[0], "a refused restore without a reason");
				continue;
			}
			phx_fuzz_check(src < m.world, "a source rank outside the manifest");
			phx_layout_coords(&now, r, c);
			phx_fuzz_check(!m.shards[0].state ||
					       m.shards[src].coord[PHX_DIM_PP] == c[PHX_DIM_PP],
				       "another pipeline stage's shard");
		}
	}
	phx_manifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_ckpt_entry e;
	char *text, err[256];

	if (size < 1)
		return 0;
	if (data[0] == 'M') {
		int ok = phx_ckpt_msg_check(data + 1, size - 1, 0);
		int ok_reply = phx_ckpt_msg_check(data + 1, size - 1, 1);

		phx_fuzz_check(ok < 0 || ok_reply < 0, "a message is both request and reply");
		return 0;
	}
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (data[0] == 'S') {
		state(text);
	} else if (data[0] == 'D' || data[0] == 'd') {
		digests(text, data[0] == 'D' ? 0 : 1);
	} else {
		int rc = phx_ckpt_manifest_find(text, data[0] % 8, &e, err, sizeof(err));

		phx_fuzz_check(rc != -1 || err[0], "a refused manifest without a reason");
		phx_fuzz_check(rc != 0 || e.rank == (unsigned long)(data[0] % 8),
			       "wrong rank found");
		if (rc == 0)
			sources(text, data[0]);
	}
	free(text);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checkpoint decoders that read outside input: a worker's message on
 * the agent socket, another agent's round state and shard digests, a
 * manifest file. The first byte picks the decoder; any bytes must give an answer, never a
 * crash. A state that parses must format back to the same text.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/proto/ckpt_msg.h"
#include "checkpoint/node/ckpt.h"
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
			       step2 == step && !memcmp(s, back, n * sizeof(*s)),
		       "formatted digests parse differently");
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
	}
	free(text);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A job's driver sends phalanx-ckptd its roles' goodput ledgers as event
 * reasons: outside input, any user's. Any bytes must parse or be refused
 * with a reason; a record that parses holds bounded values and formats to
 * a record of at most a wire reason that parses back the same.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/proto/ckpt_wire.h"
#include "checkpoint/proto/role_ledger.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "role_ledger";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_role_ledger l, back;
	char *s = malloc(size + 1), buf[PHX_WIRE_REASON_MAX + 1], err[256] = "";
	int n;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (phx_rl_parse(s, &l, err, sizeof(err)) < 0) {
		phx_fuzz_check(err[0] != '\0', "refused without a reason");
		free(s);
		return 0;
	}
	phx_fuzz_check(strlen(s) <= PHX_WIRE_REASON_MAX, "record longer than a reason");
	phx_fuzz_check(l.name[0] && strlen(l.name) <= PHX_RL_NAME_MAX, "name length");
	for (int i = 0; i < PHX_RL_PARTS; i++)
		phx_fuzz_check(l.part_ms[i] <= PHX_RL_VALUE_MAX, "value bound");
	n = phx_rl_format(&l, buf, sizeof(buf));
	phx_fuzz_check(n > 0 && (size_t)n == strlen(buf), "formatted record does not fit a reason");
	phx_fuzz_check(phx_rl_parse(buf, &back, err, sizeof(err)) == 0, "formatted record refused");
	phx_fuzz_check(!memcmp(&l, &back, sizeof(l)), "record round trip");
	free(s);
	return 0;
}

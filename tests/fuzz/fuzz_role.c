/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --role specs come from users, round reports and step rates from other
 * agents: any bytes must give a role (or report) or an error, never a
 * crash. A role that parses must hold what the rules allow; a report that
 * parses must format back to the same text.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/restart.h"
#include "launcher/role.h"
#include "launcher/straggler.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "role";

static void check(int ok, const char *what, const char *s)
{
	if (ok)
		return;
	fprintf(stderr, "phalanx: fuzz: %s for '%s'\n", what, s);
	abort();
}

static void role(const char *s)
{
	struct phx_role r[2];
	char err[512];

	if (phx_role_parse(s, &r[0], err, sizeof(err)) < 0) {
		check(err[0] != '\0', "error without a message", s);
		return;
	}
	check(r[0].name[0] && strlen(r[0].name) < sizeof(r[0].name), "name", s);
	check(!r[0].cmd || r[0].cmd[0], "empty command", s);
	check(r[0].nodes <= (1u << 20) && r[0].nproc <= 4096, "bounds", s);
	check(r[0].restart == PHX_RESTART_GROUP || r[0].restart == PHX_RESTART_SELF, "policy", s);
	/* The role, and a second one that takes the rest, on a step of 1..64 nodes. */
	memset(&r[1], 0, sizeof(r[1]));
	snprintf(r[1].name, sizeof(r[1].name), "rest");
	for (unsigned n = 1; n <= 64; n += 7) {
		if (phx_roles_assign(r, 2, n, err, sizeof(err)) == 0) {
			check(r[0].nodes + r[1].nodes == n, "nodes do not add up", s);
			check(phx_role_of_agent(r, 2, n - 1) == 1 || !r[1].nodes, "last agent", s);
		}
		r[1].nodes = 0;
	}
	phx_role_free(&r[0]);
}

static void report(const char *s)
{
	struct phx_report r, again;
	struct phx_rate rates[16];
	char back[512];
	size_t n = 0;

	if (phx_report_parse(s, 4, &r) < 0)
		return;
	check(r.role < 4 && r.fail_rank >= -1, "report bounds", s);
	/* What parses formats to a report that parses back the same. */
	phx_report_format(&r, NULL, back, sizeof(back));
	check(phx_report_parse(back, 4, &again) == 0, "formatted report refused", s);
	check(again.role == r.role && again.epoch == r.epoch && again.state == r.state &&
		      again.fail_ns == r.fail_ns && again.fail_rank == r.fail_rank &&
		      again.kind == r.kind && again.code == r.code && again.waiting == r.waiting,
	      "report round trip", s);
	if (!r.rates_at)
		return;
	if (phx_rates_parse(s + r.rates_at, r.role, 0, 1000, rates, 16, &n) == 0) {
		bool slow[16];
		uint64_t median[16];
		unsigned peers[16];

		for (size_t i = 0; i < n; i++)
			check(rates[i].rank < 1000 && rates[i].steps, "rate bounds", s);
		phx_straggler_detect(rates, n, 100, median, peers, slow);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	role(s);
	report(s);
	free(s);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver reads every line of srun's stderr: the agents' result line
 * and srun's own reports come from other processes and other nodes. Any
 * bytes must parse or be refused, and a parsed result must format to a
 * line that parses back the same.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/result.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "result";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_result r, back;
	char line[4096], node[64];
	enum phx_beat beat;
	struct phx_progress prog;
	int n;

	if (phx_result_parse((const char *)data, size, &r) == 0) {
		n = phx_result_format(&r, line, sizeof(line));
		phx_fuzz_check(n > 0 && (size_t)n < sizeof(line), "formatted line too long");
		phx_fuzz_check(phx_result_parse(line, (size_t)n, &back) == 0,
			       "formatted line refused");
		phx_fuzz_check(back.rank == r.rank && back.kind == r.kind && back.code == r.code &&
				       back.step == r.step && back.restarts == r.restarts,
			       "numbers round trip");
		phx_fuzz_check(!strcmp(back.node, r.node) && !strcmp(back.msg, r.msg),
			       "text round trip");
	}
	n = phx_srun_line_parse((const char *)data, size, node, sizeof(node));
	phx_fuzz_check(n >= 0 && n <= 3, "srun line kind");
	/* A node failure and a killed agent name the node; a failed launch blames none. */
	if (n == 1 || n == 2)
		phx_fuzz_check(strlen(node) < sizeof(node) && node[0], "srun line node");
	/* An agent's lost line names one host, which a line of the agent's round-trips. */
	if (phx_lost_parse((const char *)data, size, node, sizeof(node)) == 0) {
		char again[64];

		phx_fuzz_check(node[0] && !strchr(node, ':') && !strchr(node, ' '), "lost node");
		n = phx_lost_format(node, 600, "by", line, sizeof(line));
		phx_fuzz_check(n > 0 && (size_t)n < sizeof(line), "lost line too long");
		phx_fuzz_check(phx_lost_parse(line, (size_t)n, again, sizeof(again)) == 0 &&
				       !strcmp(again, node),
			       "lost line round trip");
	}
	/* A datagram counts only with the key, and names a node a line would. */
	if (phx_lost_report_parse((const char *)data, size, "0123456789abcdef0123456789abcdef",
				  node, sizeof(node)) == 0)
		phx_fuzz_check(size > PHX_LOST_KEY_HEX + 1 &&
				       !memcmp(data, "0123456789abcdef0123456789abcdef ",
					       PHX_LOST_KEY_HEX + 1) &&
				       node[0],
			       "lost report without the key");
	/* A beat counts only with the key, and names a node and a state it knows. */
	if (phx_alive_report_parse((const char *)data, size, "0123456789abcdef0123456789abcdef",
				   node, sizeof(node), &beat) == 0)
		phx_fuzz_check(size > PHX_LOST_KEY_HEX + 1 &&
				       !memcmp(data, "0123456789abcdef0123456789abcdef ",
					       PHX_LOST_KEY_HEX + 1) &&
				       node[0] && beat <= PHX_BEAT_END,
			       "alive report without the key");
	/* Progress counts only with the key, and a report of it reads back the same. */
	if (phx_progress_report_parse((const char *)data, size, "0123456789abcdef0123456789abcdef",
				      node, sizeof(node), &prog) == 0) {
		char again[64], d[PHX_LOST_REPORT_MAX + 1];
		struct phx_progress reread;

		phx_fuzz_check(size > PHX_LOST_KEY_HEX + 1 &&
				       !memcmp(data, "0123456789abcdef0123456789abcdef ",
					       PHX_LOST_KEY_HEX + 1) &&
				       node[0],
			       "progress report without the key");
		n = snprintf(d, sizeof(d), "0123456789abcdef0123456789abcdef ");
		n += phx_progress_format(node, &prog, d + n, sizeof(d) - (size_t)n);
		phx_fuzz_check((size_t)n < sizeof(d) &&
				       phx_progress_report_parse(
					       d, (size_t)n, "0123456789abcdef0123456789abcdef",
					       again, sizeof(again), &reread) == 0 &&
				       !strcmp(again, node) && reread.stepped == prog.stepped &&
				       reread.step == prog.step && reread.wait_ms == prog.wait_ms &&
				       reread.resumed == prog.resumed &&
				       reread.resumed_step == prog.resumed_step,
			       "progress report round trip");
	}
	return 0;
}

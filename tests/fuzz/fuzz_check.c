/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Preflight results are read from files recorded anywhere and from what a
 * check step printed. Whatever parses is judged and paired, and the pairs
 * must be symmetric; what is written back must parse again to the same
 * verdicts.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "health/preflight.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "check";

static void check_pairs(const struct phx_check_results *res, const struct phx_check_limits *lim)
{
	long *p = calloc(res->n + 1, sizeof(*p));

	if (!p)
		abort();
	for (int round = 1; round <= PHX_CHECK_ROUNDS; round++) {
		if (phx_check_pairs(res, round, lim, p) < 0)
			abort();
		for (size_t i = 0; i < res->n; i++) {
			if (p[i] >= (long)res->n || p[i] == (long)i ||
			    (p[i] >= 0 && p[p[i]] != (long)i))
				abort();
		}
	}
	free(p);
}

static void round_trip(const struct phx_check_results *res, const struct phx_check_limits *lim,
		       const struct phx_check_verdict *v)
{
	struct json_object *doc = phx_check_results_to_json(res, v);
	struct phx_check_results back;
	struct phx_check_verdict *w;
	const char *text;
	char err[256];

	if (!doc)
		abort();
	text = json_object_to_json_string(doc);
	if (phx_check_results_parse(text, strlen(text), &back, err, sizeof(err)) < 0 ||
	    back.n != res->n)
		abort();
	w = calloc(back.n + 1, sizeof(*w));
	if (!w)
		abort();
	phx_check_judge(&back, lim, w);
	/* Two decimals are written: a value at a threshold may land either side. */
	for (size_t i = 0; i < back.n; i++) {
		if (strcmp(w[i].node, v[i].node) ||
		    (v[i].state == PHX_CHECK_FAILED) != (w[i].state == PHX_CHECK_FAILED))
			abort();
	}
	free(w);
	phx_check_results_free(&back);
	json_object_put(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_check_limits lim = { .slow_fraction = 0.2, .drain_slow = true };
	struct phx_check_results res;
	struct phx_check_verdict *v;
	struct phx_check_decision d;
	char err[256];

	if (phx_check_results_parse((const char *)data, size, &res, err, sizeof(err)) < 0) {
		if (res.n || res.nodes || !err[0])
			abort();
		return 0;
	}
	lim.busbw_gbps_min = size % 3 ? 0 : 100;
	check_pairs(&res, &lim);
	v = calloc(res.n + 1, sizeof(*v));
	if (!v)
		abort();
	phx_check_judge(&res, &lim, v);
	if (phx_check_decide(v, res.n, &d) < 0 || d.n_exclude + d.n_slow > res.n)
		abort();
	phx_check_decision_free(&d);
	round_trip(&res, &lim, v);
	free(v);
	phx_check_results_free(&res);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Manifests are read back from storage and from the daemon's catalog: any
 * bytes must give a manifest or an error, and a manifest that parses must
 * format to text that parses back to the same text.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/proto/ckpt_manifest.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "manifest";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_manifest m, back;
	char err[512], *text, *again;

	if (phx_manifest_parse((const char *)data, size, &m, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		return 0;
	}
	text = phx_manifest_to_json(&m, err, sizeof(err));
	if (!text || phx_manifest_parse(text, strlen(text), &back, err, sizeof(err)) < 0) {
		fprintf(stderr, "phalanx: fuzz: parsed manifest does not round trip: %s\n", err);
		abort();
	}
	again = phx_manifest_to_json(&back, err, sizeof(err));
	if (!again || strcmp(text, again))
		abort();
	free(again);
	free(text);
	phx_manifest_free(&back);
	phx_manifest_free(&m);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef PHX_FUZZ_H
#define PHX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The libFuzzer entry point every target defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Name of the seed folder under the corpus root, e.g. "conf". */
extern const char phx_fuzz_corpus_name[];

/* A property that must hold for every input: a finding when it does not. */
static inline void phx_fuzz_check(int ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "phalanx: fuzz: %s\n", what);
	abort();
}

#endif

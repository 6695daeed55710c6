/* SPDX-License-Identifier: Apache-2.0 */
#ifndef PHX_FUZZ_H
#define PHX_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* The libFuzzer entry point every target defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Name of the seed folder under the corpus root, e.g. "conf". */
extern const char phx_fuzz_corpus_name[];

#endif

#include "tests/fuzz/fuzz.h"
const char phx_fuzz_corpus_name[] = "conf";
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { (void)data; (void)size; return 0; }

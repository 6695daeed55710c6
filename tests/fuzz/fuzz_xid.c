/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agents read their node's kernel log for Xid errors: any line, a record
 * or plain text, of any length, gives an Xid or nothing, never a crash;
 * a parsed Xid has a bounded, terminated PCI address and text.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "health/xid.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "xid";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_xid x;

	if (phx_xid_parse((const char *)data, size, &x) == 1) {
		if (!x.pci[0] || strnlen(x.pci, sizeof(x.pci)) == sizeof(x.pci) ||
		    strnlen(x.text, sizeof(x.text)) == sizeof(x.text))
			abort();
		(void)phx_xid_fatal(x.code);
	}
	return 0;
}

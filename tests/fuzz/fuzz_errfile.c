/* SPDX-License-Identifier: Apache-2.0 */
/*
 * torch's error files are written by the user's own process and read back
 * by the launcher's agents and by slurmstepd (as the job's user): any
 * bytes must give a bounded, NUL-terminated message and traceback, or be
 * refused.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errfile.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "errfile";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), msg[1024], trace[8192];
	int rc;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(msg, 'x', sizeof(msg));
	memset(trace, 'x', sizeof(trace));
	rc = phx_errfile_parse(text, msg, sizeof(msg), trace, sizeof(trace));
	phx_fuzz_check(memchr(msg, '\0', sizeof(msg)) != NULL, "message not terminated");
	phx_fuzz_check(memchr(trace, '\0', sizeof(trace)) != NULL, "traceback not terminated");
	phx_fuzz_check(rc == 0 ? msg[0] != '\0' : rc == -1, "a parse says something or fails");
	(void)phx_errfile_peer_lost(msg);
	free(text);
	return 0;
}

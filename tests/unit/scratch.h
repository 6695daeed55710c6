/* SPDX-License-Identifier: Apache-2.0 */
/* Scratch directories for unit tests that touch the file system. */
#ifndef PHX_TEST_SCRATCH_H
#define PHX_TEST_SCRATCH_H

#include <stddef.h>

/* Makes $TMPDIR/phx-NAME.XXXXXX (mode 0755) into dir; 0 or -1. */
int phx_scratch_make(char *dir, size_t len, const char *name);
/* Removes dir and everything below it, without following symlinks; 0 or -1. */
int phx_scratch_remove(const char *dir);

#endif

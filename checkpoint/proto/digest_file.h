/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checks a shard file against the size and digest its manifest records,
 * with the same chunked digest (checkpoint/proto/digest.h) the agents compute when
 * they write it, so a shard is judged by one definition everywhere.
 */
#ifndef PHX_DIGEST_FILE_H
#define PHX_DIGEST_FILE_H

#include <stddef.h>
#include <stdint.h>

enum phx_digest_file_result {
	PHX_DIGEST_FILE_OK = 1, /* size and digest match */
	PHX_DIGEST_FILE_BAD = 0, /* wrong size or digest: corrupt */
	PHX_DIGEST_FILE_UNREADABLE = -1, /* cannot be opened or read here */
	PHX_DIGEST_FILE_UNKNOWN = -2, /* the algorithm is not one checkpoint/proto/digest.h knows */
};

/*
 * Reads path (absolute) and compares it with bytes and the digest alg/hex,
 * hashing with up to nthreads threads (0: one per CPU). A phx_digest_file_result;
 * err says why for every result but OK.
 */
int phx_digest_file_check(const char *path, uint64_t bytes, const char *alg, const char *hex,
			  unsigned nthreads, char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Job tokens: HMAC-SHA256(cluster key, "phalanx-job-token:v1:JOBID:UID").
 * Only root can read the key, so only the plugin (root in slurmstepd) can
 * mint a job's token; the daemon checks it with the same key.
 */
#ifndef PHX_TOKEN_H
#define PHX_TOKEN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PHX_KEY_BYTES 32
#define PHX_TOKEN_HEX_LEN 64 /* hex characters, without the NUL */

struct phx_key {
	unsigned char bytes[PHX_KEY_BYTES];
};

/* New random key from the OpenSSL DRBG; 0 or -1. */
int phx_key_generate(struct phx_key *key);
/* Hex text of the key, with a newline, as stored in the key file. */
void phx_key_format(const struct phx_key *key, char out[2 * PHX_KEY_BYTES + 2]);
/*
 * Loads a key file. It must be a regular file, owned by root (or by
 * owner_uid when not 0), not readable or writable by group or others, and
 * hold exactly 64 hex characters (a trailing newline is allowed).
 */
int phx_key_load(const char *path, uid_t owner_uid, struct phx_key *key, char *err, size_t errlen);
/* Writes a key file atomically with mode 0400; refuses to replace one unless force. */
int phx_key_save(const char *path, const struct phx_key *key, int force, char *err, size_t errlen);

/* out receives PHX_TOKEN_HEX_LEN hex characters and a NUL. */
int phx_token_mint(const struct phx_key *key, uint32_t job_id, uint32_t uid,
		   char out[PHX_TOKEN_HEX_LEN + 1]);
/* Constant-time comparison of a presented token with the expected one; 1 if valid. */
int phx_token_verify(const struct phx_key *key, uint32_t job_id, uint32_t uid, const char *token);

#endif

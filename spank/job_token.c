/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "common/log.h"
#include "common/token.h"
#include "spank/job_token.h"

int phx_job_token_set(spank_t sp, const struct phx_conf *conf)
{
	char token[PHX_TOKEN_HEX_LEN + 1], err[512];
	uint32_t job_id, uid;
	struct phx_key key;
	struct stat st;
	int rc = 0;

	/* Whatever the user's environment brought along is never a token. */
	spank_unsetenv(sp, "PHALANX_JOB_TOKEN");
	if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
		return 0;
	if (lstat(conf->key_file, &st) < 0 && errno == ENOENT) {
		phx_debug(
			"no cluster key at %s, jobs get no token; create it with 'phalanx keygen'",
			conf->key_file);
		return 0;
	}
	/* Only a root-owned, root-only key: a user must not be able to plant one. */
	if (phx_key_load(conf->key_file, 0, &key, err, sizeof(err)) < 0) {
		phx_error("%s; job %u runs without a token", err, job_id);
		return 0;
	}
	if (phx_token_mint(&key, job_id, uid, token) < 0 ||
	    spank_setenv(sp, "PHALANX_JOB_TOKEN", token, 1) != ESPANK_SUCCESS) {
		phx_error("cannot set the job token of job %u", job_id);
		rc = -1;
	}
	OPENSSL_cleanse(&key, sizeof(key));
	OPENSSL_cleanse(token, sizeof(token));
	return rc;
}

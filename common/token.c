/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/file.h"
#include "common/hex.h"
#include "common/token.h"

int phx_key_generate(struct phx_key *key)
{
	return RAND_priv_bytes(key->bytes, sizeof(key->bytes)) == 1 ? 0 : -1;
}

void phx_key_format(const struct phx_key *key, char out[2 * PHX_KEY_BYTES + 2])
{
	phx_hex_encode(key->bytes, sizeof(key->bytes), out);
	out[2 * PHX_KEY_BYTES] = '\n';
	out[2 * PHX_KEY_BYTES + 1] = '\0';
}

static int check_key_file(int fd, const char *path, uid_t owner_uid, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot stat key file %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "key file %s is not a regular file", path);
		return -1;
	}
	if (st.st_uid != owner_uid) {
		snprintf(err, errlen,
			 "key file %s is owned by uid %u, not %u; run 'phalanx keygen' as root",
			 path, (unsigned)st.st_uid, (unsigned)owner_uid);
		return -1;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(err, errlen,
			 "key file %s is accessible by group or others (mode %04o); "
			 "run 'chmod 0400 %s'",
			 path, (unsigned)(st.st_mode & 07777), path);
		return -1;
	}
	return 0;
}

int phx_key_load(const char *path, uid_t owner_uid, struct phx_key *key, char *err, size_t errlen)
{
	char buf[2 * PHX_KEY_BYTES + 3];
	ssize_t n;
	int fd, rc = -1;

	/* O_NOFOLLOW: a symlink planted in place of the key is refused. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		snprintf(err, errlen,
			 "cannot open key file %s: %s; create it with 'phalanx keygen'", path,
			 strerror(errno));
		return -1;
	}
	if (check_key_file(fd, path, owner_uid, err, errlen) < 0)
		goto out;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n != 2 * PHX_KEY_BYTES) {
		snprintf(err, errlen,
			 "key file %s must hold %d hex characters; recreate it with "
			 "'phalanx keygen --force'",
			 path, 2 * PHX_KEY_BYTES);
		goto out;
	}
	for (int i = 0; i < PHX_KEY_BYTES; i++) {
		int hi = phx_hex_digit(buf[2 * i]), lo = phx_hex_digit(buf[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			snprintf(err, errlen, "key file %s holds a non-hex character at offset %d",
				 path, hi < 0 ? 2 * i : 2 * i + 1);
			goto out;
		}
		key->bytes[i] = (unsigned char)(hi << 4 | lo);
	}
	rc = 0;
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return rc;
}

int phx_key_save(const char *path, const struct phx_key *key, int force, char *err, size_t errlen)
{
	char text[2 * PHX_KEY_BYTES + 2];
	int rc;

	if (!force && access(path, F_OK) == 0) {
		snprintf(err, errlen,
			 "%s exists; every running job's token depends on it. "
			 "Use --force to replace it",
			 path);
		return -1;
	}
	phx_key_format(key, text);
	rc = phx_file_write_atomic(path, text, strlen(text), 0400);
	OPENSSL_cleanse(text, sizeof(text));
	if (rc < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
		return -1;
	}
	return 0;
}

int phx_token_mint(const struct phx_key *key, uint32_t job_id, uint32_t uid,
		   char out[PHX_TOKEN_HEX_LEN + 1])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	char msg[64];
	int len;

	len = snprintf(msg, sizeof(msg), "phalanx-job-token:v1:%u:%u", job_id, uid);
	if (!HMAC(EVP_sha256(), key->bytes, sizeof(key->bytes), (unsigned char *)msg, (size_t)len,
		  mac, &mac_len) ||
	    mac_len * 2 != PHX_TOKEN_HEX_LEN)
		return -1;
	phx_hex_encode(mac, mac_len, out);
	OPENSSL_cleanse(mac, sizeof(mac));
	return 0;
}

int phx_token_verify(const struct phx_key *key, uint32_t job_id, uint32_t uid, const char *token)
{
	char expected[PHX_TOKEN_HEX_LEN + 1];
	int ok;

	if (!token || strlen(token) != PHX_TOKEN_HEX_LEN)
		return 0;
	if (phx_token_mint(key, job_id, uid, expected) < 0)
		return 0;
	ok = CRYPTO_memcmp(expected, token, PHX_TOKEN_HEX_LEN) == 0;
	OPENSSL_cleanse(expected, sizeof(expected));
	return ok;
}

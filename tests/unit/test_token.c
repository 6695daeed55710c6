/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/file.h"
#include "common/token.h"
#include "tests/unit/scratch.h"

static char dir[256];

static int setup(void **state)
{
	return phx_scratch_make(dir, sizeof(dir), "test-token");
}

static int teardown(void **state)
{
	return phx_scratch_remove(dir);
}

static void fixed_key(struct phx_key *key)
{
	for (int i = 0; i < PHX_KEY_BYTES; i++)
		key->bytes[i] = (unsigned char)i;
}

static void test_known_answer(void **state)
{
	struct phx_key key;
	char token[PHX_TOKEN_HEX_LEN + 1];

	fixed_key(&key);
	/* HMAC-SHA256(00..1f, "phalanx-job-token:v1:4242:1000"), computed independently. */
	assert_int_equal(phx_token_mint(&key, 4242, 1000, token), 0);
	assert_string_equal(token,
			    "3c7a73714ae61cafa5012acf39c4e39748d51dd02e10f4ee7ba80aa19c3edee0");
	assert_true(phx_token_verify(&key, 4242, 1000, token));
}

static void test_token_binds_job_and_uid(void **state)
{
	struct phx_key key, other;
	char token[PHX_TOKEN_HEX_LEN + 1];

	fixed_key(&key);
	assert_int_equal(phx_key_generate(&other), 0);
	assert_int_equal(phx_token_mint(&key, 7, 1000, token), 0);
	assert_false(phx_token_verify(&key, 8, 1000, token));
	assert_false(phx_token_verify(&key, 7, 1001, token));
	assert_false(phx_token_verify(&other, 7, 1000, token));
	assert_false(phx_token_verify(&key, 7, 1000, NULL));
	assert_false(phx_token_verify(&key, 7, 1000, ""));
	token[10] ^= 1;
	assert_false(phx_token_verify(&key, 7, 1000, token));
}

static void test_key_file_roundtrip(void **state)
{
	struct phx_key key, loaded;
	char path[512], err[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/key", dir);
	assert_int_equal(phx_key_generate(&key), 0);
	assert_int_equal(phx_key_save(path, &key, 0, err, sizeof(err)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0400);
	assert_int_equal(phx_key_load(path, getuid(), &loaded, err, sizeof(err)), 0);
	assert_memory_equal(key.bytes, loaded.bytes, PHX_KEY_BYTES);
	/* Never replaced by accident: every job's token depends on it. */
	assert_int_equal(phx_key_save(path, &key, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--force"));
	assert_int_equal(phx_key_save(path, &key, 1, err, sizeof(err)), 0);
}

static void expect_load_error(const char *content, mode_t mode, const char *needle)
{
	struct phx_key key;
	char path[512], err[256] = "";

	snprintf(path, sizeof(path), "%s/bad", dir);
	unlink(path);
	assert_int_equal(phx_file_write_atomic(path, content, strlen(content), mode), 0);
	assert_int_equal(phx_key_load(path, getuid(), &key, err, sizeof(err)), -1);
	assert_non_null(strstr(err, needle));
}

static void test_key_file_refused(void **state)
{
	struct phx_key key;
	char path[512], link_path[512], err[256] = "";
	char good[2 * PHX_KEY_BYTES + 2];

	fixed_key(&key);
	phx_key_format(&key, good);
	expect_load_error(good, 0440, "accessible by group or others");
	expect_load_error(good, 0404, "accessible by group or others");
	expect_load_error("abcd\n", 0400, "must hold 64 hex characters");
	good[5] = 'z';
	expect_load_error(good, 0400, "non-hex character at offset 5");
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(phx_key_load(path, getuid(), &key, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "phalanx keygen"));
	/* A symlink in place of the key file is not followed. */
	snprintf(path, sizeof(path), "%s/bad", dir);
	snprintf(link_path, sizeof(link_path), "%s/link", dir);
	assert_int_equal(symlink(path, link_path), 0);
	assert_int_equal(phx_key_load(link_path, getuid(), &key, err, sizeof(err)), -1);
	/* Wrong owner. */
	assert_int_equal(phx_key_load(path, getuid() + 1, &key, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "owned by uid"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answer),
		cmocka_unit_test(test_token_binds_job_and_uid),
		cmocka_unit_test_setup_teardown(test_key_file_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_file_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

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
#include "common/hex.h"
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

static void test_hex_roundtrip(void **state)
{
	unsigned char all[256], back[256];
	char text[2 * sizeof(all) + 1];

	for (size_t i = 0; i < sizeof(all); i++)
		all[i] = (unsigned char)i;
	phx_hex_encode(all, sizeof(all), text);
	assert_int_equal(strlen(text), 2 * sizeof(all));
	assert_memory_equal(text, "00010203", 8);
	assert_string_equal(text + 2 * 0xf8, "f8f9fafbfcfdfeff");
	assert_int_equal(strspn(text, PHX_HEX_LOWER), 2 * sizeof(all));
	assert_int_equal(phx_hex_decode(text, strlen(text), back, sizeof(back)), 0);
	assert_memory_equal(all, back, sizeof(all));
	phx_hex_encode(all, 0, text);
	assert_string_equal(text, "");
	assert_int_equal(phx_hex_decode("", 0, back, 0), 0);
}

static void test_hex_refused(void **state)
{
	unsigned char out[4];

	/* Odd length, and a length that is not the bytes asked for. */
	assert_int_equal(phx_hex_decode("abc", 3, out, 1), -1);
	assert_int_equal(phx_hex_decode("abc", 3, out, 2), -1);
	assert_int_equal(phx_hex_decode("abcd", 4, out, 1), -1);
	assert_int_equal(phx_hex_decode("abcd", 4, out, 3), -1);
	/* A non-digit in either half of a byte, and what sscanf would have let in. */
	assert_int_equal(phx_hex_decode("0g", 2, out, 1), -1);
	assert_int_equal(phx_hex_decode("g0", 2, out, 1), -1);
	assert_int_equal(phx_hex_decode(" f", 2, out, 1), -1);
	assert_int_equal(phx_hex_decode("+f", 2, out, 1), -1);
	assert_int_equal(phx_hex_decode("0x", 2, out, 1), -1);
	assert_int_equal(phx_hex_decode("ab\0d", 4, out, 2), -1);
	assert_int_equal(phx_hex_digit('g'), -1);
	assert_int_equal(phx_hex_digit('G'), -1);
	assert_int_equal(phx_hex_digit('/'), -1);
	assert_int_equal(phx_hex_digit(':'), -1);
	assert_int_equal(phx_hex_digit('@'), -1);
	assert_int_equal(phx_hex_digit('`'), -1);
	assert_int_equal(phx_hex_digit('\0'), -1);
	assert_int_equal(phx_hex_digit((char)0xe1), -1);
}

static void test_hex_case(void **state)
{
	unsigned char lower[4], upper[4];
	const unsigned char want[4] = { 0xde, 0xad, 0xbe, 0xef };

	/* Decoding takes either case; encoding writes lower case only. */
	assert_int_equal(phx_hex_decode("deadbeef", 8, lower, sizeof(lower)), 0);
	assert_int_equal(phx_hex_decode("DEADBEEF", 8, upper, sizeof(upper)), 0);
	assert_memory_equal(lower, want, sizeof(want));
	assert_memory_equal(upper, want, sizeof(want));
	assert_int_equal(phx_hex_decode("DeAdBeEf", 8, upper, sizeof(upper)), 0);
	assert_memory_equal(upper, want, sizeof(want));
	for (int v = 0; v < 16; v++) {
		assert_int_equal(phx_hex_digit(PHX_HEX_LOWER[v]), v);
		assert_int_equal(phx_hex_digit("0123456789ABCDEF"[v]), v);
	}
}

/* The key file has always been read in either case, though written in lower case. */
static void test_key_file_upper_case(void **state)
{
	struct phx_key key, loaded;
	char path[512], text[2 * PHX_KEY_BYTES + 2], err[256];

	fixed_key(&key);
	phx_key_format(&key, text);
	for (char *p = text; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	snprintf(path, sizeof(path), "%s/upper", dir);
	assert_int_equal(phx_file_write_atomic(path, text, strlen(text), 0400), 0);
	assert_int_equal(phx_key_load(path, getuid(), &loaded, err, sizeof(err)), 0);
	assert_memory_equal(key.bytes, loaded.bytes, PHX_KEY_BYTES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answer),
		cmocka_unit_test(test_token_binds_job_and_uid),
		cmocka_unit_test_setup_teardown(test_key_file_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_file_refused, setup, teardown),
		cmocka_unit_test(test_hex_roundtrip),
		cmocka_unit_test(test_hex_refused),
		cmocka_unit_test(test_hex_case),
		cmocka_unit_test_setup_teardown(test_key_file_upper_case, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rendezvous service reads requests from anyone who connects to the
 * driver's port, and an agent reads the answer's header before checking
 * it. Any bytes must parse or be refused; a parsed line must format back
 * to the same line (its fields are canonical), and nothing verifies under
 * a key it was not made with.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/xrdv.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "xrdv";

static const unsigned char key[PHX_XRDV_KEY_BYTES] = "fuzz-key-fuzz-key-fuzz-key-fuzz";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *d = (const char *)data;
	char line[PHX_XRDV_REQ_MAX + 1], addr[16];
	unsigned char k[PHX_XRDV_KEY_BYTES];
	struct phx_xrdv_req r;
	struct phx_xrdv_resp h;
	unsigned port;
	int n;

	if (phx_xrdv_req_parse(d, size, &r) == 0) {
		phx_fuzz_check(size <= PHX_XRDV_REQ_MAX && d[size - 1] == '\n', "request bounds");
		phx_fuzz_check(strlen(r.nonce) == PHX_XRDV_NONCE_HEX &&
				       strlen(r.mac) == PHX_XRDV_MAC_HEX,
			       "request fields");
		/* The same fields with this key's MAC: a line of the same length that verifies. */
		n = phx_xrdv_req_format(key, r.nonce, r.after, line, sizeof(line));
		phx_fuzz_check(n > 0 && (size_t)n == size, "request round trip length");
		phx_fuzz_check(!memcmp(line, d, size - PHX_XRDV_MAC_HEX - 1), "request round trip");
		phx_fuzz_check(phx_xrdv_req_parse(line, (size_t)n, &r) == 0 &&
				       phx_xrdv_req_verify(key, &r),
			       "formatted request refused");
	}
	if (phx_xrdv_resp_parse(d, size, &h) == 0) {
		const char *nonce = "0123456789abcdef0123456789abcdef";
		char hdr[PHX_XRDV_HDR_MAX + 1];
		char *body;

		phx_fuzz_check(size <= PHX_XRDV_HDR_MAX && h.body_len <= PHX_XRDV_BODY_MAX,
			       "answer bounds");
		body = calloc(1, h.body_len + 1);
		phx_fuzz_check(body != NULL, "out of memory");
		n = phx_xrdv_resp_format(key, nonce, h.epoch, body, h.body_len, hdr, sizeof(hdr));
		phx_fuzz_check(n > 0 && (size_t)n == size &&
				       !memcmp(hdr, d, size - PHX_XRDV_MAC_HEX - 1),
			       "answer round trip");
		phx_fuzz_check(phx_xrdv_resp_parse(hdr, (size_t)n, &h) == 0 &&
				       phx_xrdv_resp_verify(key, nonce, &h, body, h.body_len),
			       "formatted answer refused");
		free(body);
	}
	/* The environment value: NUL-terminated, from the agent's environment. */
	if (size < 128) {
		char v[128];

		memcpy(v, d, size);
		v[size] = '\0';
		if (phx_xrdv_env_parse(v, addr, sizeof(addr), &port, k) == 0)
			phx_fuzz_check(port > 0 && port < 65536 && addr[0], "environment fields");
	}
	return 0;
}

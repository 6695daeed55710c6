/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A partner copy's header arrives on a TCP port anyone on the network can
 * reach: any bytes must give a checked header or a refusal with a reason.
 * The seeds are signed with the fixed secret below, so mutations get past
 * the MAC only where they keep it intact; the first input byte, when odd,
 * re-signs the rest so the checks behind the MAC are fuzzed as well.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/hmac.h>

#include "checkpoint/node/partner.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "partner";

static const uint8_t secret[PHX_PARTNER_SECRET_BYTES] = "phalanx-fuzz-partner-secret-0001";

/* Signs bytes 0..96 as a sender with the job's secret would. */
static void resign(uint8_t *b)
{
	unsigned len = 0;

	HMAC(EVP_sha256(), secret, sizeof(secret), b, PHX_PARTNER_HDR_BYTES - PHX_PARTNER_MAC_BYTES,
	     b + PHX_PARTNER_HDR_BYTES - PHX_PARTNER_MAC_BYTES, &len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct phx_partner_limits lim = { .job_id = 7, .nranks = 64, .max_bytes = 1 << 30 };
	struct phx_partner_hdr h;
	uint8_t b[PHX_PARTNER_HDR_BYTES], again[PHX_PARTNER_HDR_BYTES];
	char err[256];

	if (!size)
		return 0;
	if (data[0] & 1 && size - 1 == sizeof(b)) {
		memcpy(b, data + 1, sizeof(b));
		resign(b);
		data = b;
		size = sizeof(b);
	} else {
		data++, size--;
	}
	if (phx_partner_hdr_decode(data, size, secret, &lim, &h, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		return 0;
	}
	/* What is accepted encodes back to the same bytes. */
	if (phx_partner_hdr_encode(&h, secret, again) < 0 || memcmp(again, data, sizeof(again)))
		abort();
	return 0;
}

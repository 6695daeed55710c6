/* SPDX-License-Identifier: Apache-2.0 */
/* The cross-role rendezvous protocol: see xrdv.h. */
#include "config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "common/hex.h"
#include "launcher/xrdv.h"

#define REQ_LABEL "phalanx-xrdv:req:v1:"
#define RESP_LABEL "phalanx-xrdv:resp:v1:"
/* Digits of the largest unsigned long. */
#define ULONG_DIGITS 20

/*
 * HMAC-SHA256 of head and then tail, as lower-case hex. Streamed, so that
 * a body of up to PHX_XRDV_BODY_MAX needs no copy next to its label.
 */
static int mac_hex(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *head, size_t head_len,
		   const void *tail, size_t tail_len, char out[PHX_XRDV_MAC_HEX + 1])
{
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	unsigned char md[EVP_MAX_MD_SIZE];
	size_t md_len = 0;
	int rc = -1;

	if (ctx && EVP_MAC_init(ctx, key, PHX_XRDV_KEY_BYTES, params) &&
	    EVP_MAC_update(ctx, (const unsigned char *)head, head_len) &&
	    (!tail_len || EVP_MAC_update(ctx, tail, tail_len)) &&
	    EVP_MAC_final(ctx, md, &md_len, sizeof(md)) && md_len * 2 == PHX_XRDV_MAC_HEX) {
		phx_hex_encode(md, md_len, out);
		rc = 0;
	}
	OPENSSL_cleanse(md, sizeof(md));
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return rc;
}

static int req_mac(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *nonce,
		   unsigned long after, char out[PHX_XRDV_MAC_HEX + 1])
{
	char msg[sizeof(REQ_LABEL) + PHX_XRDV_NONCE_HEX + ULONG_DIGITS + 2];
	int n = snprintf(msg, sizeof(msg), REQ_LABEL "%s:%lu", nonce, after);

	if (n < 0 || (size_t)n >= sizeof(msg))
		return -1;
	return mac_hex(key, msg, (size_t)n, NULL, 0, out);
}

static int resp_mac(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *nonce,
		    unsigned long epoch, const char *body, size_t body_len,
		    char out[PHX_XRDV_MAC_HEX + 1])
{
	char msg[sizeof(RESP_LABEL) + PHX_XRDV_NONCE_HEX + ULONG_DIGITS + 3];
	int n = snprintf(msg, sizeof(msg), RESP_LABEL "%s:%lu:", nonce, epoch);

	if (n < 0 || (size_t)n >= sizeof(msg))
		return -1;
	return mac_hex(key, msg, (size_t)n, body, body_len, out);
}

static int lower_hex(const char *s, size_t n)
{
	return s && strlen(s) == n && strspn(s, PHX_HEX_LOWER) == n;
}

/* Plain decimal: digits only, no leading zero, no overflow. */
static int parse_ulong(const char *s, unsigned long *v)
{
	size_t n = strlen(s);
	unsigned long x = 0;

	if (n == 0 || n > ULONG_DIGITS || strspn(s, "0123456789") != n || (s[0] == '0' && n > 1))
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (x > (ULONG_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

/* s split at each sep into exactly n non-empty fields, in place; 0 or -1. */
static int split(char *s, char sep, char **f, int n)
{
	for (int i = 0; i < n; i++) {
		char *e = strchr(s, sep);

		if (i < n - 1 && !e)
			return -1;
		if (i == n - 1 && e)
			return -1;
		if (e)
			*e = '\0';
		if (!*s)
			return -1;
		f[i] = s;
		s = e ? e + 1 : s;
	}
	return 0;
}

/*
 * A wire line into buf (NUL instead of its newline): the newline last and
 * only there, no NUL byte, at most max bytes; 0 or -1.
 */
static int take_line(const char *line, size_t len, size_t max, char *buf)
{
	if (!line || len < 2 || len > max || line[len - 1] != '\n' || memchr(line, '\n', len - 1) ||
	    memchr(line, '\0', len))
		return -1;
	memcpy(buf, line, len - 1);
	buf[len - 1] = '\0';
	return 0;
}

int phx_xrdv_env_parse(const char *v, char *addr, size_t addrlen, unsigned *port,
		       unsigned char key[PHX_XRDV_KEY_BYTES])
{
	char buf[PHX_XRDV_ENV_MAX], *f[3];
	struct in_addr in;
	unsigned long p;

	if (!v || strlen(v) >= sizeof(buf))
		return -1;
	strcpy(buf, v);
	if (split(buf, ':', f, 3) < 0 || inet_pton(AF_INET, f[0], &in) != 1 ||
	    strlen(f[0]) >= addrlen || parse_ulong(f[1], &p) < 0 || p == 0 || p > 65535 ||
	    phx_hex_decode(f[2], strlen(f[2]), key, PHX_XRDV_KEY_BYTES) < 0)
		return -1;
	strcpy(addr, f[0]);
	*port = (unsigned)p;
	return 0;
}

int phx_xrdv_env_format(const char *addr, unsigned port,
			const unsigned char key[PHX_XRDV_KEY_BYTES], char *buf, size_t len)
{
	char hex[2 * PHX_XRDV_KEY_BYTES + 1];
	int n;

	phx_hex_encode(key, PHX_XRDV_KEY_BYTES, hex);
	n = snprintf(buf, len, "%s:%u:%s", addr, port, hex);
	OPENSSL_cleanse(hex, sizeof(hex));
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int phx_xrdv_req_format(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *nonce,
			unsigned long after, char *buf, size_t len)
{
	char mac[PHX_XRDV_MAC_HEX + 1];
	int n;

	if (!lower_hex(nonce, PHX_XRDV_NONCE_HEX) || req_mac(key, nonce, after, mac) < 0)
		return -1;
	n = snprintf(buf, len, PHX_XRDV_MAGIC " %s %lu %s\n", nonce, after, mac);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int phx_xrdv_req_parse(const char *line, size_t len, struct phx_xrdv_req *r)
{
	char buf[PHX_XRDV_REQ_MAX], *f[4];

	if (take_line(line, len, PHX_XRDV_REQ_MAX, buf) < 0 || split(buf, ' ', f, 4) < 0 ||
	    strcmp(f[0], PHX_XRDV_MAGIC) || !lower_hex(f[1], PHX_XRDV_NONCE_HEX) ||
	    parse_ulong(f[2], &r->after) < 0 || !lower_hex(f[3], PHX_XRDV_MAC_HEX))
		return -1;
	strcpy(r->nonce, f[1]);
	strcpy(r->mac, f[3]);
	return 0;
}

int phx_xrdv_req_verify(const unsigned char key[PHX_XRDV_KEY_BYTES], const struct phx_xrdv_req *r)
{
	char want[PHX_XRDV_MAC_HEX + 1];
	int ok;

	if (!lower_hex(r->nonce, PHX_XRDV_NONCE_HEX) || !lower_hex(r->mac, PHX_XRDV_MAC_HEX) ||
	    req_mac(key, r->nonce, r->after, want) < 0)
		return 0;
	ok = CRYPTO_memcmp(want, r->mac, PHX_XRDV_MAC_HEX) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

int phx_xrdv_resp_format(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *nonce,
			 unsigned long epoch, const char *body, size_t body_len, char *buf,
			 size_t len)
{
	char mac[PHX_XRDV_MAC_HEX + 1];
	int n;

	if (body_len > PHX_XRDV_BODY_MAX || !lower_hex(nonce, PHX_XRDV_NONCE_HEX) ||
	    resp_mac(key, nonce, epoch, body, body_len, mac) < 0)
		return -1;
	n = snprintf(buf, len, PHX_XRDV_MAGIC " %lu %zu %s\n", epoch, body_len, mac);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int phx_xrdv_resp_parse(const char *line, size_t len, struct phx_xrdv_resp *h)
{
	char buf[PHX_XRDV_HDR_MAX], *f[4];
	unsigned long body_len;

	if (take_line(line, len, PHX_XRDV_HDR_MAX, buf) < 0 || split(buf, ' ', f, 4) < 0 ||
	    strcmp(f[0], PHX_XRDV_MAGIC) || parse_ulong(f[1], &h->epoch) < 0 ||
	    parse_ulong(f[2], &body_len) < 0 || body_len > PHX_XRDV_BODY_MAX ||
	    !lower_hex(f[3], PHX_XRDV_MAC_HEX))
		return -1;
	h->body_len = body_len;
	strcpy(h->mac, f[3]);
	return 0;
}

int phx_xrdv_resp_verify(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *nonce,
			 const struct phx_xrdv_resp *h, const char *body, size_t body_len)
{
	char want[PHX_XRDV_MAC_HEX + 1];
	int ok;

	if (body_len != h->body_len || body_len > PHX_XRDV_BODY_MAX ||
	    !lower_hex(nonce, PHX_XRDV_NONCE_HEX) || !lower_hex(h->mac, PHX_XRDV_MAC_HEX) ||
	    resp_mac(key, nonce, h->epoch, body, body_len, want) < 0)
		return 0;
	ok = CRYPTO_memcmp(want, h->mac, PHX_XRDV_MAC_HEX) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

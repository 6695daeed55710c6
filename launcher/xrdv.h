/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cross-role rendezvous protocol (xrdv.c): the driver publishes a
 * document (where every role of the job runs) with an epoch that only
 * grows; each agent long-polls the driver for a newer one over TCP. Every
 * request and answer carries an HMAC-SHA256 under the job's rendezvous key
 * (handed to the agents in PHX_XRDV_ENV, never on a command line), so a
 * stranger on the cluster neither learns the document nor feeds a false one.
 *
 *   request: PHXRDV1 NONCE AFTER MAC\n
 *            NONCE 32 lower-case hex digits, fresh per request; AFTER the
 *            epoch the agent has (decimal); MAC over
 *            "phalanx-xrdv:req:v1:" NONCE ":" AFTER
 *   answer:  PHXRDV1 EPOCH LEN MAC\n and LEN bytes of body; MAC over
 *            "phalanx-xrdv:resp:v1:" NONCE ":" EPOCH ":" BODY
 *            (the request's nonce: an old answer cannot be replayed)
 *
 * Numbers are plain decimal (no sign, no leading zero), MACs lower-case
 * hex. Pure; the parsers take any bytes (they are fuzzed).
 */
#ifndef PHX_LAUNCHER_XRDV_H
#define PHX_LAUNCHER_XRDV_H

#include <stddef.h>

/* "ADDR:PORT:KEYHEX" in the agents' environment, from the driver. */
#define PHX_XRDV_ENV "PHALANX_XRDV"
#define PHX_XRDV_MAGIC "PHXRDV1"
#define PHX_XRDV_KEY_BYTES 32
#define PHX_XRDV_NONCE_HEX 32
#define PHX_XRDV_MAC_HEX 64
/* A request line, newline included. */
#define PHX_XRDV_REQ_MAX 256
/* An answer's header line, newline included. */
#define PHX_XRDV_HDR_MAX 128
#define PHX_XRDV_BODY_MAX (1u << 20)
/* The environment value with its NUL. */
#define PHX_XRDV_ENV_MAX 96

struct phx_xrdv_req {
	char nonce[PHX_XRDV_NONCE_HEX + 1];
	unsigned long after;
	char mac[PHX_XRDV_MAC_HEX + 1];
};

struct phx_xrdv_resp {
	unsigned long epoch;
	size_t body_len;
	char mac[PHX_XRDV_MAC_HEX + 1];
};

/* "ADDR:PORT:KEYHEX": an IPv4 address, a port 1-65535, 64 hex digits; 0 or -1. */
int phx_xrdv_env_parse(const char *v, char *addr, size_t addrlen, unsigned *port,
		       unsigned char key[PHX_XRDV_KEY_BYTES]);
/* The same value; its length, or -1 when it does not fit. */
int phx_xrdv_env_format(const char *addr, unsigned port,
			const unsigned char key[PHX_XRDV_KEY_BYTES], char *buf, size_t len);

/*
 * The request line with its newline (nonce: PHX_XRDV_NONCE_HEX lower-case
 * hex digits) and a NUL; its length, or -1.
 */
int phx_xrdv_req_format(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *nonce,
			unsigned long after, char *buf, size_t len);
/* One whole line, newline last, at most PHX_XRDV_REQ_MAX bytes; 0 or -1. Checks no MAC. */
int phx_xrdv_req_parse(const char *line, size_t len, struct phx_xrdv_req *r);
/* 1 when the request's MAC is the key's (constant-time compare), else 0. */
int phx_xrdv_req_verify(const unsigned char key[PHX_XRDV_KEY_BYTES], const struct phx_xrdv_req *r);

/* The answer's header line with its newline and a NUL; its length, or -1. */
int phx_xrdv_resp_format(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *nonce,
			 unsigned long epoch, const char *body, size_t body_len, char *buf,
			 size_t len);
/*
 * One whole header line, newline last, at most PHX_XRDV_HDR_MAX bytes, body
 * length at most PHX_XRDV_BODY_MAX; 0 or -1. Checks no MAC.
 */
int phx_xrdv_resp_parse(const char *line, size_t len, struct phx_xrdv_resp *h);
/* 1 when h's MAC covers this nonce (the request's), its epoch and this body, else 0. */
int phx_xrdv_resp_verify(const unsigned char key[PHX_XRDV_KEY_BYTES], const char *nonce,
			 const struct phx_xrdv_resp *h, const char *body, size_t body_len);

#endif

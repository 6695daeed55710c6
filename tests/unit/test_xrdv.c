/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cross-role rendezvous: the protocol's lines, then the driver's
 * service and an agent's client on this node, and strangers that must get
 * nothing from it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/file.h"
#include "launcher/xrdv.h"
#include "launcher/agent/agent_xrdv.h"
#include "launcher/driver/driver_xrdv.h"
#include "tests/unit/scratch.h"

#define NONCE "00112233445566778899aabbccddeeff"
#define IDLE_PEERS 600

static unsigned char key[PHX_XRDV_KEY_BYTES], other_key[PHX_XRDV_KEY_BYTES];

static void keys(void)
{
	for (unsigned i = 0; i < PHX_XRDV_KEY_BYTES; i++) {
		key[i] = (unsigned char)(i * 7 + 1);
		other_key[i] = key[i];
	}
	other_key[31] ^= 1;
}

static void test_env(void **state)
{
	char env[PHX_XRDV_ENV_MAX], addr[INET_ADDRSTRLEN], bad[PHX_XRDV_ENV_MAX + 8];
	unsigned char k[PHX_XRDV_KEY_BYTES];
	unsigned port = 0;
	int n;

	(void)state;
	keys();
	n = phx_xrdv_env_format("10.1.2.3", 4567, key, env, sizeof(env));
	assert_true(n > 0);
	assert_int_equal(phx_xrdv_env_parse(env, addr, sizeof(addr), &port, k), 0);
	assert_string_equal(addr, "10.1.2.3");
	assert_int_equal(port, 4567);
	assert_memory_equal(k, key, sizeof(k));

	assert_int_equal(phx_xrdv_env_parse(NULL, addr, sizeof(addr), &port, k), -1);
	assert_int_equal(phx_xrdv_env_parse("", addr, sizeof(addr), &port, k), -1);
	/* A host name, port 0 or past 65535, a short key, a fourth field. */
	snprintf(bad, sizeof(bad), "node1%s", strchr(env, ':'));
	assert_int_equal(phx_xrdv_env_parse(bad, addr, sizeof(addr), &port, k), -1);
	snprintf(bad, sizeof(bad), "10.1.2.3:0%s", strrchr(env, ':'));
	assert_int_equal(phx_xrdv_env_parse(bad, addr, sizeof(addr), &port, k), -1);
	snprintf(bad, sizeof(bad), "10.1.2.3:65536%s", strrchr(env, ':'));
	assert_int_equal(phx_xrdv_env_parse(bad, addr, sizeof(addr), &port, k), -1);
	snprintf(bad, sizeof(bad), "%.*s", n - 2, env);
	assert_int_equal(phx_xrdv_env_parse(bad, addr, sizeof(addr), &port, k), -1);
	snprintf(bad, sizeof(bad), "%s:1", env);
	assert_int_equal(phx_xrdv_env_parse(bad, addr, sizeof(addr), &port, k), -1);
	/* No room for the address. */
	assert_int_equal(phx_xrdv_env_parse(env, addr, 4, &port, k), -1);
}

static void test_request_round_trip(void **state)
{
	char line[PHX_XRDV_REQ_MAX], copy[PHX_XRDV_REQ_MAX + 64];
	struct phx_xrdv_req r;
	int n;

	(void)state;
	keys();
	n = phx_xrdv_req_format(key, NONCE, 18446744073709551615ul, line, sizeof(line));
	assert_true(n > 0 && n <= PHX_XRDV_REQ_MAX);
	assert_int_equal(line[n - 1], '\n');
	assert_int_equal(phx_xrdv_req_parse(line, (size_t)n, &r), 0);
	assert_string_equal(r.nonce, NONCE);
	assert_true(r.after == 18446744073709551615ul);
	assert_true(phx_xrdv_req_verify(key, &r));

	/* A wrong key, another epoch, another nonce. */
	assert_false(phx_xrdv_req_verify(other_key, &r));
	r.after--;
	assert_false(phx_xrdv_req_verify(key, &r));
	r.after++;
	r.nonce[0] = '1';
	assert_false(phx_xrdv_req_verify(key, &r));

	/* Any byte of the line changed: refused or not verified. */
	for (int i = 0; i < n; i++) {
		memcpy(copy, line, (size_t)n);
		copy[i] = copy[i] == '1' ? '2' : '1';
		assert_false(phx_xrdv_req_parse(copy, (size_t)n, &r) == 0 &&
			     phx_xrdv_req_verify(key, &r));
	}
	/* Truncated: without its newline, or a field short. */
	assert_int_equal(phx_xrdv_req_parse(line, (size_t)n - 1, &r), -1);
	memcpy(copy, line, (size_t)n);
	copy[n - 2] = '\n';
	assert_int_equal(phx_xrdv_req_parse(copy, (size_t)n - 1, &r), -1);
	assert_int_equal(phx_xrdv_req_parse(line, 0, &r), -1);
	assert_int_equal(phx_xrdv_req_parse("\n", 1, &r), -1);
	/* Oversized: padding past PHX_XRDV_REQ_MAX. */
	memset(copy, ' ', sizeof(copy));
	memcpy(copy, line, (size_t)n - 1);
	copy[PHX_XRDV_REQ_MAX] = '\n';
	assert_int_equal(phx_xrdv_req_parse(copy, PHX_XRDV_REQ_MAX + 1, &r), -1);
	/* Not canonical: leading zero, upper-case MAC, double space, a NUL. */
	n = snprintf(copy, sizeof(copy), "PHXRDV1 %s 01 %064d\n", NONCE, 0);
	assert_int_equal(phx_xrdv_req_parse(copy, (size_t)n, &r), -1);
	n = snprintf(copy, sizeof(copy), "PHXRDV1 %s 1 %064d\n", NONCE, 0);
	assert_int_equal(phx_xrdv_req_parse(copy, (size_t)n, &r), 0);
	copy[n - 2] = 'A';
	assert_int_equal(phx_xrdv_req_parse(copy, (size_t)n, &r), -1);
	n = snprintf(copy, sizeof(copy), "PHXRDV1  %s 1 %064d\n", NONCE, 0);
	assert_int_equal(phx_xrdv_req_parse(copy, (size_t)n, &r), -1);
	n = snprintf(copy, sizeof(copy), "PHXRDV1 %s 1 %064d\n", NONCE, 0);
	copy[20] = '\0';
	assert_int_equal(phx_xrdv_req_parse(copy, (size_t)n, &r), -1);
	/* An epoch past unsigned long. */
	n = snprintf(copy, sizeof(copy), "PHXRDV1 %s 18446744073709551616 %064d\n", NONCE, 0);
	assert_int_equal(phx_xrdv_req_parse(copy, (size_t)n, &r), -1);
	/* A nonce that is not hex refuses to format. */
	assert_int_equal(phx_xrdv_req_format(key, "xyz", 1, line, sizeof(line)), -1);
}

static void test_response_round_trip(void **state)
{
	static const char body[] = "{\"roles\":{\"trainer\":[\"n1\"],\"rollout\":[\"n2\"]}}";
	char line[PHX_XRDV_HDR_MAX], copy[PHX_XRDV_HDR_MAX + 64], b[sizeof(body)];
	struct phx_xrdv_resp h;
	int n;

	(void)state;
	keys();
	n = phx_xrdv_resp_format(key, NONCE, 42, body, strlen(body), line, sizeof(line));
	assert_true(n > 0 && n <= PHX_XRDV_HDR_MAX);
	assert_int_equal(phx_xrdv_resp_parse(line, (size_t)n, &h), 0);
	assert_true(h.epoch == 42);
	assert_int_equal(h.body_len, strlen(body));
	assert_true(phx_xrdv_resp_verify(key, NONCE, &h, body, strlen(body)));

	assert_false(phx_xrdv_resp_verify(other_key, NONCE, &h, body, strlen(body)));
	/* Another request's nonce: an old answer does not replay. */
	assert_false(phx_xrdv_resp_verify(key, "10112233445566778899aabbccddeeff", &h, body,
					  strlen(body)));
	for (size_t i = 0; i < strlen(body); i++) {
		memcpy(b, body, sizeof(body));
		b[i] ^= 0x20;
		assert_false(phx_xrdv_resp_verify(key, NONCE, &h, b, strlen(body)));
	}
	assert_false(phx_xrdv_resp_verify(key, NONCE, &h, body, strlen(body) - 1));
	h.epoch = 43;
	assert_false(phx_xrdv_resp_verify(key, NONCE, &h, body, strlen(body)));
	h.epoch = 42;
	h.body_len--;
	assert_false(phx_xrdv_resp_verify(key, NONCE, &h, body, strlen(body) - 1));

	/* An empty body is a document too. */
	n = phx_xrdv_resp_format(key, NONCE, 1, "", 0, line, sizeof(line));
	assert_int_equal(phx_xrdv_resp_parse(line, (size_t)n, &h), 0);
	assert_int_equal(h.body_len, 0);
	assert_true(phx_xrdv_resp_verify(key, NONCE, &h, "", 0));

	/* Truncated, oversized, or a body over the limit. */
	assert_int_equal(phx_xrdv_resp_parse(line, (size_t)n - 1, &h), -1);
	assert_int_equal(phx_xrdv_resp_parse(line, 3, &h), -1);
	memset(copy, ' ', sizeof(copy));
	memcpy(copy, line, (size_t)n - 1);
	copy[PHX_XRDV_HDR_MAX] = '\n';
	assert_int_equal(phx_xrdv_resp_parse(copy, PHX_XRDV_HDR_MAX + 1, &h), -1);
	n = snprintf(copy, sizeof(copy), "PHXRDV1 1 %u %064d\n", PHX_XRDV_BODY_MAX + 1, 0);
	assert_int_equal(phx_xrdv_resp_parse(copy, (size_t)n, &h), -1);
	n = snprintf(copy, sizeof(copy), "PHXRDV1 1 %u %064d\n", PHX_XRDV_BODY_MAX, 0);
	assert_int_equal(phx_xrdv_resp_parse(copy, (size_t)n, &h), 0);
	n = snprintf(copy, sizeof(copy), "PHXRDV2 1 1 %064d\n", 0);
	assert_int_equal(phx_xrdv_resp_parse(copy, (size_t)n, &h), -1);
	n = snprintf(copy, sizeof(copy), "PHXRDV1 -1 1 %064d\n", 0);
	assert_int_equal(phx_xrdv_resp_parse(copy, (size_t)n, &h), -1);
	assert_int_equal(
		phx_xrdv_resp_format(key, NONCE, 1, "", PHX_XRDV_BODY_MAX + 1, line, sizeof(line)),
		-1);
}

/* The service on this node: its address and key from the agents' environment. */
struct srv {
	struct phx_drv_xrdv *x;
	const char *env;
	struct sockaddr_in sa;
	unsigned char key[PHX_XRDV_KEY_BYTES];
	char dir[256], file[300];
};

static int srv_open(struct srv *s)
{
	char addr[INET_ADDRSTRLEN];
	unsigned port;

	memset(s, 0, sizeof(*s));
	s->x = phx_drv_xrdv_open();
	if (!s->x)
		return -1;
	s->env = phx_drv_xrdv_env(s->x);
	assert_non_null(s->env);
	assert_int_equal(phx_xrdv_env_parse(s->env, addr, sizeof(addr), &port, s->key), 0);
	s->sa.sin_family = AF_INET;
	s->sa.sin_port = htons((uint16_t)port);
	assert_int_equal(inet_pton(AF_INET, addr, &s->sa.sin_addr), 1);
	assert_int_equal(phx_scratch_make(s->dir, sizeof(s->dir), "xrdv"), 0);
	snprintf(s->file, sizeof(s->file), "%s/roles.json", s->dir);
	return 0;
}

static int peer(const struct srv *s)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (const struct sockaddr *)&s->sa, sizeof(s->sa)), 0);
	return fd;
}

/*
 * Reads fd until the service closes it or ms pass: the bytes that came
 * (into buf when given), or -1 when it is still open at the deadline.
 */
static long drain(int fd, int ms, char *buf, size_t len)
{
	uint64_t deadline = phx_now_ns(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000ull;
	long total = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char tmp[4096];
		ssize_t n;

		if (poll(&p, 1, phx_ms_until(deadline) + 1) <= 0)
			return -1;
		n = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n <= 0)
			return total;
		if (buf && (size_t)total + (size_t)n <= len)
			memcpy(buf + total, tmp, (size_t)n);
		total += n;
	}
}

/* Polls file up to ms for exactly body: 0 when it came. */
static int wait_file(const char *file, const char *body, int ms)
{
	uint64_t deadline = phx_now_ns(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000ull;

	do {
		char *data;
		size_t len;

		if (phx_file_read(file, 1 << 20, &data, &len) == 0) {
			int same = len == strlen(body) && !memcmp(data, body, len);

			free(data);
			if (same)
				return 0;
		}
		usleep(10000);
	} while (phx_now_ns(CLOCK_MONOTONIC) < deadline);
	return -1;
}

/* A request of our own with the job's key: the answer's epoch and body, checked. */
static void ask(const struct srv *s, unsigned long after, unsigned long want_epoch,
		const char *want_body)
{
	char req[PHX_XRDV_REQ_MAX], buf[8192], *nl;
	struct phx_xrdv_resp h;
	int fd = peer(s), n;
	long got;

	n = phx_xrdv_req_format(s->key, NONCE, after, req, sizeof(req));
	assert_true(n > 0);
	assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	got = drain(fd, 15000, buf, sizeof(buf));
	close(fd);
	assert_true(got > 0 && (size_t)got < sizeof(buf));
	nl = memchr(buf, '\n', (size_t)got);
	assert_non_null(nl);
	assert_int_equal(phx_xrdv_resp_parse(buf, (size_t)(nl - buf) + 1, &h), 0);
	assert_true(h.epoch == want_epoch);
	assert_int_equal(h.body_len, (size_t)got - (size_t)(nl - buf) - 1);
	assert_true(phx_xrdv_resp_verify(s->key, NONCE, &h, nl + 1, h.body_len));
	assert_int_equal(h.body_len, strlen(want_body));
	assert_memory_equal(nl + 1, want_body, h.body_len);
}

static void test_service_and_agent(void **state)
{
	static const char body1[] = "{\"epoch\":1,\"roles\":{\"trainer\":[\"n1\",\"n2\"]}}";
	static const char body2[] =
		"{\"epoch\":2,\"roles\":{\"trainer\":[\"n1\"],\"rollout\":[\"n2\"]}}";
	struct phx_agent_xrdv *a;
	struct stat st;
	struct srv s;

	(void)state;
	if (srv_open(&s) < 0)
		skip(); /* no IPv4 address but loopback on this machine */
	assert_null(phx_agent_xrdv_start(NULL, s.file));
	assert_null(phx_agent_xrdv_start("10.0.0.1:1:abc", s.file));

	phx_drv_xrdv_publish(s.x, 1, body1);
	a = phx_agent_xrdv_start(s.env, s.file);
	assert_non_null(a);
	assert_int_equal(phx_agent_xrdv_wait_first(a, 20000), 0);
	assert_int_equal(wait_file(s.file, body1, 1000), 0);
	assert_int_equal(stat(s.file, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(phx_agent_xrdv_epoch(a) == 1);

	/* The agent is held now; a new epoch reaches it without its asking again. */
	usleep(100000);
	phx_drv_xrdv_publish(s.x, 2, body2);
	assert_int_equal(wait_file(s.file, body2, 5000), 0);
	assert_true(phx_agent_xrdv_epoch(a) == 2);
	/* An epoch that does not grow is refused; the agents keep 2. */
	phx_drv_xrdv_publish(s.x, 2, body1);
	ask(&s, 0, 2, body2);
	ask(&s, 1, 2, body2);

	/* Stops promptly while held in a long poll. */
	phx_agent_xrdv_stop(a);
	phx_agent_xrdv_stop(NULL);
	phx_drv_xrdv_close(s.x);
	phx_drv_xrdv_close(NULL);
	phx_scratch_remove(s.dir);
}

/*
 * A held request with nothing newer gets the same document after 10 s; one
 * to a service that never published is closed without an answer.
 */
static void test_long_poll_times_out(void **state)
{
	char req[PHX_XRDV_REQ_MAX];
	struct srv s, e;
	int fd, n;

	(void)state;
	if (srv_open(&s) < 0)
		skip();
	assert_int_equal(srv_open(&e), 0);
	phx_drv_xrdv_publish(s.x, 5, "five");
	fd = peer(&e);
	n = phx_xrdv_req_format(e.key, NONCE, 0, req, sizeof(req));
	assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	/* Both wait out the same 10 s. */
	ask(&s, 5, 5, "five");
	assert_int_equal(drain(fd, 15000, NULL, 0), 0);
	close(fd);
	phx_drv_xrdv_close(s.x);
	phx_drv_xrdv_close(e.x);
	phx_scratch_remove(s.dir);
	phx_scratch_remove(e.dir);
}

static void test_strangers_get_nothing(void **state)
{
	static const char body[] = "{\"secret\":\"where the roles run\"}";
	char req[PHX_XRDV_REQ_MAX], junk[PHX_XRDV_REQ_MAX + 44], env[PHX_XRDV_ENV_MAX];
	int *idle, silent, garbage, badmac, longline, nidle = IDLE_PEERS, n;
	struct phx_agent_xrdv *a;
	struct rlimit rl;
	struct srv s;

	(void)state;
	keys();
	/* The idle peers and the service's ends of them live in this one process. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4 * IDLE_PEERS) {
		rl.rlim_cur = rl.rlim_max < 4 * IDLE_PEERS ? rl.rlim_max : 4 * IDLE_PEERS;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2 * IDLE_PEERS + 64) {
		nidle = (int)(rl.rlim_cur - 64) / 2;
		print_message("only %d idle peers: RLIMIT_NOFILE is %lu\n", nidle,
			      (unsigned long)rl.rlim_cur);
	}
	if (srv_open(&s) < 0)
		skip();
	phx_drv_xrdv_publish(s.x, 1, body);

	silent = peer(&s);
	garbage = peer(&s);
	assert_int_equal(send(garbage, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL), 18);
	badmac = peer(&s);
	n = phx_xrdv_req_format(other_key, NONCE, 0, req, sizeof(req));
	assert_int_equal(send(badmac, req, (size_t)n, MSG_NOSIGNAL), n);
	longline = peer(&s);
	memset(junk, 'A', sizeof(junk));
	assert_int_equal(send(longline, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));

	/* Each is closed without a byte: no document, no answer at all. */
	assert_int_equal(drain(badmac, 10000, NULL, 0), 0);
	assert_int_equal(drain(garbage, 10000, NULL, 0), 0);
	assert_int_equal(drain(longline, 10000, NULL, 0), 0);
	assert_int_equal(drain(silent, 10000, NULL, 0), 0);
	close(silent);
	close(garbage);
	close(badmac);
	close(longline);

	/* More idle connections than the service holds. */
	idle = calloc((size_t)nidle, sizeof(*idle));
	assert_non_null(idle);
	for (int i = 0; i < nidle; i++)
		idle[i] = peer(&s);

	/* While they are still connected, the job's agent is served. */
	a = phx_agent_xrdv_start(s.env, s.file);
	assert_non_null(a);
	assert_int_equal(phx_agent_xrdv_wait_first(a, 30000), 0);
	assert_int_equal(wait_file(s.file, body, 1000), 0);

	for (int i = 0; i < nidle; i++) {
		assert_int_equal(drain(idle[i], 10000, NULL, 0), 0);
		close(idle[i]);
	}

	/* Closing with idle peers connected and the agent held returns. */
	snprintf(env, sizeof(env), "%s", s.env);
	for (int i = 0; i < 16; i++)
		idle[i] = peer(&s);
	phx_drv_xrdv_close(s.x);
	for (int i = 0; i < 16; i++)
		close(idle[i]);
	free(idle);

	/* The driver gone: the agent keeps its file and stops promptly all the same. */
	usleep(200000);
	assert_true(phx_agent_xrdv_epoch(a) == 1);
	assert_int_equal(wait_file(s.file, body, 0), 0);
	phx_agent_xrdv_stop(a);

	/* Nobody there: no first document, and no hang. */
	a = phx_agent_xrdv_start(env, s.file);
	assert_non_null(a);
	assert_int_equal(phx_agent_xrdv_wait_first(a, 300), -1);
	assert_true(phx_agent_xrdv_epoch(a) == 0);
	phx_agent_xrdv_stop(a);
	phx_scratch_remove(s.dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_request_round_trip),
		cmocka_unit_test(test_response_round_trip),
		cmocka_unit_test(test_service_and_agent),
		cmocka_unit_test(test_long_poll_times_out),
		cmocka_unit_test(test_strangers_get_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

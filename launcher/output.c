/* SPDX-License-Identifier: Apache-2.0 */
/* Worker output split into lines, and the root cause from an error file. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/errfile.h"
#include "launcher/env.h"
#include "launcher/output.h"

void phx_linebuf_feed(struct phx_linebuf *lb, const char *data, size_t n, phx_line_fn fn, void *arg)
{
	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;
		size_t room = sizeof(lb->buf) - lb->len;

		if (take > room)
			take = room;
		memcpy(lb->buf + lb->len, data, take);
		lb->len += take;
		data += take;
		n -= take;
		if (nl && data == nl) {
			data++;
			n--;
		} else if (lb->len < sizeof(lb->buf)) {
			break; /* the rest of the line comes later */
		}
		/* A newline, or a line too long to keep whole: out it goes. */
		fn(arg, lb->buf, lb->len);
		lb->len = 0;
	}
}

void phx_linebuf_flush(struct phx_linebuf *lb, phx_line_fn fn, void *arg)
{
	if (lb->len)
		fn(arg, lb->buf, lb->len);
	lb->len = 0;
}

int phx_worker_error_read(const char *run_dir, unsigned restart, unsigned long rank, char *path,
			  size_t pathlen, char *msg, size_t msglen, char *trace, size_t tracelen)
{
	struct phx_worker_ctx ctx = { .run_dir = run_dir, .restart_count = restart };

	phx_worker_error_file(&ctx, rank, path, pathlen);
	return phx_errfile_read(path, msg, msglen, trace, tracelen);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/errfile.h"
#include "common/file.h"

static const char *json_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!o || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static void trim_copy(char *out, size_t len, const char *s)
{
	size_t n;

	while (*s == ' ' || *s == '\n' || *s == '\t')
		s++;
	snprintf(out, len, "%s", s);
	n = strlen(out);
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
}

int phx_errfile_parse(const char *text, char *msg, size_t msglen, char *trace, size_t tracelen)
{
	struct json_object *root = json_tokener_parse(text), *m = NULL, *extra = NULL;
	const char *message = NULL, *stack = NULL;

	msg[0] = trace[0] = '\0';
	/* torch's @record: {"message": {"message": ..., "extraInfo": {"py_callstack": ...}}} */
	if (root && json_object_is_type(root, json_type_object) &&
	    json_object_object_get_ex(root, "message", &m)) {
		if (json_object_is_type(m, json_type_string)) {
			message = json_object_get_string(m);
		} else {
			message = json_str(m, "message");
			if (json_object_object_get_ex(m, "extraInfo", &extra))
				stack = json_str(extra, "py_callstack");
		}
	}
	if (message) {
		trim_copy(msg, msglen, message);
		if (stack)
			trim_copy(trace, tracelen, stack);
	} else {
		trim_copy(msg, msglen, text);
	}
	json_object_put(root);
	return msg[0] ? 0 : -1;
}

int phx_errfile_read(const char *path, char *msg, size_t msglen, char *trace, size_t tracelen)
{
	char *text = NULL;
	size_t len;
	int rc = -1;

	msg[0] = trace[0] = '\0';
	if (phx_file_read(path, PHX_ERRFILE_MAX_BYTES, &text, &len) == 0)
		rc = phx_errfile_parse(text, msg, msglen, trace, tracelen);
	free(text);
	return rc;
}

bool phx_errfile_peer_lost(const char *msg)
{
	static const char *const peer_lost[] = {
		"Connection closed by peer", /* gloo */
		"Connection reset by peer", /* gloo, TCP store */
		"remote process exited", /* NCCL */
		"NCCL communicator was aborted", /* NCCL, a peer's abort */
		NULL,
	};

	for (const char *const *p = peer_lost; *p; p++)
		if (strstr(msg, *p))
			return true;
	return false;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <string.h>

#include "checkpoint/proto/ckpt_json.h"
#include "common/log.h"

struct json_object *phx_json_parse_object(const char *text, size_t len, char *err, size_t errlen)
{
	static __thread struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error jerr;
	size_t used;

	if (len > (size_t)INT32_MAX - 1) {
		phx_errf(err, errlen, "JSON text of %zu bytes is too large", len);
		return NULL;
	}
	if (memchr(text, '\0', len)) {
		phx_errf(err, errlen, "JSON text holds a NUL byte at offset %zu",
			 (size_t)((const char *)memchr(text, '\0', len) - text));
		return NULL;
	}
	/* One tokener per thread, reset for each text: a new one per message was a
	 * measurable part of the daemon's time at 2,048 agents. */
	if (!tok) {
		tok = json_tokener_new_ex(32);
		if (!tok) {
			phx_errf(err, errlen, "out of memory");
			return NULL;
		}
		json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	}
	json_tokener_reset(tok);
	obj = json_tokener_parse_ex(tok, text, (int)len);
	jerr = json_tokener_get_error(tok);
	used = json_tokener_get_parse_end(tok);
	if (!obj || jerr != json_tokener_success) {
		phx_errf(err, errlen, "invalid JSON near byte %zu: %s", used,
			 jerr == json_tokener_continue ? "text ends early"
						       : json_tokener_error_desc(jerr));
		json_object_put(obj);
		return NULL;
	}
	while (used < len && strchr(" \t\r\n", text[used]))
		used++;
	if (used != len) {
		phx_errf(err, errlen, "stray bytes after the JSON object at offset %zu", used);
		json_object_put(obj);
		return NULL;
	}
	if (!json_object_is_type(obj, json_type_object)) {
		phx_errf(err, errlen, "expected a JSON object, got %s",
			 json_type_to_name(json_object_get_type(obj)));
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

int phx_json_only_keys(struct json_object *obj, const char *what, const char *const *allowed,
		       char *err, size_t errlen)
{
	json_object_object_foreach(obj, key, val)
	{
		const char *const *a = allowed;

		(void)val;
		while (*a && strcmp(*a, key))
			a++;
		if (!*a)
			return phx_errf(err, errlen, "%s: unknown key \"%.64s\"", what, key);
	}
	return 0;
}

static int field(struct json_object *obj, const char *what, const char *key,
		 struct json_object **val, int *present, char *err, size_t errlen)
{
	if (present)
		*present = 0;
	if (json_object_object_get_ex(obj, key, val)) {
		if (present)
			*present = 1;
		return 1;
	}
	if (present)
		return 0;
	return phx_errf(err, errlen, "%s: missing \"%s\"", what, key);
}

int phx_json_u64(struct json_object *obj, const char *what, const char *key, uint64_t min,
		 uint64_t max, uint64_t *out, int *present, char *err, size_t errlen)
{
	struct json_object *val;
	uint64_t v;
	int rc = field(obj, what, key, &val, present, err, errlen);

	if (rc <= 0)
		return rc;
	if (!json_object_is_type(val, json_type_int))
		return phx_errf(err, errlen, "%s: \"%s\" must be an integer", what, key);
	/* json-c keeps integers above INT64_MAX as uint64 and clamps beyond UINT64_MAX. */
	if (json_object_get_int64(val) < 0)
		goto range;
	v = json_object_get_uint64(val);
	if (v < min || v > max)
		goto range;
	*out = v;
	return 0;
range:
	return phx_errf(err, errlen, "%s: \"%s\" must be from %llu to %llu", what, key,
			(unsigned long long)min, (unsigned long long)max);
}

int phx_json_str(struct json_object *obj, const char *what, const char *key, size_t maxlen,
		 int empty_ok, const char **out, int *present, char *err, size_t errlen)
{
	struct json_object *val;
	const char *s;
	size_t n;
	int rc = field(obj, what, key, &val, present, err, errlen);

	if (rc <= 0)
		return rc;
	if (!json_object_is_type(val, json_type_string))
		return phx_errf(err, errlen, "%s: \"%s\" must be a string", what, key);
	s = json_object_get_string(val);
	n = (size_t)json_object_get_string_len(val);
	if (n > maxlen || (!n && !empty_ok))
		return phx_errf(err, errlen, "%s: \"%s\" must hold %d to %zu characters", what, key,
				empty_ok ? 0 : 1, maxlen);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c > 0x7e)
			return phx_errf(err, errlen,
					"%s: \"%s\" holds character 0x%02x at offset %zu; only "
					"printable ASCII is allowed",
					what, key, c, i);
	}
	*out = s;
	return 0;
}

int phx_json_array(struct json_object *obj, const char *what, const char *key, size_t maxlen,
		   struct json_object **out, int *present, char *err, size_t errlen)
{
	struct json_object *val;
	int rc = field(obj, what, key, &val, present, err, errlen);

	if (rc <= 0)
		return rc;
	if (!json_object_is_type(val, json_type_array))
		return phx_errf(err, errlen, "%s: \"%s\" must be an array", what, key);
	if (json_object_array_length(val) > maxlen)
		return phx_errf(err, errlen, "%s: \"%s\" has more than %zu elements", what, key,
				maxlen);
	*out = val;
	return 0;
}

int phx_json_object(struct json_object *obj, const char *what, const char *key,
		    struct json_object **out, char *err, size_t errlen)
{
	struct json_object *val;
	int rc = field(obj, what, key, &val, NULL, err, errlen);

	if (rc < 0)
		return rc;
	if (!json_object_is_type(val, json_type_object))
		return phx_errf(err, errlen, "%s: \"%s\" must be an object", what, key);
	*out = val;
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict reading of JSON objects from outside (manifests, wire messages):
 * every field has a type and a range, unknown keys are refused, and each
 * refusal names the field and says what was expected.
 */
#ifndef PHX_CKPT_JSON_H
#define PHX_CKPT_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* Parses exactly one JSON object from text (no trailing bytes); NULL and err on failure. */
struct json_object *phx_json_parse_object(const char *text, size_t len, char *err, size_t errlen);

/* Refuses keys of obj not in the NULL-terminated list allowed. */
int phx_json_only_keys(struct json_object *obj, const char *what, const char *const *allowed,
		       char *err, size_t errlen);

/* Unsigned integer field in [min, max]; absent fields are refused unless *present is non-NULL. */
int phx_json_u64(struct json_object *obj, const char *what, const char *key, uint64_t min,
		 uint64_t max, uint64_t *out, int *present, char *err, size_t errlen);

/*
 * String field of 1..maxlen bytes (0..maxlen when empty_ok) of printable
 * ASCII; the pointer is into obj.
 */
int phx_json_str(struct json_object *obj, const char *what, const char *key, size_t maxlen,
		 int empty_ok, const char **out, int *present, char *err, size_t errlen);

/* Array field of 0..maxlen elements. */
int phx_json_array(struct json_object *obj, const char *what, const char *key, size_t maxlen,
		   struct json_object **out, int *present, char *err, size_t errlen);

/* Object field. */
int phx_json_object(struct json_object *obj, const char *what, const char *key,
		    struct json_object **out, char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx.yaml is written by people and read as root by the SPANK plugin:
 * any bytes must give a config or an error, never a crash or a leak. What
 * loads must also dump to a file that loads back to the same values.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "conf";

static int same_str(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static int same(const struct phx_conf *a, const struct phx_conf *b)
{
	return a->log_level == b->log_level && same_str(a->key_file, b->key_file) &&
	       same_str(a->state_dir, b->state_dir) && a->placement.mode == b->placement.mode &&
	       same_str(a->placement.topology_conf, b->placement.topology_conf) &&
	       a->isolation.mode == b->isolation.mode && a->health.enabled == b->health.enabled &&
	       a->health.drain_on_failure == b->health.drain_on_failure &&
	       a->health.timeout_s == b->health.timeout_s &&
	       same_str(a->ckptd.listen, b->ckptd.listen) &&
	       same_str(a->ckptd.address, b->ckptd.address) &&
	       same_str(a->ckptd.socket, b->ckptd.socket) &&
	       a->checkpoint.keep == b->checkpoint.keep &&
	       a->launcher.hang_timeout_s == b->launcher.hang_timeout_s &&
	       a->launcher.max_restarts == b->launcher.max_restarts;
}

static void round_trip(const struct phx_conf *conf)
{
	struct phx_conf back;
	char err[512], *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return;
	phx_conf_dump(conf, f);
	if (fclose(f) == 0) {
		if (phx_conf_load_buffer("dump", text, len, &back, err, sizeof(err)) < 0) {
			fprintf(stderr, "phalanx: fuzz: dump does not load: %s\n%s", err, text);
			abort();
		}
		if (!same(conf, &back)) {
			fprintf(stderr, "phalanx: fuzz: dump loads differently:\n%s", text);
			abort();
		}
		phx_conf_free(&back);
	}
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_conf conf;
	char err[512];

	if (phx_conf_load_buffer("fuzz", (const char *)data, size, &conf, err, sizeof(err)) == 0)
		round_trip(&conf);
	else if (strncmp(err, "fuzz", 4)) {
		/* Every message names the file. */
		fprintf(stderr, "phalanx: fuzz: message without the file name: %s\n", err);
		abort();
	}
	phx_conf_free(&conf);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layout specs come from users (--layout, --phx-layout) and are parsed by
 * the SPANK plugin inside srun: any bytes must give a layout or an error.
 * A layout that parses must format to a spec that parses back the same,
 * and resolved layouts must map ranks to coordinates and back.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/layout.h"
#include "placement/placement.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "layout";

static void check(int ok, const char *what, const char *spec)
{
	if (ok)
		return;
	fprintf(stderr, "phalanx: fuzz: %s for '%s'\n", what, spec);
	abort();
}

static void ranks(const struct phx_layout *l, const char *spec)
{
	unsigned long c[PHX_DIM_COUNT], step = l->world / 97 + 1;

	for (unsigned long r = 0; r < l->world; r += step) {
		phx_layout_coords(l, r, c);
		check(phx_layout_rank(l, c) == r, "rank round trip", spec);
	}
}

static void resolve(const struct phx_layout *parsed, const char *spec)
{
	static const unsigned long worlds[] = { 1, 8, 64, 96, 1024, 131072, 4194304 };
	char buf[256];

	for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++) {
		struct phx_layout l = *parsed, back;
		char err[512];

		if (phx_layout_resolve(&l, worlds[i], err, sizeof(err)) < 0)
			continue;
		check(l.world == worlds[i] && l.star < 0, "resolved world", spec);
		ranks(&l, spec);
		phx_layout_format(&l, buf, sizeof(buf));
		check(phx_layout_parse(buf, &back, err, sizeof(err)) == 0, "formatted spec refused",
		      spec);
		check(!memcmp(back.order, l.order, sizeof(l.order)), "order round trip", spec);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *spec = malloc(size + 1), err[512], buf[256];
	struct phx_layout l, back;
	struct phx_traffic t;

	if (!spec)
		return 0;
	memcpy(spec, data, size);
	spec[size] = '\0';
	if (phx_layout_parse(spec, &l, err, sizeof(err)) == 0) {
		phx_layout_format(&l, buf, sizeof(buf));
		check(phx_layout_parse(buf, &back, err, sizeof(err)) == 0, "formatted spec refused",
		      spec);
		check(back.star == l.star, "star round trip", spec);
		for (int d = 0; d < PHX_DIM_COUNT; d++)
			check(back.size[d] == l.size[d], "size round trip", spec);
		resolve(&l, spec);
	} else {
		check(err[0] != '\0', "error without a message", spec);
	}
	(void)phx_traffic_parse(spec, &t, err, sizeof(err));
	free(spec);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hwloc XML comes from other nodes and from files users pass; whatever
 * hwloc accepts must go through discovery, pairing and JSON without harm.
 */
#include "config.h"

#include <stdlib.h>

#include <json-c/json.h>

#include "placement/topo.h"
#include "tests/fuzz/fuzz.h"

const char phx_fuzz_corpus_name[] = "topo";

const char *__lsan_default_suppressions(void);

/*
 * hwloc 2.9 leaks the objects it has built when an XML import fails half
 * way (an unknown attribute, say); that is hwloc's to fix. Our own
 * allocations never pass through libhwloc and are still checked.
 */
const char *__lsan_default_suppressions(void)
{
	return "leak:libhwloc.so\n";
}

static void check(const struct phx_node_topo *t)
{
	size_t load = 0;

	for (size_t i = 0; i < t->ngpus; i++) {
		if (t->gpus[i].nic >= (int)t->nnics || t->gpus[i].vendor_id != 0x10de)
			abort();
	}
	for (size_t i = 0; i < t->nnics; i++)
		load += t->nics[i].ngpus;
	/* Every GPU is paired once, or none is (no RDMA NIC). */
	if (load != 0 && load != t->ngpus)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct phx_node_topo *t;
	struct json_object *j;
	char err[512];

	if (phx_topo_load_xmlbuffer((const char *)data, size, &t, err, sizeof(err)) < 0)
		return 0;
	check(t);
	if (phx_topo_to_json(t, &j) == 0) {
		if (!json_object_to_json_string(j))
			abort();
		json_object_put(j);
	}
	phx_topo_free(t);
	return 0;
}

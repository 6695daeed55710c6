/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx-check, the node side of 'phalanx check': measures this node's
 * GPUs (check_gpu.c) and its NCCL all-reduce with a partner node
 * (check_nccl.c); check.c runs the rounds over PMIx. What the numbers
 * mean is decided in health/preflight.c, not here.
 */
#ifndef PHX_CHECK_H
#define PHX_CHECK_H

#include <stddef.h>

#include "common/conf.h"
#include "health/preflight.h"

/* 128 bytes of ncclUniqueId as hex, and the NUL. */
#define PHX_NCCL_ID_HEX 257

/*
 * Tests every GPU CUDA sees into node->gpus; when there is none (no
 * driver, no device) node->error says why. Returns 0, -1 out of memory.
 */
int phx_gpu_check(const struct phx_conf *conf, struct phx_check_node *node);

/* A fresh NCCL id as hex; -1 with the reason in err. */
int phx_nccl_id(char *hex, size_t len, char *err, size_t errlen);

struct phx_nccl_pair {
	const char *id_hex; /* from the pair's first node */
	int nranks; /* GPUs of both nodes */
	int first_rank; /* this node's first rank */
	int ngpus; /* this node's GPUs: devices 0 .. ngpus - 1 */
	size_t bytes; /* per GPU and iteration */
	int timeout_s;
};

/* All-reduce between the GPUs of two nodes; fills link (status, busbw). */
void phx_nccl_run(const struct phx_nccl_pair *pair, struct phx_check_link *link);

#endif

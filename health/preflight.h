/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU and NCCL preflight checks: the part that decides. phalanx-check
 * measures each node of a step (GEMM against a known result and its
 * throughput, host<->device copy bandwidth, a memory test of a slice, NCCL
 * all-reduce with a partner node) and writes the measurements as JSON;
 * everything here works on those measurements only, so it runs the same
 * on live results and on results recorded on another cluster.
 *
 * NCCL pairs in two rounds pin down one bad node or link: round 1 pairs
 * neighbours; round 2 pairs each node of a slow (or hung) round-1 pair,
 * and each node left without a partner, with a distinct node of a fast
 * pair. A node slow with two partners is to blame; one that is fast with
 * its second partner is cleared, and a pair whose two nodes are both
 * cleared names the link between them.
 *
 * Callers (phalanx check, phalanx-launch --preflight, phalanx-ckptd):
 *
 *	struct phx_check_limits lim;
 *	struct phx_check_results res;
 *	struct phx_check_verdict *v;
 *
 *	phx_check_limits_from_conf(conf, &lim);
 *	phx_check_run(hosts, n, conf, NULL, &res, err, len);	(live, srun)
 *	   or phx_check_results_load(path, &res, err, len);	(recorded)
 *	v = calloc(res.n, sizeof(*v));
 *	phx_check_judge(&res, &lim, v);
 *	phx_check_decide(v, res.n, &decision);	(exclude / slow lists)
 *	phx_check_drain(v, res.n, &lim, &drained);	(optional)
 *
 * phx_check_verdicts() does the first four steps of the live path in one
 * call. decision.slow goes to struct phx_place_input.slow (placement keeps
 * slow nodes off the critical path); decision.exclude are the nodes not to
 * run on (the driver's spares replace them).
 */
#ifndef PHX_PREFLIGHT_H
#define PHX_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/conf.h"

struct json_object;

#define PHX_CHECK_VERSION 1
#define PHX_CHECK_NAME 64 /* node and GPU names, NUL included */
#define PHX_CHECK_TEXT 256 /* errors and reasons, NUL included */
#define PHX_CHECK_MAX_GPUS 256 /* per node */
#define PHX_CHECK_MAX_NODES 65536
#define PHX_CHECK_ROUNDS 2

/* One device of one node. error != "" means the test could not run. */
struct phx_check_gpu {
	int index;
	char name[PHX_CHECK_NAME];
	char error[PHX_CHECK_TEXT];
	bool gemm_ok; /* every checked element matched the known result */
	double gemm_tflops;
	double h2d_gbps, d2h_gbps;
	unsigned memtest_mib; /* size of the slice tested */
	uint64_t memtest_errors; /* words that read back wrong */
};

enum phx_link_status { PHX_LINK_OK, PHX_LINK_TIMEOUT, PHX_LINK_ERROR };

/* One NCCL all-reduce with a partner, as this node measured it. */
struct phx_check_link {
	int round; /* 1 or 2 */
	char peer[PHX_CHECK_NAME];
	enum phx_link_status status;
	double busbw_gbps; /* NCCL bus bandwidth; 0 unless status is OK */
	char error[PHX_CHECK_TEXT];
};

struct phx_check_node {
	char name[PHX_CHECK_NAME];
	char error[PHX_CHECK_TEXT]; /* "" = measured; else why not (no GPU, ...) */
	struct phx_check_gpu *gpus;
	size_t n_gpus;
	struct phx_check_link links[PHX_CHECK_ROUNDS];
	size_t n_links;
};

struct phx_check_results {
	struct phx_check_node *nodes;
	size_t n;
};

/* Thresholds, from the check section of phalanx.yaml. 0 = not checked. */
struct phx_check_limits {
	double gemm_tflops_min;
	double copy_gbps_min; /* both directions */
	double busbw_gbps_min;
	double slow_fraction; /* below (1 - this) x the median is slow */
	bool drain_slow; /* --drain also drains slow nodes, not only failed ones */
};

/* SUSPECT: a slow pair that round 2 could not resolve (too few fast nodes). */
enum phx_check_state { PHX_CHECK_OK, PHX_CHECK_SUSPECT, PHX_CHECK_SLOW, PHX_CHECK_FAILED };

struct phx_check_verdict {
	char node[PHX_CHECK_NAME];
	enum phx_check_state state;
	char reason[PHX_CHECK_TEXT]; /* the measurement that decided; "" when OK */
	char note[PHX_CHECK_TEXT]; /* e.g. a slow link cleared on both ends */
	char bad_link[PHX_CHECK_NAME]; /* the peer of a bad link whose two ends are fine */
};

/* What the launcher and placement take from verdicts; names point into them. */
struct phx_check_decision {
	const char **exclude; /* FAILED: do not run on these */
	size_t n_exclude;
	const char **slow; /* SLOW and SUSPECT: struct phx_place_input.slow */
	size_t n_slow;
};

const char *phx_check_state_name(enum phx_check_state state);
const char *phx_link_status_name(enum phx_link_status status);
void phx_check_limits_from_conf(const struct phx_conf *conf, struct phx_check_limits *lim);

/* ------------------------------------------------ results (JSON) */

/*
 * Parses a results document {"phalanx_check": 1, "nodes": [NODE, ...]}
 * (a top-level "verdicts" array, as --json writes, is ignored) or a single
 * NODE object. Strict: unknown keys, wrong types, out-of-range numbers and
 * duplicate node names are refused with the path of the bad value.
 */
int phx_check_results_parse(const char *buf, size_t len, struct phx_check_results *out, char *err,
			    size_t errlen);
int phx_check_results_load(const char *path, struct phx_check_results *out, char *err,
			   size_t errlen);
/* Parses one NODE object (as phalanx-check writes it) into node. */
int phx_check_node_from_json(struct json_object *obj, struct phx_check_node *node, char *err,
			     size_t errlen);
struct json_object *phx_check_node_to_json(const struct phx_check_node *node);
/* The results document; verdicts may be NULL. */
struct json_object *phx_check_results_to_json(const struct phx_check_results *res,
					      const struct phx_check_verdict *verdicts);
void phx_check_node_free(struct phx_check_node *node);
void phx_check_results_free(struct phx_check_results *res);
/* Appends a copy of node (moved: node's arrays now belong to res). */
int phx_check_results_add(struct phx_check_results *res, struct phx_check_node *node);

/* ------------------------------------------------ pairing and judging */

/* True when a node can join the NCCL rounds: no node error, every GPU tested. */
bool phx_check_node_usable(const struct phx_check_node *node);
/*
 * The NCCL partners of a round: partner[i] is the index of node i's
 * partner, or -1 (no partner this round). Round 1 uses the GPU results
 * only; round 2 also the round-1 links. Every node computes the same
 * pairs from the same results. Returns how many pairs, -1 on a bad round.
 */
int phx_check_pairs(const struct phx_check_results *res, int round,
		    const struct phx_check_limits *lim, long *partner);
/* The median round-1 bus bandwidth of the links that finished, 0 if none. */
double phx_check_link_median(const struct phx_check_results *res);
/* True when link is a timeout, an error or below the link threshold. */
bool phx_check_link_bad(const struct phx_check_link *link, const struct phx_check_limits *lim,
			double median);
/* Judges every node; verdicts[i] is about res->nodes[i]. */
void phx_check_judge(const struct phx_check_results *res, const struct phx_check_limits *lim,
		     struct phx_check_verdict *verdicts);
/* Worst state among verdicts; the exit status of phalanx check follows it. */
enum phx_check_state phx_check_worst(const struct phx_check_verdict *v, size_t n);
int phx_check_decide(const struct phx_check_verdict *v, size_t n, struct phx_check_decision *d);
void phx_check_decision_free(struct phx_check_decision *d);

/* ------------------------------------------------ running and draining */

struct phx_check_run_opts {
	const char *program; /* phalanx-check; NULL = next to this program */
	const char *config; /* passed to the node side; NULL = default path */
	int timeout_s; /* whole step; 0 = from conf */
};

/*
 * Runs phalanx-check on hosts as one Slurm step (srun --mpi=pmix, one task
 * per node) inside the current allocation and collects every node's
 * results. A node missing from what the step returned gets an error
 * saying so. Returns 0, or -1 when the step could not run at all.
 */
int phx_check_run(char *const *hosts, size_t n, const struct phx_conf *conf,
		  const struct phx_check_run_opts *opts, struct phx_check_results *out, char *err,
		  size_t errlen);
/*
 * For the launcher (--preflight) and the daemon: phx_check_run, then
 * phx_check_judge with the thresholds of conf. *verdicts (malloc'd, one
 * per host in hosts' order) is what phx_check_decide and phx_check_drain
 * take. Returns 0, or -1 when the step gave no results (err says why).
 */
int phx_check_verdicts(char *const *hosts, size_t n, const struct phx_conf *conf,
		       const struct phx_check_run_opts *opts, struct phx_check_verdict **verdicts,
		       char *err, size_t errlen);
/*
 * Drains the FAILED nodes (and SLOW ones when lim->drain_slow) through
 * libslurm with reason "phalanx: check: REASON". Returns how many could
 * not be drained; drained counts the others.
 */
int phx_check_drain(const struct phx_check_verdict *v, size_t n, const struct phx_check_limits *lim,
		    size_t *drained);
/* Whether --drain would drain a node with this verdict. */
bool phx_check_should_drain(const struct phx_check_verdict *v, const struct phx_check_limits *lim);

#endif

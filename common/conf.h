/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx.yaml: the site configuration read by the plugin, the launcher,
 * the daemon and the CLI. Strict: an unknown key, a wrong type or a bad
 * value is refused with "FILE:LINE:COL: key 'a.b': reason". Defaults and
 * every key are documented in phalanx.yaml(5).
 */
#ifndef PHX_CONF_H
#define PHX_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/log.h"

#define PHX_CONF_DEFAULT_PATH PHX_SYSCONFDIR "/phalanx/phalanx.yaml"

enum phx_place_mode { PHX_PLACE_TOPO, PHX_PLACE_BLOCK, PHX_PLACE_OFF };
enum phx_isolate_mode { PHX_ISOLATE_JOB, PHX_ISOLATE_TASK, PHX_ISOLATE_OFF };
/* A boolean that may also be left to detection: "auto", true, false. */
enum phx_tristate { PHX_TRI_AUTO, PHX_TRI_TRUE, PHX_TRI_FALSE };

/* A list of strings from a YAML sequence; items[n] is NULL. */
struct phx_strlist {
	char **items;
	size_t n;
};

/* Where a value other than the site file's came from ("--keep", "FILE:LINE"). */
struct phx_conf_origin {
	char *key, *where;
};

struct phx_conf {
	char *source; /* file the values came from, NULL for built-in defaults */
	enum phx_log_level log_level;
	char *key_file;
	char *state_dir;
	struct {
		enum phx_place_mode mode;
		char *topology_conf;
		char *hwloc_xml; /* "" = discover the node; may hold %n */
	} placement;
	struct {
		enum phx_isolate_mode mode;
		bool allow_off; /* users may pick --phx-isolate=off */
		char *proc_root; /* driver/nvidia/gpus is read below it */
	} isolation;
	struct {
		bool enabled;
		bool drain_on_failure;
		int timeout_s;
		char *gpu_device; /* pattern with one %u; "" = not checked */
		int gpu_count; /* GPUs every node must have; 0 = not checked */
		enum phx_tristate ib;
		int ib_min_rate_gbps; /* 0 = rate not checked */
		int min_free_gb; /* GiB free on each of paths; 0 = not checked */
		struct phx_strlist paths; /* may hold %u (uid) and %j (job id) */
		char *command; /* site program and arguments; "" = none */
		char *sysfs_root; /* may hold %n (node name) */
		char *dev_root; /* may hold %n */
	} health;
	struct {
		char *listen;
		char *address;
		char *socket;
		char *munge_socket; /* "" = libmunge's default */
		char *metrics; /* HOST:PORT of the metrics endpoint; "" = none */
		int interval; /* enum phx_ckpt_interval_mode */
		int interval_steps;
		int interval_seconds;
		int node_mtbf_hours; /* prior for auto before failures are seen */
		int max_ranks_per_user; /* over the user's jobs with agents connected */
	} ckptd;
	struct {
		int keep;
		int interval; /* steps between saves; 0 = only when asked */
		char *local_dir; /* node-local tier; %j %n %u; "" = none */
		int local_every; /* persist every Nth save there */
		char *shared_dir; /* shared file system tier; %j %u; "" = none */
		int shared_every;
		int digest_algo; /* enum phx_digest_algo: 0 xxh3-128, 1 sha256 */
		int digest_threads; /* 0 = one per CPU */
		bool partner; /* copy local-tier shards to a partner node */
	} checkpoint;
	struct {
		bool act; /* drain, requeue and stop through Slurm */
		int heartbeat_ms; /* agents' heartbeat period */
		int lost_after_ms; /* silence that makes an agent lost */
		int slurm_poll_s;
		int user_error_repeats;
		int drain_after;
		int fault_window_s;
		int max_requeues;
		int too_few_nodes; /* enum phx_too_few: wait or stop */
	} recovery;
	struct {
		int hang_timeout_s;
		int peer_timeout_ms; /* agent silent this long: its node is lost; 0: off */
		int max_restarts;
		int spares; /* driver mode */
		int max_relaunches;
		int same_failure_limit;
		bool drain_bad_nodes;
		bool preflight; /* driver: GPU/NCCL check of nodes before they run a step */
		int straggler_threshold; /* percent slower than the role's median; 0: off */
		int straggler_window_s;
		int straggler_min_steps;
		char *kernel_log; /* watched for Xid errors; %n; "" = off */
		bool log_time; /* the launcher's lines carry the time */
	} launcher;
	struct {
		int gemm_tflops_min; /* 0 = only relative to the median */
		int copy_gbps_min;
		int busbw_gbps_min;
		int slow_percent; /* this much below the median is slow */
		bool drain_slow;
		int timeout_s; /* the whole check step */
		int nccl_timeout_s; /* one all-reduce round */
		int memtest_mib;
		int gemm_size;
		int nccl_mib;
	} check;
	struct {
		struct phx_strlist settable; /* keys a user's own phalanx.yaml may set */
	} users;
	bool has_fabric; /* a 'fabric:' section is present, for phx_fabric_load() */
	struct phx_conf_origin *origins; /* over the site's, latest last */
	size_t norigins;
};

const char *phx_place_mode_name(enum phx_place_mode mode);
const char *phx_isolate_mode_name(enum phx_isolate_mode mode);
const char *phx_tristate_name(enum phx_tristate v);
int phx_place_mode_parse(const char *s, enum phx_place_mode *mode);
int phx_isolate_mode_parse(const char *s, enum phx_isolate_mode *mode);

/*
 * Sets one key (its full name, "checkpoint.keep") to value as a plain YAML
 * scalar with the same checks as in a file; origin names where it came
 * from in err ("--keep"). 0, or -1 with conf unchanged.
 */
int phx_conf_override(struct phx_conf *conf, const char *key, const char *value, const char *origin,
		      char *err, size_t errlen);

/*
 * A user's own phalanx.yaml: $PHALANX_USER_CONFIG ("" for none), else
 * $XDG_CONFIG_HOME/phalanx/phalanx.yaml, else ~/.config/phalanx/phalanx.yaml.
 * 0 with the path in buf, -1 when there is none to name.
 */
int phx_conf_user_path(char *buf, size_t len);

/*
 * Layers the user's file at path over conf, for what runs as the user (the
 * launcher, the CLI): only the keys the site lists in users.settable, and
 * never one of the site's own (isolation, health, keys, the daemon's). A
 * missing file is no error. 0, or -1 with err naming the file, line and
 * key; conf may then hold some of the file's values.
 */
int phx_conf_load_user(struct phx_conf *conf, const char *path, char *err, size_t errlen);

/* Fills in the documented defaults; returns 0 or -1 (out of memory). */
int phx_conf_defaults(struct phx_conf *conf);
/* Defaults, then the file. On error conf holds defaults only and err says why. */
int phx_conf_load_file(const char *path, struct phx_conf *conf, char *err, size_t errlen);
int phx_conf_load_buffer(const char *name, const char *buf, size_t len, struct phx_conf *conf,
			 char *err, size_t errlen);
/*
 * Prints the effective configuration as valid phalanx.yaml; a value that
 * did not come from the site's file says where it came from.
 */
void phx_conf_dump(const struct phx_conf *conf, FILE *out);
void phx_conf_free(struct phx_conf *conf);
/*
 * The Slurm topology.conf to read: placement.topology_conf, else the one
 * beside slurm.conf ($SLURM_CONF or /etc/slurm) when it exists, else NULL.
 */
const char *phx_conf_topology_conf(const struct phx_conf *conf, char *buf, size_t len);

#endif

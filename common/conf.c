/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phalanx.yaml loader. The schema is one table: a key is added by adding a
 * row (and a field to struct phx_conf, a paragraph to phalanx.yaml(5) and a
 * line to etc/phalanx.yaml). Values are read into a scratch struct and only
 * copied out when the whole file is good, so a bad file never half-applies.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libgen.h>

#include "common/log.h"
#include "common/conf.h"
#include "common/yaml.h"

enum key_type {
	K_ENUM,
	K_BOOL,
	K_INT,
	K_SECONDS, /* a duration (phx_duration_parse()), held as int seconds */
	K_PATH, /* absolute path */
	K_HOSTPORT, /* HOST:PORT */
	K_TRISTATE, /* a boolean or "auto" */
	K_PATHLIST, /* a list of absolute paths */
	K_KEYLIST, /* a list of this table's key names */
	K_SKIP, /* accepted, read by another module */
};

#define K_EMPTY_OK 0x1 /* "" is allowed and means "not set" */
/* Path patterns: the % escapes allowed in the value ("%%" always is). */
#define K_FMT_U 0x2 /* %u: a number (uid, GPU index) */
#define K_FMT_J 0x4 /* %j: the job id */
#define K_FMT_N 0x8 /* %n: the node name */
#define K_ONE_U 0x10 /* exactly one %u */

struct conf_key {
	const char *name;
	enum key_type type;
	size_t offset;
	long long min, max; /* K_INT, K_SECONDS: range; strings: max length */
	const char *const *choices; /* K_ENUM, NULL-terminated */
	const char *def; /* default, as written in YAML */
	unsigned flags;
	const char *doc;
};

#define OFF(field) offsetof(struct phx_conf, field)
#define FIELD(conf, row, type) ((type *)(void *)((char *)(conf) + (row)->offset))
#define PATH_LEN 4095
/* sockaddr_un.sun_path holds 108 bytes with the NUL. */
#define SOCKET_PATH_LEN 107
#define NAME_LEN 128

static const char *const level_names[] = { "error", "warn", "info", "debug", NULL };
static const char *const place_names[] = { "topo", "block", "off", NULL };
static const char *const isolate_names[] = { "job", "task", "off", NULL };
static const char *const interval_names[] = { "auto", "steps", "seconds", NULL };
static const char *const tristate_names[] = { "auto", "true", "false", NULL };
static const char *const digest_names[] = { "xxh3-128", "sha256", NULL };
/* enum phx_too_few (common/requeue.h) */
static const char *const too_few_names[] = { "wait", "stop", NULL };

_Static_assert(sizeof(enum phx_log_level) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum phx_place_mode) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum phx_isolate_mode) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum phx_tristate) == sizeof(int), "enums are stored as int");

/* Rows of one section stay together: the dump and the key lists rely on it. */
static const struct conf_key keys[] = {
	{ "log_level", K_ENUM, OFF(log_level), 0, 0, level_names, "info", 0,
	  "least severe message logged: error, warn, info or debug" },
	{ "key_file", K_PATH, OFF(key_file), 0, PATH_LEN, NULL, "/etc/phalanx/key", 0,
	  "secret for job tokens, made by 'phalanx keygen'" },
	{ "state_dir", K_PATH, OFF(state_dir), 0, PATH_LEN, NULL, "/var/lib/phalanx", 0,
	  "where phalanx-ckptd keeps its state" },
	{ "placement.mode", K_ENUM, OFF(placement.mode), 0, 0, place_names, "topo", 0,
	  "rank placement: topo, block or off" },
	{ "placement.topology_conf", K_PATH, OFF(placement.topology_conf), 0, PATH_LEN, NULL, "",
	  K_EMPTY_OK, "Slurm topology.conf to read; \"\" = the one next to slurm.conf" },
	{ "placement.hwloc_xml", K_PATH, OFF(placement.hwloc_xml), 0, PATH_LEN, NULL, "",
	  K_EMPTY_OK | K_FMT_N,
	  "node topology from this hwloc XML instead of the hardware; %n = node name" },
	{ "isolation.mode", K_ENUM, OFF(isolation.mode), 0, 0, isolate_names, "job", 0,
	  "GPU isolation: job, task or off" },
	{ "isolation.allow_off", K_BOOL, OFF(isolation.allow_off), 0, 0, NULL, "false", 0,
	  "let users turn isolation off with --phx-isolate=off" },
	{ "isolation.proc_root", K_PATH, OFF(isolation.proc_root), 0, PATH_LEN, NULL, "/proc", 0,
	  "where driver/nvidia/gpus is read from (tests)" },
	{ "health.enabled", K_BOOL, OFF(health.enabled), 0, 0, NULL, "true", 0,
	  "run node health checks in the job prolog" },
	{ "health.drain_on_failure", K_BOOL, OFF(health.drain_on_failure), 0, 0, NULL, "true", 0,
	  "drain a node that fails a check" },
	{ "health.timeout", K_SECONDS, OFF(health.timeout_s), 1, 3600, NULL, "30", 0,
	  "seconds the checks may take" },
	{ "health.gpu_device", K_PATH, OFF(health.gpu_device), 0, PATH_LEN, NULL, "/dev/nvidia%u",
	  K_EMPTY_OK | K_FMT_U | K_ONE_U,
	  "device file of GPU %u, checked for each GPU of the job; \"\" = not checked" },
	{ "health.gpu_count", K_INT, OFF(health.gpu_count), 0, 1024, NULL, "0", 0,
	  "GPU device files every node must have; 0 = not checked" },
	{ "health.ib", K_TRISTATE, OFF(health.ib), 0, 0, tristate_names, "auto", 0,
	  "check InfiniBand ports: true, false or auto (when the node has any)" },
	{ "health.ib_min_rate_gbps", K_INT, OFF(health.ib_min_rate_gbps), 0, 100000, NULL, "0", 0,
	  "lowest InfiniBand port rate in Gb/s; 0 = rate not checked" },
	{ "health.min_free_gb", K_INT, OFF(health.min_free_gb), 0, 1000000000, NULL, "0", 0,
	  "GiB that must be free on each of health.paths; 0 = not checked" },
	{ "health.paths", K_PATHLIST, OFF(health.paths), 0, PATH_LEN, NULL, NULL, K_FMT_U | K_FMT_J,
	  "checkpoint paths whose free space is checked; %u = uid, %j = job id" },
	{ "health.command", K_PATH, OFF(health.command), 0, PATH_LEN, NULL, "", K_EMPTY_OK,
	  "site program (and arguments) run as root; non-zero exit fails the node" },
	{ "health.sysfs_root", K_PATH, OFF(health.sysfs_root), 0, PATH_LEN, NULL, "/sys", K_FMT_N,
	  "where sysfs is read from; %n = node name (tests)" },
	{ "health.dev_root", K_PATH, OFF(health.dev_root), 0, PATH_LEN, NULL, "/", K_FMT_N,
	  "prefix of device file paths; %n = node name (tests)" },
	{ "ckptd.listen", K_HOSTPORT, OFF(ckptd.listen), 0, 255, NULL, "0.0.0.0:7720", 0,
	  "HOST:PORT phalanx-ckptd listens on" },
	{ "ckptd.address", K_HOSTPORT, OFF(ckptd.address), 0, 255, NULL, "", K_EMPTY_OK,
	  "HOST:PORT jobs reach phalanx-ckptd at; \"\" = not used" },
	{ "ckptd.socket", K_PATH, OFF(ckptd.socket), 0, SOCKET_PATH_LEN, NULL,
	  "/run/phalanx/ckptd.sock", 0, "local socket of phalanx-ckptd" },
	{ "ckptd.munge_socket", K_PATH, OFF(ckptd.munge_socket), 0, SOCKET_PATH_LEN, NULL, "",
	  K_EMPTY_OK, "munged's socket for queries over TCP; \"\" = libmunge's default" },
	{ "ckptd.metrics", K_HOSTPORT, OFF(ckptd.metrics), 0, 255, NULL, "127.0.0.1:7721",
	  K_EMPTY_OK, "HOST:PORT of phalanx-ckptd's Prometheus metrics; \"\" = none" },
	{ "ckptd.interval", K_ENUM, OFF(ckptd.interval), 0, 0, interval_names, "auto", 0,
	  "checkpoint interval for jobs that ask: auto (Young/Daly), steps or seconds" },
	{ "ckptd.interval_steps", K_INT, OFF(ckptd.interval_steps), 1, 1000000000, NULL, "1000", 0,
	  "training steps between saves when ckptd.interval is steps" },
	{ "ckptd.interval_seconds", K_SECONDS, OFF(ckptd.interval_seconds), 1, 604800, NULL, "1800",
	  0, "seconds between saves when ckptd.interval is seconds" },
	{ "ckptd.node_mtbf_hours", K_INT, OFF(ckptd.node_mtbf_hours), 1, 10000000, NULL, "5000", 0,
	  "mean time between failures of one node, before any failure is seen" },
	{ "ckptd.max_ranks_per_user", K_INT, OFF(ckptd.max_ranks_per_user), 1, 16777216, NULL,
	  "262144", 0, "ranks the running jobs of one user may register at once" },
	{ "recovery.act", K_BOOL, OFF(recovery.act), 0, 0, NULL, "true", 0,
	  "phalanx-ckptd drains, requeues and stops jobs through Slurm; false = detect and "
	  "account only" },
	{ "recovery.heartbeat_ms", K_INT, OFF(recovery.heartbeat_ms), 100, 60000, NULL, "500", 0,
	  "milliseconds between an agent's heartbeats to phalanx-ckptd" },
	{ "recovery.lost_after_ms", K_INT, OFF(recovery.lost_after_ms), 300, 600000, NULL, "2000",
	  0, "milliseconds without a heartbeat after which an agent's node is lost" },
	{ "recovery.slurm_poll", K_SECONDS, OFF(recovery.slurm_poll_s), 1, 3600, NULL, "5", 0,
	  "seconds between phalanx-ckptd's looks at a job and its nodes in Slurm" },
	{ "recovery.user_error_repeats", K_INT, OFF(recovery.user_error_repeats), 1, 1000, NULL,
	  "2", 0, "the same crash signature this many times is a user error: the job stops" },
	{ "recovery.drain_after", K_INT, OFF(recovery.drain_after), 1, 1000, NULL, "2", 0,
	  "node faults within recovery.fault_window that drain the node" },
	{ "recovery.fault_window", K_SECONDS, OFF(recovery.fault_window_s), 1, 31536000, NULL,
	  "86400", 0, "seconds over which a node's faults are counted" },
	{ "recovery.max_requeues", K_INT, OFF(recovery.max_requeues), 0, 1000, NULL, "3", 0,
	  "requeues of one job before phalanx-ckptd gives up on it" },
	{ "recovery.too_few_nodes", K_ENUM, OFF(recovery.too_few_nodes), 0, 0, too_few_names,
	  "wait", 0,
	  "a requeue that would leave too few usable nodes: wait (for DOWN or drained nodes to "
	  "return) or stop the job" },
	{ "checkpoint.keep", K_INT, OFF(checkpoint.keep), 1, 1000, NULL, "3", 0,
	  "committed checkpoint generations kept per job and tier" },
	{ "checkpoint.interval", K_INT, OFF(checkpoint.interval), 0, 100000000, NULL, "0", 0,
	  "training steps between saves (phx_should_save); 0 = only when the agent asks" },
	{ "checkpoint.local_dir", K_PATH, OFF(checkpoint.local_dir), 0, PATH_LEN, NULL, "",
	  K_EMPTY_OK | K_FMT_U | K_FMT_J | K_FMT_N,
	  "node-local directory tier; %u = uid, %j = job id, %n = node; \"\" = none" },
	{ "checkpoint.local_every", K_INT, OFF(checkpoint.local_every), 1, 1000000, NULL, "1", 0,
	  "persist every Nth save to checkpoint.local_dir" },
	{ "checkpoint.shared_dir", K_PATH, OFF(checkpoint.shared_dir), 0, PATH_LEN, NULL, "",
	  K_EMPTY_OK | K_FMT_U | K_FMT_J,
	  "shared file system tier, the same path on every node; \"\" = none" },
	{ "checkpoint.shared_every", K_INT, OFF(checkpoint.shared_every), 1, 1000000, NULL, "10", 0,
	  "persist every Nth save to checkpoint.shared_dir" },
	{ "checkpoint.digest", K_ENUM, OFF(checkpoint.digest_algo), 0, 0, digest_names, "xxh3-128",
	  0, "shard checksum: xxh3-128 (fast) or sha256" },
	{ "checkpoint.digest_threads", K_INT, OFF(checkpoint.digest_threads), 0, 256, NULL, "0", 0,
	  "threads that checksum one shard; 0 = one per CPU" },
	{ "checkpoint.partner", K_BOOL, OFF(checkpoint.partner), 0, 0, NULL, "true", 0,
	  "copy each shard saved to checkpoint.local_dir to a partner node" },
	{ "launcher.hang_timeout", K_SECONDS, OFF(launcher.hang_timeout_s), 10, 86400, NULL, "600",
	  0, "seconds without a heartbeat before ranks count as hung" },
	{ "launcher.peer_timeout_ms", K_INT, OFF(launcher.peer_timeout_ms), 0, 600000, NULL, "600",
	  0, "milliseconds without an agent's beats before its node counts as lost; 0 = off" },
	{ "launcher.max_restarts", K_INT, OFF(launcher.max_restarts), 0, 1000, NULL, "3", 0,
	  "in-job restarts before the launcher gives up" },
	{ "launcher.spares", K_INT, OFF(launcher.spares), 0, 100000, NULL, "0", 0,
	  "nodes of an allocation the driver holds back for relaunches" },
	{ "launcher.max_relaunches", K_INT, OFF(launcher.max_relaunches), 0, 1000, NULL, "3", 0,
	  "relaunches of a step by the driver before it gives up" },
	{ "launcher.same_failure_limit", K_INT, OFF(launcher.same_failure_limit), 1, 1000, NULL,
	  "2", 0, "the same worker failure this many times in a row is not retried" },
	{ "launcher.drain_bad_nodes", K_BOOL, OFF(launcher.drain_bad_nodes), 0, 0, NULL, "false", 0,
	  "the driver drains nodes it found bad (Slurm operator rights)" },
	{ "launcher.straggler_threshold", K_INT, OFF(launcher.straggler_threshold), 0, 100000, NULL,
	  "100", 0,
	  "percent by which a rank's step time exceeds its role's median to be a straggler; "
	  "0 = off" },
	{ "launcher.straggler_window", K_SECONDS, OFF(launcher.straggler_window_s), 1, 86400, NULL,
	  "30", 0, "seconds of steps a rank's step time is measured over" },
	{ "launcher.straggler_min_steps", K_INT, OFF(launcher.straggler_min_steps), 1, 1000000,
	  NULL, "5", 0, "steps in the window before a rank's step time counts" },
	{ "launcher.preflight", K_BOOL, OFF(launcher.preflight), 0, 0, NULL, "false", 0,
	  "the driver checks GPUs and NCCL of nodes before they run a step (phalanx check)" },
	{ "launcher.log_time", K_BOOL, OFF(launcher.log_time), 0, 0, NULL, "false", 0,
	  "whether phalanx-launch's lines carry the local time (--log-time)" },
	{ "launcher.kernel_log", K_PATH, OFF(launcher.kernel_log), 0, PATH_LEN, NULL, "/dev/kmsg",
	  K_EMPTY_OK | K_FMT_N, "where agents watch for GPU Xid errors; %n = node; \"\" = off" },
	{ "check.gemm_tflops_min", K_INT, OFF(check.gemm_tflops_min), 0, 1000000, NULL, "0", 0,
	  "lowest GEMM TFLOP/s of a GPU; 0 = only against the median" },
	{ "check.copy_gbps_min", K_INT, OFF(check.copy_gbps_min), 0, 100000, NULL, "0", 0,
	  "lowest host<->device copy GB/s; 0 = only against the median" },
	{ "check.busbw_gbps_min", K_INT, OFF(check.busbw_gbps_min), 0, 100000, NULL, "0", 0,
	  "lowest NCCL all-reduce bus GB/s of a pair; 0 = only against the median" },
	{ "check.slow_percent", K_INT, OFF(check.slow_percent), 1, 90, NULL, "20", 0,
	  "a measurement this many percent below the median is slow" },
	{ "check.drain_slow", K_BOOL, OFF(check.drain_slow), 0, 0, NULL, "true", 0,
	  "--drain also drains slow nodes, not only failed ones" },
	{ "check.timeout", K_SECONDS, OFF(check.timeout_s), 10, 86400, NULL, "600", 0,
	  "seconds the whole check step may take" },
	{ "check.nccl_timeout", K_SECONDS, OFF(check.nccl_timeout_s), 1, 3600, NULL, "60", 0,
	  "seconds one NCCL pair may take before it counts as hung" },
	{ "check.memtest_mib", K_INT, OFF(check.memtest_mib), 0, 1048576, NULL, "1024", 0,
	  "MiB of each GPU's memory written and read back; 0 = no memory test" },
	{ "check.gemm_size", K_INT, OFF(check.gemm_size), 256, 32768, NULL, "8192", 0,
	  "order of the square matrices multiplied" },
	{ "check.nccl_mib", K_INT, OFF(check.nccl_mib), 1, 16384, NULL, "256", 0,
	  "MiB each GPU all-reduces per NCCL iteration" },
	{ "users.settable", K_KEYLIST, OFF(users.settable), 0, NAME_LEN, NULL,
	  "log_level,checkpoint.keep,checkpoint.interval,checkpoint.shared_dir,"
	  "checkpoint.shared_every,checkpoint.local_every,checkpoint.digest,"
	  "launcher.hang_timeout,launcher.peer_timeout_ms,launcher.max_restarts,"
	  "launcher.max_relaunches,"
	  "launcher.same_failure_limit,launcher.straggler_threshold,"
	  "launcher.straggler_window,launcher.straggler_min_steps,launcher.preflight,"
	  "launcher.log_time",
	  0, "keys a user's own phalanx.yaml may set" },
	/* Read by placement/fabric.c from the same tree; described in phalanx-plan(1). */
	{ "fabric", K_SKIP, 0, 0, 0, NULL, NULL, 0, "fabric description" },
};

/*
 * The site's alone, whatever users.settable says: what fences jobs in,
 * keeps nodes healthy, holds the cluster key or runs as root.
 */
static bool site_only(const char *name)
{
	static const char *const prefixes[] = { "isolation.", "health.", "ckptd.",
						"recovery.",  "users.",	 NULL };
	static const char *const names[] = { "key_file",
					     "state_dir",
					     "fabric",
					     "placement.topology_conf",
					     "placement.hwloc_xml",
					     "launcher.kernel_log",
					     "launcher.drain_bad_nodes",
					     "check.drain_slow",
					     NULL };

	for (int i = 0; prefixes[i]; i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return true;
	for (int i = 0; names[i]; i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

static int name_index(const char *const *names, const char *s)
{
	for (int i = 0; s && names[i]; i++) {
		if (!strcmp(s, names[i]))
			return i;
	}
	return -1;
}

const char *phx_place_mode_name(enum phx_place_mode mode)
{
	return mode >= PHX_PLACE_TOPO && mode <= PHX_PLACE_OFF ? place_names[mode] : "unknown";
}

const char *phx_isolate_mode_name(enum phx_isolate_mode mode)
{
	return mode >= PHX_ISOLATE_JOB && mode <= PHX_ISOLATE_OFF ? isolate_names[mode] : "unknown";
}

const char *phx_tristate_name(enum phx_tristate v)
{
	return v >= PHX_TRI_AUTO && v <= PHX_TRI_FALSE ? tristate_names[v] : "unknown";
}

int phx_place_mode_parse(const char *s, enum phx_place_mode *mode)
{
	int i = name_index(place_names, s);

	if (i < 0)
		return -1;
	*mode = (enum phx_place_mode)i;
	return 0;
}

int phx_isolate_mode_parse(const char *s, enum phx_isolate_mode *mode)
{
	int i = name_index(isolate_names, s);

	if (i < 0)
		return -1;
	*mode = (enum phx_isolate_mode)i;
	return 0;
}

static bool is_string(const struct conf_key *k)
{
	return k->type == K_PATH || k->type == K_HOSTPORT;
}

static void strlist_free(struct phx_strlist *list)
{
	for (size_t i = 0; list->items && i < list->n; i++)
		free(list->items[i]);
	free(list->items);
	list->items = NULL;
	list->n = 0;
}

void phx_conf_free(struct phx_conf *conf)
{
	if (!conf)
		return;
	for (size_t i = 0; i < N_KEYS; i++) {
		if (is_string(&keys[i]))
			free(*FIELD(conf, &keys[i], char *));
		if (keys[i].type == K_PATHLIST || keys[i].type == K_KEYLIST)
			strlist_free(FIELD(conf, &keys[i], struct phx_strlist));
	}
	for (size_t i = 0; i < conf->norigins; i++) {
		free(conf->origins[i].key);
		free(conf->origins[i].where);
	}
	free(conf->origins);
	free(conf->source);
	memset(conf, 0, sizeof(*conf));
}

/* A K_KEYLIST default, "a,b,c", as a list. */
static int split_default(const char *def, struct phx_strlist *list)
{
	size_t n = 1;

	for (const char *c = def; *c; c++)
		n += *c == ',';
	list->items = calloc(n + 1, sizeof(*list->items));
	if (!list->items)
		return -1;
	for (const char *c = def; *c;) {
		size_t len = strcspn(c, ",");

		list->items[list->n] = strndup(c, len);
		if (!list->items[list->n])
			return -1;
		list->n++;
		c += len + (c[len] == ',');
	}
	return 0;
}

int phx_conf_defaults(struct phx_conf *conf)
{
	memset(conf, 0, sizeof(*conf));
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct conf_key *k = &keys[i];

		switch (k->type) {
		case K_ENUM:
		case K_TRISTATE:
			*FIELD(conf, k, int) = name_index(k->choices, k->def);
			break;
		case K_BOOL:
			*FIELD(conf, k, bool) = !strcmp(k->def, "true");
			break;
		case K_INT:
		case K_SECONDS:
			*FIELD(conf, k, int) = atoi(k->def);
			break;
		case K_PATH:
		case K_HOSTPORT:
			*FIELD(conf, k, char *) = strdup(k->def);
			if (!*FIELD(conf, k, char *))
				goto nomem;
			break;
		case K_PATHLIST:
			/* An empty list: NULL items, like a freed one. */
			break;
		case K_KEYLIST:
			if (split_default(k->def, FIELD(conf, k, struct phx_strlist)) < 0)
				goto nomem;
			break;
		case K_SKIP:
			break;
		}
	}
	return 0;
nomem:
	phx_conf_free(conf);
	return -1;
}

/* ------------------------------------------------------------ values */

struct loader {
	const struct phx_ydoc *doc;
	struct phx_conf *conf;
	char *err;
	size_t errlen;
};

/* NULL if s is a valid HOST:PORT, else what is wrong with it. */
static const char *hostport_problem(const char *s)
{
	const char *colon = strrchr(s, ':');
	size_t hlen;
	long port = 0;

	if (!colon)
		return "no ':PORT'";
	hlen = (size_t)(colon - s);
	if (!hlen)
		return "no host before ':'; use 0.0.0.0 for every address";
	if (s[0] == '[') {
		if (hlen < 3 || s[hlen - 1] != ']' || memchr(s + 1, ']', hlen - 2))
			return "an IPv6 address must be in brackets, like [::1]:7720";
		if (strspn(s + 1, "0123456789abcdefABCDEF:.") != hlen - 2)
			return "bad character in the IPv6 address";
	} else {
		if (memchr(s, ':', hlen))
			return "an IPv6 address must be in brackets, like [::1]:7720";
		if (strspn(s,
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
		    hlen)
			return "bad character in the host name";
	}
	if (!colon[1] || strlen(colon + 1) > 5 ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return "the port must be a number from 1 to 65535";
	port = strtol(colon + 1, NULL, 10);
	if (port < 1 || port > 65535)
		return "the port must be a number from 1 to 65535";
	return NULL;
}

/* Length of a Unicode line break (NEL, LS, PS) at s: YAML folds them. */
static size_t unicode_break(const char *s)
{
	if (!strncmp(s, "\xc2\x85", 2))
		return 2;
	if (!strncmp(s, "\xe2\x80\xa8", 3) || !strncmp(s, "\xe2\x80\xa9", 3))
		return 3;
	return 0;
}

/* What each % escape of a pattern stands for, for error messages. */
static const struct {
	char letter;
	unsigned flag;
	const char *means;
} escapes[] = {
	{ 'u', K_FMT_U, "a number" },
	{ 'j', K_FMT_J, "the job id" },
	{ 'n', K_FMT_N, "the node name" },
};

/* NULL if every % in s is an escape the row allows, else what is wrong. */
static const char *pattern_problem(const struct conf_key *k, const char *s, char *buf, size_t len)
{
	unsigned n_u = 0;
	size_t used = 0;

	for (const char *p = strchr(s, '%'); p; p = strchr(p + 2, '%')) {
		bool ok = p[1] == '%';

		for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]) && !ok; i++)
			ok = p[1] == escapes[i].letter && (k->flags & escapes[i].flag);
		n_u += p[1] == 'u';
		if (ok)
			continue;
		used = (size_t)snprintf(buf, len, "'%%%.1s' is not known here; use ",
					p[1] ? p + 1 : "");
		for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
			if ((k->flags & escapes[i].flag) && used < len)
				used += (size_t)snprintf(buf + used, len - used, "%%%c for %s, ",
							 escapes[i].letter, escapes[i].means);
		}
		if (used < len)
			snprintf(buf + used, len - used, "%%%% for a percent sign");
		return buf;
	}
	if ((k->flags & K_ONE_U) && n_u != 1)
		return "the pattern needs exactly one %u, where the GPU index goes";
	return NULL;
}

static const struct conf_key *find_key(const char *name);

static int check_string(const struct loader *l, const struct conf_key *k,
			const struct phx_ynode *node, const char *s)
{
	char buf[256];

	const char *problem;
	size_t len = strlen(s);

	for (size_t i = 0; i < len; i++) {
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || unicode_break(s + i))
			return phx_ynode_error(l->doc, node, l->err, l->errlen,
					       "control character or line break in the value; "
					       "remove it");
	}
	if (!len && (k->flags & K_EMPTY_OK))
		return 0;
	if ((long long)len > k->max)
		return phx_ynode_error(
			l->doc, node, l->err, l->errlen,
			"value is %zu bytes long, at most %lld allowed%s", len, k->max,
			k->max == SOCKET_PATH_LEN ? " (a socket path must fit sockaddr_un)" : "");
	if ((k->type == K_PATH || k->type == K_PATHLIST) && s[0] != '/')
		return phx_ynode_error(l->doc, node, l->err, l->errlen,
				       "expected an absolute path (starting with '/'), "
				       "got '%.48s'%s",
				       s, k->flags & K_EMPTY_OK ? "; \"\" for the default" : "");
	if (k->type == K_KEYLIST && (!find_key(s) || site_only(s)))
		return phx_ynode_error(l->doc, node, l->err, l->errlen,
				       !find_key(s)
					       ? "'%.64s' is not a key of phalanx.yaml"
					       : "'%.64s' is the site's alone: users may never set "
						 "it",
				       s);
	if (k->type == K_HOSTPORT && (problem = hostport_problem(s)))
		return phx_ynode_error(l->doc, node, l->err, l->errlen,
				       "expected HOST:PORT like 0.0.0.0:7720, got '%.48s': %s", s,
				       problem);
	if ((k->flags & (K_FMT_U | K_FMT_J | K_FMT_N)) &&
	    (problem = pattern_problem(k, s, buf, sizeof(buf))))
		return phx_ynode_error(l->doc, node, l->err, l->errlen, "in '%.48s': %s", s,
				       problem);
	return 0;
}

/* "auto", or a boolean in any of its spellings. */
static int apply_tristate(const struct loader *l, const struct conf_key *k,
			  const struct phx_ynode *node)
{
	bool b;
	int e;

	if (node->type == PHX_YSCALAR && !strcmp(node->value, "auto")) {
		*FIELD(l->conf, k, int) = PHX_TRI_AUTO;
		return 0;
	}
	if (phx_ynode_bool(l->doc, node, &b, NULL, 0) == 0) {
		*FIELD(l->conf, k, int) = b ? PHX_TRI_TRUE : PHX_TRI_FALSE;
		return 0;
	}
	/* Says "expected one of auto, true, false" with a did-you-mean. */
	if (phx_ynode_enum(l->doc, node, k->choices, &e, l->err, l->errlen) < 0)
		return -1;
	*FIELD(l->conf, k, int) = e;
	return 0;
}

#define LIST_MAX 64

static int apply_list(const struct loader *l, const struct conf_key *k,
		      const struct phx_ynode *node)
{
	struct phx_strlist list = { NULL, 0 };
	const char *s;

	/* "paths:" with nothing after it: no paths. */
	if (node->type == PHX_YSCALAR && !node->quoted &&
	    (!node->value[0] || !strcmp(node->value, "~") || !strcmp(node->value, "null")))
		goto done;
	if (node->type != PHX_YSEQ)
		return phx_ynode_error(l->doc, node, l->err, l->errlen,
				       "expected a list of %s, got %s",
				       k->type == K_KEYLIST ? "keys, like [checkpoint.keep, "
							      "launcher.max_restarts]"
							    : "absolute paths, like [/a, /b]",
				       node->type == PHX_YMAP ? "a mapping" : "a single value");
	if (node->n_items > LIST_MAX)
		return phx_ynode_error(l->doc, node, l->err, l->errlen,
				       "%zu entries, at most %d allowed", node->n_items, LIST_MAX);
	list.items = calloc(node->n_items + 1, sizeof(*list.items));
	if (!list.items)
		return phx_errf(l->err, l->errlen, "%s: out of memory", l->doc->name);
	for (size_t i = 0; i < node->n_items; i++) {
		const struct phx_ynode *item = node->items[i];

		if (phx_ynode_string(l->doc, item, &s, l->err, l->errlen) < 0 ||
		    check_string(l, k, item, s) < 0)
			goto fail;
		list.items[i] = strdup(s);
		if (!list.items[i]) {
			phx_errf(l->err, l->errlen, "%s: out of memory", l->doc->name);
			goto fail;
		}
		list.n++;
	}
done:
	strlist_free(FIELD(l->conf, k, struct phx_strlist));
	*FIELD(l->conf, k, struct phx_strlist) = list;
	return 0;
fail:
	strlist_free(&list);
	return -1;
}

static int apply(const struct loader *l, const struct conf_key *k, const struct phx_ynode *node)
{
	const char *s;
	long long v;
	char *copy;
	int e;

	switch (k->type) {
	case K_ENUM:
		if (phx_ynode_enum(l->doc, node, k->choices, &e, l->err, l->errlen) < 0)
			return -1;
		*FIELD(l->conf, k, int) = e;
		return 0;
	case K_BOOL:
		return phx_ynode_bool(l->doc, node, FIELD(l->conf, k, bool), l->err, l->errlen);
	case K_INT:
		if (phx_ynode_int(l->doc, node, k->min, k->max, &v, l->err, l->errlen) < 0)
			return -1;
		*FIELD(l->conf, k, int) = (int)v;
		return 0;
	case K_SECONDS:
		if (phx_ynode_seconds(l->doc, node, k->min, k->max, &v, l->err, l->errlen) < 0)
			return -1;
		*FIELD(l->conf, k, int) = (int)v;
		return 0;
	case K_PATH:
	case K_HOSTPORT:
		if (phx_ynode_string(l->doc, node, &s, l->err, l->errlen) < 0 ||
		    check_string(l, k, node, s) < 0)
			return -1;
		copy = strdup(s);
		if (!copy)
			return phx_errf(l->err, l->errlen, "%s: out of memory", l->doc->name);
		free(*FIELD(l->conf, k, char *));
		*FIELD(l->conf, k, char *) = copy;
		return 0;
	case K_TRISTATE:
		return apply_tristate(l, k, node);
	case K_PATHLIST:
	case K_KEYLIST:
		return apply_list(l, k, node);
	case K_SKIP:
		/* Its reader is told there is something to read. */
		l->conf->has_fabric = true;
		return 0;
	}
	return -1;
}

/* ------------------------------------------------------------ schema walk */

static const struct conf_key *find_key(const char *name)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	}
	return NULL;
}

/* Is name ("placement") a section, i.e. a prefix of some row's name? */
static bool is_section(const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < N_KEYS; i++) {
		if (!strncmp(keys[i].name, name, len) && keys[i].name[len] == '.')
			return true;
	}
	return false;
}

/* The names directly inside section (NULL = top level), in table order. */
static size_t section_children(const char *section, const char **out, char names[][NAME_LEN],
			       size_t max)
{
	size_t plen = section ? strlen(section) + 1 : 0, n = 0;

	for (size_t i = 0; i < N_KEYS && n < max; i++) {
		const char *rest = keys[i].name + plen;
		size_t len;
		bool seen = false;

		if (section &&
		    (strncmp(keys[i].name, section, plen - 1) || keys[i].name[plen - 1] != '.'))
			continue;
		len = strcspn(rest, ".");
		for (size_t j = 0; j < n; j++)
			seen |= strlen(out[j]) == len && !strncmp(out[j], rest, len);
		if (seen || len >= NAME_LEN)
			continue;
		memcpy(names[n], rest, len);
		names[n][len] = '\0';
		out[n] = names[n];
		n++;
	}
	return n;
}

static int unknown_key(const struct loader *l, const struct phx_ynode *node, const char *section,
		       const char *full)
{
	char names[N_KEYS][NAME_LEN], list[512] = "", hint[192] = "";
	const char *children[N_KEYS], *near;
	size_t n = section_children(section, children, names, N_KEYS), used = 0;

	for (size_t i = 0; i < n && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
					 children[i]);
	near = phx_yaml_suggest(node->key, children, n);
	if (near) {
		snprintf(hint, sizeof(hint), "; did you mean '%s'?", near);
	} else {
		/* A right key in the wrong section: "timeout:" at the top. */
		for (size_t i = 0; i < N_KEYS; i++) {
			const char *dot = strrchr(keys[i].name, '.');

			if (dot && !strcmp(dot + 1, node->key) && strcmp(keys[i].name, full)) {
				snprintf(hint, sizeof(hint), "; did you mean '%s'?", keys[i].name);
				break;
			}
		}
	}
	if (section)
		return phx_ynode_key_error(l->doc, node, l->err, l->errlen,
					   "unknown key '%.128s'; known keys in '%s': %s%s", full,
					   section, list, hint);
	return phx_ynode_key_error(l->doc, node, l->err, l->errlen,
				   "unknown key '%.128s'; known top-level keys: %s%s", full, list,
				   hint);
}

static int load_map(const struct loader *l, const struct phx_ynode *map, const char *section);

static int load_section(const struct loader *l, const struct phx_ynode *node, const char *full)
{
	char got[64];

	/* "health:" with every key commented out: all defaults. */
	if (node->type == PHX_YSCALAR && !node->quoted &&
	    (!node->value[0] || !strcmp(node->value, "~") || !strcmp(node->value, "null")))
		return 0;
	if (node->type == PHX_YMAP)
		return load_map(l, node, full);
	if (node->type == PHX_YSEQ)
		snprintf(got, sizeof(got), "a list");
	else
		snprintf(got, sizeof(got), "'%.40s'", node->value);
	return phx_ynode_error(l->doc, node, l->err, l->errlen,
			       "expected the '%s' section (a mapping of settings, one "
			       "'name: value' per line below it), got %s",
			       full, got);
}

static int load_map(const struct loader *l, const struct phx_ynode *map, const char *section)
{
	for (size_t i = 0; i < map->n_items; i++) {
		const struct phx_ynode *node = map->items[i];
		const struct conf_key *k = NULL;
		char full[NAME_LEN * 2];
		int n;

		n = snprintf(full, sizeof(full), "%s%s%s", section ? section : "",
			     section ? "." : "", node->key);
		if (n > 0 && (size_t)n < sizeof(full)) {
			k = find_key(full);
			if (!k && is_section(full)) {
				if (load_section(l, node, full) < 0)
					return -1;
				continue;
			}
		}
		if (!k)
			return unknown_key(l, node, section, full);
		if (apply(l, k, node) < 0)
			return -1;
	}
	return 0;
}

static int from_doc(const struct phx_ydoc *doc, struct phx_conf *conf, char *err, size_t errlen)
{
	struct loader l = { .doc = doc, .conf = conf, .err = err, .errlen = errlen };
	const struct phx_ynode *root = doc->root;

	if (phx_conf_defaults(conf) < 0)
		return phx_errf(err, errlen, "%s: out of memory", doc->name);
	conf->source = strdup(doc->name);
	if (!conf->source) {
		phx_errf(err, errlen, "%s: out of memory", doc->name);
		goto fail;
	}
	if (root && root->type != PHX_YMAP) {
		phx_ynode_error(doc, root, err, errlen,
				"expected settings ('name: value' lines) "
				"at the top level, got a %s; see phalanx.yaml(5)",
				root->type == PHX_YSEQ ? "list" : "single value");
		goto fail;
	}
	if (root && load_map(&l, root, NULL) < 0)
		goto fail;
	return 0;
fail:
	phx_conf_free(conf);
	return -1;
}

/* conf gets defaults first, and the file's values only if all of it is good. */
static int finish(struct phx_ydoc *doc, int rc, struct phx_conf *conf, char *err, size_t errlen)
{
	struct phx_conf tmp;

	if (rc == 0)
		rc = from_doc(doc, &tmp, err, errlen);
	phx_ydoc_free(doc);
	if (rc < 0)
		return -1;
	phx_conf_free(conf);
	*conf = tmp;
	return 0;
}

/* Records where key's value came from; the latest wins. */
static int note_origin(struct phx_conf *conf, const char *key, const char *where)
{
	struct phx_conf_origin *o = NULL, *grown;

	for (size_t i = 0; i < conf->norigins && !o; i++)
		if (!strcmp(conf->origins[i].key, key))
			o = &conf->origins[i];
	if (!o) {
		grown = realloc(conf->origins, (conf->norigins + 1) * sizeof(*grown));
		if (!grown)
			return -1;
		conf->origins = grown;
		o = &conf->origins[conf->norigins];
		o->key = strdup(key);
		o->where = NULL;
		if (!o->key)
			return -1;
		conf->norigins++;
	}
	free(o->where);
	o->where = strdup(where);
	return o->where ? 0 : -1;
}

static const char *origin_of(const struct phx_conf *conf, const char *key)
{
	for (size_t i = 0; i < conf->norigins; i++)
		if (!strcmp(conf->origins[i].key, key))
			return conf->origins[i].where;
	return NULL;
}

int phx_conf_override(struct phx_conf *conf, const char *key, const char *value, const char *origin,
		      char *err, size_t errlen)
{
	const struct conf_key *k = find_key(key);
	struct phx_ynode top = { .type = PHX_YMAP, .line = 1, .column = 1 };
	struct phx_ynode node = { .type = PHX_YSCALAR,
				  .line = 1,
				  .column = 1,
				  .key = (char *)key,
				  .value = (char *)value,
				  .parent = &top };
	struct phx_ydoc doc = { .name = (char *)origin, .root = &top };
	struct loader l = { .doc = &doc, .conf = conf, .err = err, .errlen = errlen };
	const char *what;

	if (!k || k->type == K_SKIP)
		return phx_errf(err, errlen, "%s: no key '%s'", origin, key);
	if (apply(&l, k, &node) == 0)
		return note_origin(conf, key, origin) < 0 ? phx_errf(err, errlen, "out of memory")
							  : 0;
	/* "ORIGIN:1:1: key ..." from the loader: the line of no file. */
	what = strstr(err, "key '");
	if (what && what != err) {
		char why[1024];

		snprintf(why, sizeof(why), "%s", what);
		phx_errf(err, errlen, "%s: %s", origin, why);
	}
	return -1;
}

/* ------------------------------------------------------------ a user's layer */

int phx_conf_user_path(char *buf, size_t len)
{
	const char *env = getenv("PHALANX_USER_CONFIG"), *xdg = getenv("XDG_CONFIG_HOME"),
		   *home = getenv("HOME");
	int n;

	if (env && !*env)
		return -1;
	if (env)
		n = snprintf(buf, len, "%s", env);
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/phalanx/phalanx.yaml", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.config/phalanx/phalanx.yaml", home);
	else
		return -1;
	return n > 0 && (size_t)n < len ? 0 : -1;
}

static bool settable(const struct phx_conf *conf, const char *name)
{
	for (size_t i = 0; i < conf->users.settable.n; i++)
		if (!strcmp(conf->users.settable.items[i], name))
			return true;
	return false;
}

static int user_key_error(const struct loader *l, const struct phx_ynode *node, const char *full)
{
	char list[1024] = "";
	size_t off = 0;

	if (site_only(full))
		return phx_ynode_key_error(l->doc, node, l->err, l->errlen,
					   "key '%s' is the site's to set, never a user's; remove "
					   "it from this file",
					   full);
	for (size_t i = 0; i < l->conf->users.settable.n && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
					l->conf->users.settable.items[i]);
	return phx_ynode_key_error(l->doc, node, l->err, l->errlen,
				   "key '%s' is not one this site lets users set (users.settable: "
				   "%s); remove it, or ask the administrators",
				   full, list[0] ? list : "none");
}

/* Checks every key of the user's map (apply: sets them too, noting where each came from). */
static int user_map(const struct loader *l, const struct phx_ynode *map, const char *section,
		    bool set)
{
	for (size_t i = 0; i < map->n_items; i++) {
		const struct phx_ynode *node = map->items[i];
		const struct conf_key *k;
		char full[NAME_LEN * 2], where[4200];

		if (snprintf(full, sizeof(full), "%s%s%s", section ? section : "",
			     section ? "." : "", node->key) >= (int)sizeof(full))
			return unknown_key(l, node, section, node->key);
		k = find_key(full);
		if (!k && is_section(full) && node->type == PHX_YMAP) {
			if (user_map(l, node, full, set) < 0)
				return -1;
			continue;
		}
		if (!k && is_section(full) && node->type == PHX_YSCALAR && !node->value[0])
			continue;
		if (!k)
			return unknown_key(l, node, section, full);
		if (site_only(full) || !settable(l->conf, full))
			return user_key_error(l, node, full);
		if (!set)
			continue;
		snprintf(where, sizeof(where), "%s:%d", l->doc->name, node->line);
		if (apply(l, k, node) < 0 || note_origin(l->conf, full, where) < 0)
			return l->err[0] ? -1 : phx_errf(l->err, l->errlen, "out of memory");
	}
	return 0;
}

int phx_conf_load_user(struct phx_conf *conf, const char *path, char *err, size_t errlen)
{
	struct phx_ydoc *doc = NULL;
	struct loader l = { .conf = conf, .err = err, .errlen = errlen };
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (access(path, F_OK) < 0)
		return 0;
	if (phx_ydoc_load_file(path, &doc, err, errlen) < 0) {
		phx_ydoc_free(doc);
		return -1;
	}
	l.doc = doc;
	if (doc->root && doc->root->type != PHX_YMAP)
		rc = phx_ynode_error(doc, doc->root, err, errlen,
				     "expected settings ('name: value' lines) at the top level");
	else
		rc = !doc->root ? 0 : user_map(&l, doc->root, NULL, false) ?: user_map(&l, doc->root, NULL, true);
	phx_ydoc_free(doc);
	return rc;
}

int phx_conf_load_file(const char *path, struct phx_conf *conf, char *err, size_t errlen)
{
	struct phx_ydoc *doc;
	int rc;

	if (phx_conf_defaults(conf) < 0)
		return phx_errf(err, errlen, "%s: out of memory", path);
	rc = phx_ydoc_load_file(path, &doc, err, errlen);
	return finish(doc, rc, conf, err, errlen);
}

int phx_conf_load_buffer(const char *name, const char *buf, size_t len, struct phx_conf *conf,
			 char *err, size_t errlen)
{
	struct phx_ydoc *doc;
	int rc;

	if (phx_conf_defaults(conf) < 0)
		return phx_errf(err, errlen, "%s: out of memory", name ? name : "(config)");
	rc = phx_ydoc_load_buffer(name ? name : "(config)", buf, len, &doc, err, errlen);
	return finish(doc, rc, conf, err, errlen);
}

/* ------------------------------------------------------------ dump */

static void dump_string(const char *s, FILE *out)
{
	fputc('"', out);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		size_t brk = unicode_break(s);

		if (brk) {
			fputs(brk == 2 ? "\\N" : s[2] == '\xa8' ? "\\L" : "\\P", out);
			s += brk - 1;
		} else if (c == '"' || c == '\\') {
			fprintf(out, "\\%c", c);
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(out, "\\x%02x", c);
		} else {
			fputc(c, out);
		}
	}
	fputc('"', out);
}

/* A flow sequence, ["/a", "/b"], that loads back as the same list. */
static void dump_list(const struct phx_strlist *list, FILE *out)
{
	fputc('[', out);
	for (size_t i = 0; i < list->n; i++) {
		if (i)
			fputs(", ", out);
		dump_string(list->items[i], out);
	}
	fputc(']', out);
}

static const char *enum_name(const struct conf_key *k, int v)
{
	for (int i = 0; k->choices[i]; i++) {
		if (i == v)
			return k->choices[i];
	}
	/* Not loadable, on purpose: a corrupt value must not look valid. */
	return "unknown";
}

/* Opens the sections of name that prev did not have; returns the depth. */
static int dump_sections(const char *prev, const char *name, FILE *out)
{
	int depth = 0;
	bool same = prev != NULL;
	const char *dot;

	while ((dot = strchr(name, '.'))) {
		size_t len = (size_t)(dot - name);

		same = same && !strncmp(prev, name, len) && prev[len] == '.';
		if (!same)
			fprintf(out, "%*s%.*s:\n", depth * 2, "", (int)len, name);
		if (same)
			prev += len + 1;
		name = dot + 1;
		depth++;
	}
	return depth;
}

void phx_conf_dump(const struct phx_conf *conf, FILE *out)
{
	const char *prev = NULL;

	fprintf(out, "# phalanx.yaml(5): effective configuration%s%s\n",
		conf->source ? " from " : ", built-in defaults", conf->source ? conf->source : "");
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct conf_key *k = &keys[i];
		const char *leaf = strrchr(k->name, '.');
		int depth;

		if (k->type == K_SKIP)
			continue;
		depth = dump_sections(prev, k->name, out);
		prev = k->name;
		fprintf(out, "%*s%s: ", depth * 2, "", leaf ? leaf + 1 : k->name);
		switch (k->type) {
		case K_ENUM:
		case K_TRISTATE:
			fputs(enum_name(k, *FIELD(conf, k, int)), out);
			break;
		case K_PATHLIST:
		case K_KEYLIST:
			dump_list(FIELD(conf, k, struct phx_strlist), out);
			break;
		case K_BOOL:
			fputs(*FIELD(conf, k, bool) ? "true" : "false", out);
			break;
		case K_INT:
		case K_SECONDS:
			fprintf(out, "%d", *FIELD(conf, k, int));
			break;
		default:
			dump_string(*FIELD(conf, k, char *), out);
			break;
		}
		if (origin_of(conf, k->name))
			fprintf(out, "  # %s", origin_of(conf, k->name));
		fputc('\n', out);
	}
}

const char *phx_conf_topology_conf(const struct phx_conf *conf, char *buf, size_t len)
{
	const char *slurm_conf = getenv("SLURM_CONF");
	char copy[4096];

	if (conf->placement.topology_conf && *conf->placement.topology_conf)
		return conf->placement.topology_conf;
	if (!slurm_conf || strlen(slurm_conf) >= sizeof(copy))
		slurm_conf = "/etc/slurm/slurm.conf";
	strcpy(copy, slurm_conf);
	snprintf(buf, len, "%s/topology.conf", dirname(copy));
	return access(buf, R_OK) == 0 ? buf : NULL;
}

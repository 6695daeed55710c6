/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/yaml.h"

static char err[1024];

/* Every key, so a test fails when one is added to the loader but not here. */
static const char *const all_keys[] = {
	"log_level",
	"key_file",
	"state_dir",
	"placement.mode",
	"placement.topology_conf",
	"isolation.mode",
	"isolation.allow_off",
	"isolation.proc_root",
	"health.enabled",
	"health.drain_on_failure",
	"health.timeout",
	"health.gpu_device",
	"health.gpu_count",
	"health.ib",
	"health.ib_min_rate_gbps",
	"health.min_free_gb",
	"health.paths",
	"health.command",
	"health.sysfs_root",
	"health.dev_root",
	"ckptd.listen",
	"ckptd.address",
	"ckptd.socket",
	"ckptd.munge_socket",
	"ckptd.metrics",
	"ckptd.interval",
	"ckptd.interval_steps",
	"ckptd.interval_seconds",
	"ckptd.node_mtbf_hours",
	"ckptd.max_ranks_per_user",
	"checkpoint.keep",
	"users.settable",
	"launcher.log_time",
	"launcher.hang_timeout",
	"launcher.peer_timeout_ms",
	"launcher.max_restarts",
	"launcher.spares",
	"launcher.max_relaunches",
	"launcher.same_failure_limit",
	"launcher.drain_bad_nodes",
	"launcher.straggler_threshold",
	"launcher.straggler_window",
	"launcher.straggler_min_steps",
	"check.gemm_tflops_min",
	"check.copy_gbps_min",
	"check.busbw_gbps_min",
	"check.slow_percent",
	"check.drain_slow",
	"check.timeout",
	"check.nccl_timeout",
	"check.memtest_mib",
	"check.gemm_size",
	"check.nccl_mib",
};

static int load(const char *text, struct phx_conf *conf)
{
	err[0] = '\0';
	return phx_conf_load_buffer("t.yaml", text, strlen(text), conf, err, sizeof(err));
}

static void assert_defaults(const struct phx_conf *c)
{
	assert_int_equal(c->log_level, PHX_LOG_INFO);
	assert_string_equal(c->key_file, "/etc/phalanx/key");
	assert_string_equal(c->state_dir, "/var/lib/phalanx");
	assert_int_equal(c->placement.mode, PHX_PLACE_TOPO);
	assert_string_equal(c->placement.topology_conf, "");
	assert_int_equal(c->isolation.mode, PHX_ISOLATE_JOB);
	assert_false(c->isolation.allow_off);
	assert_string_equal(c->isolation.proc_root, "/proc");
	assert_true(c->health.enabled);
	assert_true(c->health.drain_on_failure);
	assert_int_equal(c->health.timeout_s, 30);
	assert_string_equal(c->health.gpu_device, "/dev/nvidia%u");
	assert_int_equal(c->health.gpu_count, 0);
	assert_int_equal(c->health.ib, PHX_TRI_AUTO);
	assert_int_equal(c->health.ib_min_rate_gbps, 0);
	assert_int_equal(c->health.min_free_gb, 0);
	assert_int_equal(c->health.paths.n, 0);
	assert_string_equal(c->health.command, "");
	assert_string_equal(c->health.sysfs_root, "/sys");
	assert_string_equal(c->health.dev_root, "/");
	assert_string_equal(c->ckptd.listen, "0.0.0.0:7720");
	assert_string_equal(c->ckptd.address, "");
	assert_string_equal(c->ckptd.socket, "/run/phalanx/ckptd.sock");
	assert_string_equal(c->ckptd.metrics, "127.0.0.1:7721");
	assert_int_equal(c->ckptd.interval, 0);
	assert_int_equal(c->ckptd.interval_steps, 1000);
	assert_int_equal(c->ckptd.interval_seconds, 1800);
	assert_int_equal(c->ckptd.node_mtbf_hours, 5000);
	assert_int_equal(c->ckptd.max_ranks_per_user, 262144);
	assert_int_equal(c->checkpoint.keep, 3);
	assert_int_equal(c->launcher.hang_timeout_s, 600);
	assert_int_equal(c->launcher.peer_timeout_ms, 600);
	assert_int_equal(c->launcher.max_restarts, 3);
	assert_int_equal(c->check.slow_percent, 20);
	assert_true(c->check.drain_slow);
	assert_int_equal(c->check.nccl_timeout_s, 60);
	assert_int_equal(c->launcher.spares, 0);
	assert_int_equal(c->launcher.max_relaunches, 3);
	assert_int_equal(c->launcher.same_failure_limit, 2);
	assert_false(c->launcher.drain_bad_nodes);
	assert_int_equal(c->launcher.straggler_threshold, 100);
	assert_int_equal(c->launcher.straggler_window_s, 30);
	assert_int_equal(c->launcher.straggler_min_steps, 5);
}

static void assert_same(const struct phx_conf *a, const struct phx_conf *b)
{
	assert_int_equal(a->log_level, b->log_level);
	assert_string_equal(a->key_file, b->key_file);
	assert_string_equal(a->state_dir, b->state_dir);
	assert_int_equal(a->placement.mode, b->placement.mode);
	assert_string_equal(a->placement.topology_conf, b->placement.topology_conf);
	assert_int_equal(a->isolation.mode, b->isolation.mode);
	assert_int_equal(a->isolation.allow_off, b->isolation.allow_off);
	assert_string_equal(a->isolation.proc_root, b->isolation.proc_root);
	assert_int_equal(a->health.enabled, b->health.enabled);
	assert_int_equal(a->health.drain_on_failure, b->health.drain_on_failure);
	assert_int_equal(a->health.timeout_s, b->health.timeout_s);
	assert_string_equal(a->health.gpu_device, b->health.gpu_device);
	assert_int_equal(a->health.gpu_count, b->health.gpu_count);
	assert_int_equal(a->health.ib, b->health.ib);
	assert_int_equal(a->health.ib_min_rate_gbps, b->health.ib_min_rate_gbps);
	assert_int_equal(a->health.min_free_gb, b->health.min_free_gb);
	assert_int_equal(a->health.paths.n, b->health.paths.n);
	for (size_t i = 0; i < a->health.paths.n; i++)
		assert_string_equal(a->health.paths.items[i], b->health.paths.items[i]);
	assert_string_equal(a->health.command, b->health.command);
	assert_string_equal(a->health.sysfs_root, b->health.sysfs_root);
	assert_string_equal(a->health.dev_root, b->health.dev_root);
	assert_string_equal(a->ckptd.listen, b->ckptd.listen);
	assert_string_equal(a->ckptd.address, b->ckptd.address);
	assert_string_equal(a->ckptd.socket, b->ckptd.socket);
	assert_int_equal(a->checkpoint.keep, b->checkpoint.keep);
	assert_int_equal(a->launcher.hang_timeout_s, b->launcher.hang_timeout_s);
	assert_int_equal(a->launcher.max_restarts, b->launcher.max_restarts);
	assert_int_equal(a->check.slow_percent, b->check.slow_percent);
	assert_int_equal(a->check.gemm_tflops_min, b->check.gemm_tflops_min);
	assert_int_equal(a->check.drain_slow, b->check.drain_slow);
}

static const char full[] = "log_level: debug\n"
			   "key_file: /etc/site/key\n"
			   "state_dir: \"/srv/phalanx\"\n"
			   "placement:\n"
			   "  mode: block\n"
			   "  topology_conf: /etc/slurm/topo.conf\n"
			   "isolation:\n"
			   "  mode: task\n"
			   "  allow_off: yes\n"
			   "  proc_root: /srv/fake/proc\n"
			   "health:\n"
			   "  enabled: no\n"
			   "  drain_on_failure: off\n"
			   "  timeout: 3600\n"
			   "  gpu_device: /dev/gpus/%u/dev\n"
			   "  gpu_count: 8\n"
			   "  ib: true\n"
			   "  ib_min_rate_gbps: 200\n"
			   "  min_free_gb: 100\n"
			   "  paths:\n"
			   "    - /lustre/ckpt/%u/%j\n"
			   "    - \"/local/100%% full\"\n"
			   "  command: /usr/sbin/nhc -t 20\n"
			   "  sysfs_root: /srv/fake/%n/sys\n"
			   "  dev_root: /srv/fake/%n\n"
			   "ckptd:\n"
			   "  listen: \"[::]:7000\"\n"
			   "  address: ckpt.example.org:7000\n"
			   "  socket: /run/p/c.sock\n"
			   "checkpoint:\n"
			   "  keep: 1000\n"
			   "launcher:\n"
			   "  hang_timeout: 10\n"
			   "  max_restarts: 0\n"
			   "check:\n"
			   "  gemm_tflops_min: 700\n"
			   "  slow_percent: 30\n"
			   "  drain_slow: false\n"
			   "fabric:\n"
			   "  switches:\n"
			   "    - {name: s1, nodes: \"n[1-4]\"}\n"
			   "  anything: [goes, {here: 1}]\n";

static void test_defaults(void **state)
{
	struct phx_conf conf, zero;

	memset(&zero, 0, sizeof(zero));
	phx_conf_free(&zero);
	phx_conf_free(NULL);
	memset(&conf, 0x5a, sizeof(conf));
	assert_int_equal(phx_conf_defaults(&conf), 0);
	assert_defaults(&conf);
	assert_null(conf.source);
	phx_conf_free(&conf);
	assert_null(conf.key_file);
	phx_conf_free(&conf); /* twice is fine */
}

static void test_empty_files(void **state)
{
	static const char *const empty[] = {
		"",	     "\n",	   "# only comments\n# here\n",
		"---\n",     "---\n...\n", "\xef\xbb\xbf",
		"~\n",	     "health:\n",  "health: ~\nplacement: null\n",
		"fabric:\n",
	};
	struct phx_conf conf;

	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		if (load(empty[i], &conf))
			fail_msg("'%s' refused: %s", empty[i], err);
		assert_defaults(&conf);
		assert_string_equal(conf.source, "t.yaml");
		phx_conf_free(&conf);
	}
}

static void test_full(void **state)
{
	struct phx_conf conf;

	if (load(full, &conf))
		fail_msg("%s", err);
	assert_int_equal(conf.log_level, PHX_LOG_DEBUG);
	assert_string_equal(conf.key_file, "/etc/site/key");
	assert_string_equal(conf.state_dir, "/srv/phalanx");
	assert_int_equal(conf.placement.mode, PHX_PLACE_BLOCK);
	assert_string_equal(conf.placement.topology_conf, "/etc/slurm/topo.conf");
	assert_int_equal(conf.isolation.mode, PHX_ISOLATE_TASK);
	assert_true(conf.isolation.allow_off);
	assert_string_equal(conf.isolation.proc_root, "/srv/fake/proc");
	assert_false(conf.health.enabled);
	assert_false(conf.health.drain_on_failure);
	assert_int_equal(conf.health.timeout_s, 3600);
	assert_string_equal(conf.health.gpu_device, "/dev/gpus/%u/dev");
	assert_int_equal(conf.health.gpu_count, 8);
	assert_int_equal(conf.health.ib, PHX_TRI_TRUE);
	assert_int_equal(conf.health.ib_min_rate_gbps, 200);
	assert_int_equal(conf.health.min_free_gb, 100);
	assert_int_equal(conf.health.paths.n, 2);
	assert_string_equal(conf.health.paths.items[0], "/lustre/ckpt/%u/%j");
	assert_string_equal(conf.health.paths.items[1], "/local/100%% full");
	assert_null(conf.health.paths.items[2]);
	assert_string_equal(conf.health.command, "/usr/sbin/nhc -t 20");
	assert_string_equal(conf.health.sysfs_root, "/srv/fake/%n/sys");
	assert_string_equal(conf.health.dev_root, "/srv/fake/%n");
	assert_string_equal(conf.ckptd.listen, "[::]:7000");
	assert_string_equal(conf.ckptd.address, "ckpt.example.org:7000");
	assert_string_equal(conf.ckptd.socket, "/run/p/c.sock");
	assert_int_equal(conf.checkpoint.keep, 1000);
	assert_int_equal(conf.launcher.hang_timeout_s, 10);
	assert_int_equal(conf.launcher.max_restarts, 0);
	assert_int_equal(conf.check.gemm_tflops_min, 700);
	assert_int_equal(conf.check.slow_percent, 30);
	assert_false(conf.check.drain_slow);
	phx_conf_free(&conf);
	/* Flow style is the same document. */
	assert_int_equal(
		load("{placement: {mode: off}, isolation: {mode: off}, log_level: error}", &conf),
		0);
	assert_int_equal(conf.placement.mode, PHX_PLACE_OFF);
	assert_int_equal(conf.isolation.mode, PHX_ISOLATE_OFF);
	assert_int_equal(conf.log_level, PHX_LOG_ERROR);
	phx_conf_free(&conf);
}

static void dump_reload(const struct phx_conf *conf, struct phx_conf *back)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	phx_conf_dump(conf, f);
	assert_int_equal(fclose(f), 0);
	if (phx_conf_load_buffer("dump.yaml", text, len, back, err, sizeof(err)))
		fail_msg("dump does not load back: %s\n%s", err, text);
	free(text);
}

static void test_round_trip(void **state)
{
	struct phx_conf conf, back;

	assert_int_equal(phx_conf_defaults(&conf), 0);
	dump_reload(&conf, &back);
	assert_defaults(&back);
	phx_conf_free(&back);
	phx_conf_free(&conf);

	assert_int_equal(load(full, &conf), 0);
	dump_reload(&conf, &back);
	assert_same(&conf, &back);
	assert_string_equal(back.source, "dump.yaml");
	phx_conf_free(&back);
	phx_conf_free(&conf);

	/* Characters that need quoting or escaping survive. */
	assert_int_equal(load("key_file: \"/a b/#c: d/\\\"q\\\"/back\\\\slash/\xc3\xa9\"\n"
			      "state_dir: '/yes'\nplacement: {topology_conf: \"/- [x]\"}\n",
			      &conf),
			 0);
	assert_string_equal(conf.key_file, "/a b/#c: d/\"q\"/back\\slash/\xc3\xa9");
	dump_reload(&conf, &back);
	assert_same(&conf, &back);
	phx_conf_free(&back);
	phx_conf_free(&conf);
}

static void test_dump_text(void **state)
{
	struct phx_conf conf;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	assert_int_equal(phx_conf_defaults(&conf), 0);
	f = open_memstream(&text, &len);
	phx_conf_dump(&conf, f);
	fclose(f);
	assert_non_null(strstr(text,
			       "# phalanx.yaml(5): effective configuration, built-in defaults\n"
			       "log_level: info\nkey_file: \"/etc/phalanx/key\"\n"));
	assert_non_null(strstr(
		text, "\nplacement:\n  mode: topo\n  topology_conf: \"\"\n  hwloc_xml: \"\"\n"
		      "isolation:\n  mode: job\n"));
	assert_non_null(strstr(text, "\nlauncher:\n  hang_timeout: 600\n  peer_timeout_ms: 600\n"
				     "  max_restarts: 3\n"
				     "  spares: 0\n  max_relaunches: 3\n  same_failure_limit: 2\n"
				     "  drain_bad_nodes: false\n"
				     "  straggler_threshold: 100\n  straggler_window: 30\n"
				     "  straggler_min_steps: 5\n"));
	assert_null(strstr(text, "fabric"));
	free(text);
	/* A corrupt value is not printed as a valid one. */
	conf.placement.mode = (enum phx_place_mode)7;
	f = open_memstream(&text, &len);
	phx_conf_dump(&conf, f);
	fclose(f);
	assert_non_null(strstr(text, "  mode: unknown\n"));
	free(text);
	/* Strings set in code are escaped, line breaks included. */
	free(conf.key_file);
	conf.key_file = strdup("/a\"b\\c\td\xc2\x85"
			       "e\xe2\x80\xa8"
			       "f\xe2\x80\xa9");
	f = open_memstream(&text, &len);
	phx_conf_dump(&conf, f);
	fclose(f);
	assert_non_null(strstr(text, "\nkey_file: \"/a\\\"b\\\\c\\x09d\\Ne\\Lf\\P\"\n"));
	free(text);
	phx_conf_free(&conf);
}

static void test_sample_file(void **state)
{
	const char *data = getenv("PHX_TEST_DATA");
	struct phx_conf conf;
	struct phx_ydoc *doc;
	char path[4096];

	if (!data)
		skip();
	snprintf(path, sizeof(path), "%s/../../etc/phalanx.yaml", data);
	if (phx_conf_load_file(path, &conf, err, sizeof(err)))
		fail_msg("%s", err);
	assert_defaults(&conf);
	assert_string_equal(conf.source, path);
	phx_conf_free(&conf);
	/* It shows every key. */
	assert_int_equal(phx_ydoc_load_file(path, &doc, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(all_keys) / sizeof(all_keys[0]); i++) {
		char section[64];
		const char *dot = strchr(all_keys[i], '.');
		const struct phx_ynode *node = doc->root;

		if (dot) {
			snprintf(section, sizeof(section), "%.*s", (int)(dot - all_keys[i]),
				 all_keys[i]);
			node = phx_ynode_get(node, section);
		}
		if (!phx_ynode_get(node, dot ? dot + 1 : all_keys[i]))
			fail_msg("etc/phalanx.yaml lacks %s", all_keys[i]);
	}
	phx_ydoc_free(doc);
}

/* text must be refused with exactly want; conf is left at defaults. */
static void refused_exact(const char *text, const char *want)
{
	struct phx_conf conf;

	if (load(text, &conf) != -1)
		fail_msg("accepted: %s", text);
	assert_defaults(&conf);
	assert_null(conf.source);
	phx_conf_free(&conf);
	if (strcmp(err, want))
		fail_msg("for:\n%s\ngot:  %s\nwant: %s", text, err, want);
}

/* text must be refused with a message holding every part. */
static void refused(const char *text, const char *part1, const char *part2)
{
	struct phx_conf conf;

	if (load(text, &conf) != -1)
		fail_msg("accepted: %s", text);
	assert_defaults(&conf);
	phx_conf_free(&conf);
	if (strncmp(err, "t.yaml:", 7) || !strstr(err, part1) || (part2 && !strstr(err, part2)))
		fail_msg("for: %s\ngot: %s\nwant: '%s' and '%s'", text, err, part1,
			 part2 ? part2 : "");
}

static void test_unknown_keys(void **state)
{
	refused_exact("log_level: info\nplacement:\n  mdoe: block\n",
		      "t.yaml:3:3: unknown key 'placement.mdoe'; known keys in 'placement': mode, "
		      "topology_conf, hwloc_xml; did you mean 'mode'?");
	refused_exact(
		"placement:\n  colour: red\n",
		"t.yaml:2:3: unknown key 'placement.colour'; known keys in 'placement': mode, "
		"topology_conf, hwloc_xml");
	refused_exact(
		"loglevel: info\n",
		"t.yaml:1:1: unknown key 'loglevel'; known top-level keys: log_level, "
		"key_file, state_dir, placement, isolation, health, ckptd, recovery, checkpoint, "
		"launcher, check, users, fabric; did you mean 'log_level'?");
	refused_exact("a: 1\ntimeout: 5\n",
		      "t.yaml:1:1: unknown key 'a'; known top-level keys: "
		      "log_level, key_file, state_dir, placement, isolation, health, ckptd, "
		      "recovery, checkpoint, launcher, check, users, fabric");
	refused("health:\n  enabled: true\n  x: 1\n", "t.yaml:3:3: unknown key 'health.x'",
		"known keys in 'health': enabled, drain_on_failure, timeout");
	/* Right key, wrong section. */
	refused("timeout: 5\n", "unknown key 'timeout'", "did you mean 'health.timeout'?");
	refused("health:\n  keep: 5\n", "unknown key 'health.keep'",
		"did you mean 'checkpoint.keep'?");
	refused("placement:\n  mode:\n    deep: 1\n", "key 'placement.mode': expected one of",
		"got a mapping");
	refused("{Log_Level: info}", "unknown key 'Log_Level'", "did you mean 'log_level'?");
}

static void test_bad_values(void **state)
{
	static const struct {
		const char *text;
		const char *part1, *part2;
	} cases[] = {
		{ "log_level: loud",
		  "t.yaml:1:12: key 'log_level': expected one of error, warn, "
		  "info, debug, got 'loud'",
		  NULL },
		{ "log_level: Info", "key 'log_level'", "did you mean 'info'?" },
		{ "log_level: 3", "key 'log_level'", "got '3'" },
		{ "key_file: etc/key",
		  "t.yaml:1:11: key 'key_file': expected an absolute path "
		  "(starting with '/'), got 'etc/key'",
		  NULL },
		{ "key_file: \"\"", "key 'key_file': expected an absolute path", NULL },
		{ "key_file:", "key 'key_file': expected a string, got nothing (null)", NULL },
		{ "key_file: [a]", "key 'key_file': expected a string, got a list", NULL },
		{ "key_file: \"/a\\nb\"", "key 'key_file': control character", NULL },
		{ "state_dir: ~", "key 'state_dir': expected a string", NULL },
		/* YAML folds NEL and LS/PS: a dump could not give them back. */
		{ "state_dir: \"/a\\Nb\"", "key 'state_dir': control character or line break",
		  NULL },
		{ "state_dir: \"/a\\Lb\"", "key 'state_dir': control character or line break",
		  NULL },
		{ "state_dir: \"/a\\tb\"", "key 'state_dir': control character", NULL },
		{ "placement: topo", "key 'placement': expected the 'placement' section",
		  "got 'topo'" },
		{ "placement: [mode]", "key 'placement': expected the 'placement' section",
		  "got a list" },
		{ "placement:\n  mode: \"\"",
		  "key 'placement.mode': expected one of topo, block, "
		  "off",
		  NULL },
		{ "placement:\n  topology_conf: topology.conf",
		  "t.yaml:2:18: key "
		  "'placement.topology_conf': expected an absolute path",
		  "\"\" for the default" },
		{ "isolation:\n  mode: gpu", "key 'isolation.mode': expected one of job, task, off",
		  NULL },
		{ "isolation:\n  allow_off: 1", "key 'isolation.allow_off': expected true or false",
		  NULL },
		{ "isolation:\n  proc_root: proc",
		  "key 'isolation.proc_root': expected an absolute "
		  "path",
		  NULL },
		{ "isolation:\n  proc_root: \"\"",
		  "key 'isolation.proc_root': expected an absolute "
		  "path",
		  NULL },
		{ "isolation:\n  alow_off: true",
		  "unknown key 'isolation.alow_off'; known keys in "
		  "'isolation': mode, allow_off, proc_root",
		  "did you mean 'allow_off'?" },
		{ "health:\n  enabled: 1", "key 'health.enabled': expected true or false, got '1'",
		  NULL },
		{ "health:\n  enabled: \"true\"", "key 'health.enabled'", "remove the quotes" },
		{ "health:\n  drain_on_failure: maybe", "key 'health.drain_on_failure'", NULL },
		{ "recovery:\n  drain_after: 0",
		  "t.yaml:2:16: key 'recovery.drain_after': expected an integer "
		  "from 1 to 1000, got '0'; out of range",
		  NULL },
		{ "recovery:\n  drain_after: 1001", "from 1 to 1000", NULL },
		{ "recovery:\n  drain_after: 1.5", "key 'recovery.drain_after'",
		  "whole numbers only" },
		{ "recovery:\n  drain_after: \"30\"", "key 'recovery.drain_after'",
		  "remove the quotes" },
		{ "recovery:\n  drain_after: 30s", "key 'recovery.drain_after'",
		  "decimal digits only" },
		{ "recovery:\n  drain_after: 9223372036854775808", "key 'recovery.drain_after'",
		  "out of range" },
		{ "recovery:\n  drain_after: -9223372036854775809", "key 'recovery.drain_after'",
		  "out of range" },
		{ "recovery:\n  drain_after: 4294967326", "key 'recovery.drain_after'",
		  "out of range" },
		{ "recovery:\n  drain_after: 1e999", "key 'recovery.drain_after'", NULL },
		{ "recovery:\n  drain_after: -0", "key 'recovery.drain_after'", "got '-0'" },
		{ "recovery:\n  drain_after: 030", "key 'recovery.drain_after'", "leading zeros" },
		{ "health:\n  timeout: 0",
		  "t.yaml:2:12: key 'health.timeout': expected a duration from 1 to 3600 seconds "
		  "(S, M:S, H:M:S, D-H, D-H:M or D-H:M:S), got '0'; out of range",
		  NULL },
		{ "health:\n  timeout: 1:00:01", "key 'health.timeout'", "out of range" },
		{ "health:\n  timeout: 1.5", "key 'health.timeout': expected a duration", NULL },
		{ "health:\n  timeout: ~", "key 'health.timeout': expected a duration", NULL },
		{ "ckptd:\n  listen: 7720", "key 'ckptd.listen': expected HOST:PORT",
		  "no ':PORT'" },
		{ "ckptd:\n  listen: \":7720\"", "key 'ckptd.listen'", "no host" },
		{ "ckptd:\n  listen: host:0", "key 'ckptd.listen'", "from 1 to 65535" },
		{ "ckptd:\n  listen: host:65536", "key 'ckptd.listen'", "from 1 to 65535" },
		{ "ckptd:\n  listen: host:123456", "key 'ckptd.listen'", "from 1 to 65535" },
		{ "ckptd:\n  listen: \"host:\"", "key 'ckptd.listen'", "from 1 to 65535" },
		{ "ckptd:\n  listen: host:+80", "key 'ckptd.listen'", "from 1 to 65535" },
		{ "ckptd:\n  listen: \"::1:7720\"", "key 'ckptd.listen'", "in brackets" },
		{ "ckptd:\n  listen: \"[::1:7720\"", "key 'ckptd.listen'", "in brackets" },
		{ "ckptd:\n  listen: \"[]:7720\"", "key 'ckptd.listen'", "in brackets" },
		{ "ckptd:\n  listen: \"[zz]:7720\"", "key 'ckptd.listen'", "IPv6 address" },
		{ "ckptd:\n  listen: \"a b:7720\"", "key 'ckptd.listen'", "bad character" },
		{ "ckptd:\n  listen: \"\"", "key 'ckptd.listen'", "no ':PORT'" },
		{ "ckptd:\n  address: host", "key 'ckptd.address'", "no ':PORT'" },
		{ "ckptd:\n  socket: run/x.sock", "key 'ckptd.socket': expected an absolute path",
		  NULL },
		{ "ckptd:\n  socket: "
		  "/run/phalanx/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sock",
		  "key 'ckptd.socket': "
		  "value is 122 bytes long, at most 107 allowed",
		  "sockaddr_un" },
		{ "checkpoint:\n  keep: 0",
		  "key 'checkpoint.keep': expected an integer from 1 to "
		  "1000",
		  NULL },
		{ "checkpoint:\n  keep: 1001", "from 1 to 1000", NULL },
		{ "launcher:\n  hang_timeout: 9",
		  "key 'launcher.hang_timeout': expected a duration from 10 to 86400 seconds "
		  "(S, M:S, H:M:S, D-H, D-H:M or D-H:M:S), got '9'; out of range",
		  NULL },
		{ "launcher:\n  hang_timeout: 86401", "from 10 to 86400", NULL },
		{ "launcher:\n  hang_timeout: 1-00:00:01", "from 10 to 86400 seconds",
		  "out of range" },
		{ "launcher:\n  hang_timeout: 10:60", "expected a duration", "got '10:60'" },
		{ "launcher:\n  hang_timeout: 1-24", "expected a duration", "got '1-24'" },
		{ "launcher:\n  hang_timeout: 10m", "expected a duration", "got '10m'" },
		{ "launcher:\n  hang_timeout: [60]", "expected a duration", NULL },
		{ "launcher:\n  max_restarts: -1",
		  "key 'launcher.max_restarts': expected an integer "
		  "from 0 to 1000",
		  NULL },
		{ "launcher:\n  max_restarts: 1001", "from 0 to 1000", NULL },
		{ "- log_level: info",
		  "t.yaml:1:1: expected settings ('name: value' lines) at the "
		  "top level, got a list",
		  NULL },
		{ "just words", "t.yaml:1:1: expected settings", "got a single value" },
		{ "\"\"", "t.yaml:1:1: expected settings", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		refused(cases[i].text, cases[i].part1, cases[i].part2);
}

static void test_edge_values(void **state)
{
	struct phx_conf conf;

	assert_int_equal(load("health:\n  timeout: 1\ncheckpoint:\n  keep: +1\n"
			      "launcher:\n  hang_timeout: 86400\n  max_restarts: 1000\n"
			      "ckptd:\n  listen: \"localhost:1\"\n  address: \"[fe80::1]:65535\"\n"
			      "  socket: '/s'\n",
			      &conf),
			 0);
	assert_int_equal(conf.health.timeout_s, 1);
	assert_int_equal(conf.checkpoint.keep, 1);
	assert_int_equal(conf.launcher.hang_timeout_s, 86400);
	assert_int_equal(conf.launcher.max_restarts, 1000);
	assert_string_equal(conf.ckptd.listen, "localhost:1");
	assert_string_equal(conf.ckptd.address, "[fe80::1]:65535");
	assert_string_equal(conf.ckptd.socket, "/s");
	phx_conf_free(&conf);
	assert_int_equal(load("launcher:\n  max_restarts: -0\nckptd:\n  address: \"\"\n"
			      "placement:\n  topology_conf: ''\n",
			      &conf),
			 0);
	assert_int_equal(conf.launcher.max_restarts, 0);
	assert_string_equal(conf.ckptd.address, "");
	phx_conf_free(&conf);
	/* Durations as Slurm writes times; a bare number is seconds. */
	assert_int_equal(load("launcher:\n  hang_timeout: 10:00\n  straggler_window: 1-00:00:00\n"
			      "recovery:\n  fault_window: 2-12\n  slurm_poll: '0:05'\n"
			      "check:\n  timeout: 1:30:00\n  nccl_timeout: 90\n"
			      "ckptd:\n  interval_seconds: 6-23:30\n",
			      &conf),
			 0);
	assert_int_equal(conf.launcher.hang_timeout_s, 600);
	assert_int_equal(conf.launcher.straggler_window_s, 86400);
	assert_int_equal(conf.recovery.fault_window_s, 216000);
	assert_int_equal(conf.recovery.slurm_poll_s, 5);
	assert_int_equal(conf.check.timeout_s, 5400);
	assert_int_equal(conf.check.nccl_timeout_s, 90);
	assert_int_equal(conf.ckptd.interval_seconds, 603000);
	phx_conf_free(&conf);
	/* yes/on are booleans only where a boolean is expected. */
	assert_int_equal(load("health: {enabled: off, drain_on_failure: yes}\n", &conf), 0);
	assert_false(conf.health.enabled);
	assert_true(conf.health.drain_on_failure);
	phx_conf_free(&conf);
}

/* Slurm's time forms (sbatch(1) --time), except that a bare number is seconds. */
static void test_duration_forms(void **state)
{
	static const struct {
		const char *text;
		long long seconds;
	} cases[] = {
		{ "0", 0 },
		{ "90", 90 },
		{ "007", 7 },
		{ "10:00", 600 },
		{ "90:59", 5459 },
		{ "1:30:00", 5400 },
		{ "100:00:00", 360000 },
		{ "2-12", 216000 },
		{ "2-12:30", 217800 },
		{ "1-00:00:00", 86400 },
		{ "999999999", 999999999 },
		{ "999999999-23:59:59", 999999999LL * 86400 + 86399 },
		{ "", -1 },
		{ "1000000000", -1 },
		{ "10:", -1 },
		{ ":10", -1 },
		{ "1:60", -1 },
		{ "1:60:00", -1 },
		{ "1:2:3:4", -1 },
		{ "1-24", -1 },
		{ "1-", -1 },
		{ "-1", -1 },
		{ "1-2-3", -1 },
		{ "1-2:3:4:5", -1 },
		{ "1.5", -1 },
		{ " 10", -1 },
		{ "10s", -1 },
		{ "+10", -1 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (phx_duration_parse(cases[i].text) != cases[i].seconds)
			fail_msg("'%s': %lld, expected %lld", cases[i].text,
				 phx_duration_parse(cases[i].text), cases[i].seconds);
	assert_int_equal(phx_duration_parse(NULL), -1);
}

static void test_hostile_input(void **state)
{
	struct phx_conf conf;
	size_t n = 10000, cap = n * 24 + 64, used;
	char *buf = malloc(cap);

	assert_non_null(buf);
	/* 10k keys inside fabric: skipped, not parsed by this loader. */
	used = (size_t)snprintf(buf, cap, "log_level: warn\nfabric:\n");
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, cap - used, "  k%zu: %zu\n", i, i);
	assert_int_equal(load(buf, &conf), 0);
	assert_int_equal(conf.log_level, PHX_LOG_WARN);
	phx_conf_free(&conf);
	/* 10k unknown keys: the first is reported. */
	used = 0;
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, cap - used, "k%zu: %zu\n", i, i);
	refused(buf, "t.yaml:1:1: unknown key 'k0'", NULL);
	/* A duplicate at the end of 10k keys in fabric is still a duplicate. */
	used = (size_t)snprintf(buf, cap, "fabric:\n");
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, cap - used, "  k%zu: %zu\n", i, i);
	snprintf(buf + used, cap - used, "  k17: again\n");
	refused(buf, "t.yaml:10002:3: duplicate key 'k17' (first at line 19)", NULL);
	free(buf);

	refused("log_level: &l info\nx: *l\n", "t.yaml:1:12: anchor '&l' is not allowed", NULL);
	refused("log_level: info\n---\nlog_level: debug\n", "t.yaml:2:1: a second document", NULL);
	refused("log_level: info\nlog_level: debug\n",
		"t.yaml:2:1: duplicate key 'log_level' (first at line 1)", NULL);
	refused("health:\n  timeout: 5\nhealth:\n  enabled: no\n", "t.yaml:3:1: duplicate key",
		NULL);
	refused("health:\n\ttimeout: 5\n", "t.yaml:2:1: tab character", NULL);
	refused("fabric: "
		"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
		"]",
		"t.yaml:1:40: nested more than 32 levels deep", NULL);
	refused("log_level: !!binary aW5mbw==\n", "t.yaml:1:12: tag", NULL);
	refused("key_file: \"/a\\0b\"\n", "t.yaml:1:11: a value holds a NUL character", NULL);
	refused("log_level: \xc3\x28\n", "t.yaml:1:", "UTF-8");
	refused("log_level: info\n? [a]\n: b\n", "t.yaml:2:3: a mapping key must be a plain word",
		NULL);
	assert_int_equal(
		phx_conf_load_buffer("t.yaml", "log_level: info\0x", 17, &conf, err, sizeof(err)),
		-1);
	assert_string_equal(err, "t.yaml:1:16: NUL byte; the file must be UTF-8 text "
				 "(UTF-16 is not supported)");
	assert_defaults(&conf);
	phx_conf_free(&conf);
	assert_int_equal(load("\xef\xbb\xbflog_level: debug\nhealth:\n  timeout: 7\n", &conf), 0);
	assert_int_equal(conf.log_level, PHX_LOG_DEBUG);
	assert_int_equal(conf.health.timeout_s, 7);
	phx_conf_free(&conf);
}

static void test_never_half_applied(void **state)
{
	struct phx_conf conf;

	/* Good values before the bad one are dropped with it. */
	refused_exact("log_level: debug\nkey_file: /k\nhealth:\n  enabled: false\n  timeout: 0\n",
		      "t.yaml:5:12: key 'health.timeout': expected a duration from 1 to 3600 "
		      "seconds (S, M:S, H:M:S, D-H, D-H:M or D-H:M:S), got '0'; out of range");
	/* A failed load over a loaded conf leaves defaults and no leak. */
	assert_int_equal(load(full, &conf), 0);
	phx_conf_free(&conf);
	assert_int_equal(load("log_level: [", &conf), -1);
	assert_defaults(&conf);
	phx_conf_free(&conf);
	/* No error buffer: still refused, nothing written. */
	assert_int_equal(phx_conf_load_buffer("t", "x: 1", 4, &conf, NULL, 0), -1);
	phx_conf_free(&conf);
	assert_int_equal(phx_conf_load_buffer(NULL, "x: 1", 4, &conf, err, sizeof(err)), -1);
	assert_true(!strncmp(err, "(config):1:1: unknown key 'x'", 29));
	phx_conf_free(&conf);
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/phx-test-conf.XXXXXX";
	struct phx_conf conf;
	int fd = mkstemp(path);
	const char text[] = "placement:\n  mode: block\n";
	char want[256];

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	assert_int_equal(phx_conf_load_file(path, &conf, err, sizeof(err)), 0);
	assert_int_equal(conf.placement.mode, PHX_PLACE_BLOCK);
	assert_string_equal(conf.source, path);
	phx_conf_free(&conf);
	fd = open(path, O_WRONLY | O_APPEND);
	assert_int_equal(write(fd, "  mode: off\n", 12), 12);
	close(fd);
	assert_int_equal(phx_conf_load_file(path, &conf, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "%s:3:3: duplicate key 'mode' (first at line 2); "
		 "keep one of them",
		 path);
	assert_string_equal(err, want);
	assert_defaults(&conf);
	phx_conf_free(&conf);
	unlink(path);
	assert_int_equal(phx_conf_load_file(path, &conf, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: cannot read: No such file or directory", path);
	assert_string_equal(err, want);
	assert_defaults(&conf);
	phx_conf_free(&conf);
}

/* A user's file at a scratch path with text; the path is returned (static). */
static const char *user_file(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/phx-test-user.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* The user's layer: only users.settable, never the site's own keys, origins shown. */
static void test_user_layer(void **state)
{
	struct phx_conf conf;
	const char *path;
	char want[256], *dump = NULL;
	size_t len = 0;
	FILE *out;

	(void)state;
	assert_int_equal(load("checkpoint:\n  keep: 2\n", &conf), 0);
	path = user_file("checkpoint:\n  keep: 7\nlauncher:\n  max_restarts: 1\n");
	assert_int_equal(phx_conf_load_user(&conf, path, err, sizeof(err)), 0);
	assert_int_equal(conf.checkpoint.keep, 7);
	assert_int_equal(conf.launcher.max_restarts, 1);
	/* show --effective says where the user's values came from. */
	out = open_memstream(&dump, &len);
	phx_conf_dump(&conf, out);
	fclose(out);
	snprintf(want, sizeof(want), "  keep: 7  # %s:2\n", path);
	assert_non_null(strstr(dump, want));
	snprintf(want, sizeof(want), "  max_restarts: 1  # %s:4\n", path);
	assert_non_null(strstr(dump, want));
	free(dump);
	unlink(path);

	/* Isolation is never a user's, even where the site lists it. */
	path = user_file("isolation:\n  mode: off\n");
	assert_int_equal(phx_conf_load_user(&conf, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "%s:2:3: key 'isolation.mode' is the site's to set, never a user's; remove it "
		 "from this file",
		 path);
	assert_string_equal(err, want);
	assert_int_equal(conf.isolation.mode, PHX_ISOLATE_JOB);
	unlink(path);
	/* A key the site did not list: nothing of the file is applied. */
	path = user_file("checkpoint:\n  keep: 9\nplacement:\n  mode: off\n");
	assert_int_equal(phx_conf_load_user(&conf, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, ":4:3: key 'placement.mode' is not one this site lets users "
				    "set (users.settable: log_level, checkpoint.keep,"));
	assert_int_equal(conf.checkpoint.keep, 7);
	assert_int_equal(conf.placement.mode, PHX_PLACE_TOPO);
	unlink(path);
	phx_conf_free(&conf);

	/* The site narrows the list, and cannot widen it to its own keys. */
	assert_int_equal(load("users:\n  settable: [checkpoint.keep]\n", &conf), 0);
	path = user_file("launcher:\n  max_restarts: 5\n");
	assert_int_equal(phx_conf_load_user(&conf, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "(users.settable: checkpoint.keep)"));
	unlink(path);
	phx_conf_free(&conf);
	refused("users:\n  settable: [isolation.mode]\n",
		"'isolation.mode' is the site's alone: users may never set it", NULL);
	refused("users:\n  settable: [key_file]\n", "'key_file' is the site's alone", NULL);
	refused("users:\n  settable: [checkpoint.kep]\n",
		"'checkpoint.kep' is not a key of phalanx.yaml", NULL);

	/* No file is no error; where the file is looked for. */
	assert_int_equal(load("", &conf), 0);
	assert_int_equal(phx_conf_load_user(&conf, "/nonexistent/phalanx.yaml", err, sizeof(err)),
			 0);
	phx_conf_free(&conf);
	setenv("PHALANX_USER_CONFIG", "", 1);
	assert_int_equal(phx_conf_user_path(want, sizeof(want)), -1);
	unsetenv("PHALANX_USER_CONFIG");
	setenv("XDG_CONFIG_HOME", "/x", 1);
	assert_int_equal(phx_conf_user_path(want, sizeof(want)), 0);
	assert_string_equal(want, "/x/phalanx/phalanx.yaml");
	unsetenv("XDG_CONFIG_HOME");
	setenv("HOME", "/home/u", 1);
	assert_int_equal(phx_conf_user_path(want, sizeof(want)), 0);
	assert_string_equal(want, "/home/u/.config/phalanx/phalanx.yaml");
}

static void test_mode_names(void **state)
{
	enum phx_place_mode p = PHX_PLACE_OFF;
	enum phx_isolate_mode m = PHX_ISOLATE_OFF;

	assert_int_equal(phx_place_mode_parse("topo", &p), 0);
	assert_int_equal(p, PHX_PLACE_TOPO);
	assert_int_equal(phx_place_mode_parse("block", &p), 0);
	assert_int_equal(p, PHX_PLACE_BLOCK);
	assert_int_equal(phx_place_mode_parse("off", &p), 0);
	assert_int_equal(p, PHX_PLACE_OFF);
	assert_int_equal(phx_place_mode_parse("Topo", &p), -1);
	assert_int_equal(phx_place_mode_parse("", &p), -1);
	assert_int_equal(phx_place_mode_parse(NULL, &p), -1);
	assert_int_equal(p, PHX_PLACE_OFF);
	assert_string_equal(phx_place_mode_name(PHX_PLACE_TOPO), "topo");
	assert_string_equal(phx_place_mode_name(PHX_PLACE_BLOCK), "block");
	assert_string_equal(phx_place_mode_name(PHX_PLACE_OFF), "off");
	assert_string_equal(phx_place_mode_name((enum phx_place_mode)9), "unknown");

	assert_int_equal(phx_isolate_mode_parse("job", &m), 0);
	assert_int_equal(m, PHX_ISOLATE_JOB);
	assert_int_equal(phx_isolate_mode_parse("task", &m), 0);
	assert_int_equal(m, PHX_ISOLATE_TASK);
	assert_int_equal(phx_isolate_mode_parse("off", &m), 0);
	assert_int_equal(m, PHX_ISOLATE_OFF);
	assert_int_equal(phx_isolate_mode_parse("node", &m), -1);
	assert_int_equal(phx_isolate_mode_parse(NULL, &m), -1);
	assert_string_equal(phx_isolate_mode_name(PHX_ISOLATE_JOB), "job");
	assert_string_equal(phx_isolate_mode_name(PHX_ISOLATE_TASK), "task");
	assert_string_equal(phx_isolate_mode_name(PHX_ISOLATE_OFF), "off");
	assert_string_equal(phx_isolate_mode_name((enum phx_isolate_mode) - 1), "unknown");
}

/* health.ib: a boolean in any spelling, or auto. */
static void test_tristate(void **state)
{
	static const struct {
		const char *text;
		enum phx_tristate want;
	} good[] = {
		{ "health: {ib: auto}", PHX_TRI_AUTO }, { "health: {ib: \"auto\"}", PHX_TRI_AUTO },
		{ "health: {ib: true}", PHX_TRI_TRUE }, { "health: {ib: Yes}", PHX_TRI_TRUE },
		{ "health: {ib: on}", PHX_TRI_TRUE },	{ "health: {ib: false}", PHX_TRI_FALSE },
		{ "health: {ib: NO}", PHX_TRI_FALSE },	{ "health: {ib: off}", PHX_TRI_FALSE },
	};
	struct phx_conf conf;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (load(good[i].text, &conf))
			fail_msg("'%s' refused: %s", good[i].text, err);
		assert_int_equal(conf.health.ib, good[i].want);
		phx_conf_free(&conf);
	}
	refused("health:\n  ib: maybe",
		"t.yaml:2:7: key 'health.ib': expected one of auto, true, "
		"false, got 'maybe'",
		NULL);
	refused("health:\n  ib: atuo", "key 'health.ib'", "did you mean 'auto'?");
	refused("health:\n  ib: 1", "key 'health.ib'", "got '1'");
	refused("health:\n  ib:", "key 'health.ib'", NULL);
	refused("health:\n  ib: [true]", "key 'health.ib'", "got a list");
	assert_string_equal(phx_tristate_name(PHX_TRI_AUTO), "auto");
	assert_string_equal(phx_tristate_name(PHX_TRI_TRUE), "true");
	assert_string_equal(phx_tristate_name(PHX_TRI_FALSE), "false");
	assert_string_equal(phx_tristate_name((enum phx_tristate)5), "unknown");
}

/* health.paths: a list of absolute paths; the % escapes of patterns. */
static void test_lists_and_patterns(void **state)
{
	struct phx_conf conf, back;
	char *buf;
	size_t used = 0, cap = 70 * 16;

	assert_int_equal(load("health:\n  paths: []\n", &conf), 0);
	assert_int_equal(conf.health.paths.n, 0);
	phx_conf_free(&conf);
	assert_int_equal(load("health:\n  paths:\n", &conf), 0);
	assert_int_equal(conf.health.paths.n, 0);
	phx_conf_free(&conf);
	assert_int_equal(load("health:\n  paths: [/a, \"/b c\", '/d#e']\n"
			      "  gpu_device: \"\"\n  sysfs_root: /x/%n/%%\n",
			      &conf),
			 0);
	assert_int_equal(conf.health.paths.n, 3);
	assert_string_equal(conf.health.paths.items[2], "/d#e");
	assert_string_equal(conf.health.gpu_device, "");
	dump_reload(&conf, &back);
	assert_same(&conf, &back);
	phx_conf_free(&back);
	phx_conf_free(&conf);

	refused("health:\n  paths: /ckpt",
		"t.yaml:2:10: key 'health.paths': expected a list of "
		"absolute paths, like [/a, /b], got a single value",
		NULL);
	refused("health:\n  paths: {a: 1}", "key 'health.paths'", "got a mapping");
	refused("health:\n  paths: [/a, ckpt]",
		"t.yaml:2:15: key 'health.paths[1]': expected an "
		"absolute path",
		NULL);
	refused("health:\n  paths: [/a, \"\"]", "key 'health.paths[1]': expected an absolute path",
		NULL);
	refused("health:\n  paths: [/a, [/b]]", "key 'health.paths[1]': expected a string", NULL);
	refused("health:\n  paths: [/a, ~]", "key 'health.paths[1]': expected a string", NULL);
	refused("health:\n  paths: [\"/a\\nb\"]", "key 'health.paths[0]': control character", NULL);
	refused("health:\n  paths: [/ckpt/%n]",
		"key 'health.paths[0]': in '/ckpt/%n': '%n' is "
		"not known here; use %u for a number, %j for the job id, %% for a percent sign",
		NULL);
	refused("health:\n  paths: [/ckpt/50%]", "'%' is not known here", NULL);
	refused("health:\n  gpu_device: /dev/nvidia", "key 'health.gpu_device'", "exactly one %u");
	refused("health:\n  gpu_device: /dev/%u/nvidia%u", "exactly one %u", NULL);
	refused("health:\n  gpu_device: /dev/nvidia%d",
		"'%d' is not known here; use %u for a "
		"number, %% for a percent sign",
		NULL);
	refused("health:\n  gpu_device: nvidia%u", "expected an absolute path", NULL);
	refused("health:\n  sysfs_root: /srv/%u/sys", "key 'health.sysfs_root'",
		"use %n for the node name");
	refused("health:\n  dev_root: \"\"", "key 'health.dev_root': expected an absolute path",
		NULL);
	refused("health:\n  command: nhc", "key 'health.command': expected an absolute path", NULL);
	/* Outside patterns a percent sign is just a character. */
	assert_int_equal(load("health:\n  command: \"/bin/echo 100%\"\n", &conf), 0);
	assert_string_equal(conf.health.command, "/bin/echo 100%");
	phx_conf_free(&conf);

	buf = malloc(cap);
	assert_non_null(buf);
	used = (size_t)snprintf(buf, cap, "health:\n  paths:\n");
	for (int i = 0; i < 65; i++)
		used += (size_t)snprintf(buf + used, cap - used, "    - /p%d\n", i);
	refused(buf, "key 'health.paths': 65 entries, at most 64 allowed", NULL);
	free(buf);
	refused("health:\n  gpu_count: 1025",
		"key 'health.gpu_count': expected an integer from "
		"0 to 1024",
		NULL);
	refused("health:\n  gpu_count: -1", "key 'health.gpu_count'", NULL);
	refused("health:\n  ib_min_rate_gbps: 100001", "key 'health.ib_min_rate_gbps'", NULL);
	refused("health:\n  min_free_gb: -5", "key 'health.min_free_gb'", NULL);
}

/* log_level in the file uses the same names as the logger. */
static void test_log_level_names(void **state)
{
	for (int l = PHX_LOG_ERROR; l <= PHX_LOG_DEBUG; l++) {
		struct phx_conf conf;
		char text[64];

		snprintf(text, sizeof(text), "log_level: %s\n",
			 phx_log_level_name((enum phx_log_level)l));
		assert_int_equal(load(text, &conf), 0);
		assert_int_equal(conf.log_level, l);
		phx_conf_free(&conf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),      cmocka_unit_test(test_empty_files),
		cmocka_unit_test(test_full),	      cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_dump_text),     cmocka_unit_test(test_sample_file),
		cmocka_unit_test(test_unknown_keys),  cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_edge_values),   cmocka_unit_test(test_duration_forms),
		cmocka_unit_test(test_hostile_input), cmocka_unit_test(test_never_half_applied),
		cmocka_unit_test(test_load_file),     cmocka_unit_test(test_user_layer),
		cmocka_unit_test(test_mode_names),    cmocka_unit_test(test_log_level_names),
		cmocka_unit_test(test_tristate),      cmocka_unit_test(test_lists_and_patterns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

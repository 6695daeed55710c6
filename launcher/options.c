/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx-launch's options; pure, so every rule is unit tested. */
#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "launcher/options.h"
#include "launcher/role.h"

enum {
	OPT_AGENT = 0x100,
	OPT_NPROC,
	OPT_LAYOUT,
	OPT_PLACE,
	OPT_HANG,
	OPT_RESTARTS,
	OPT_TERM,
	OPT_SYNC,
	OPT_PEER_TIMEOUT,
	OPT_EVIDENCE,
	OPT_LOGDIR,
	OPT_RUNID,
	OPT_CONFIG,
	OPT_ROLE,
	OPT_PREEMPT_SIG,
	OPT_PREEMPT_GRACE,
	OPT_STRAGGLER,
	OPT_STRAGGLER_WINDOW,
	OPT_SLOW_NODES,
	OPT_STAND_INS,
	OPT_CKPT_DIR,
	OPT_SAVE_INTERVAL,
	OPT_KEEP,
	OPT_LOG_TIME,
	OPT_STARTUP_TIMES,
	OPT_STEP_ROLE,
	OPT_HELP,
	OPT_VERSION,
};

static const struct option agent_opts[] = {
	{ "agent", no_argument, NULL, OPT_AGENT },
	{ "nproc-per-node", required_argument, NULL, OPT_NPROC },
	{ "layout", required_argument, NULL, OPT_LAYOUT },
	{ "place", required_argument, NULL, OPT_PLACE },
	{ "hang-timeout", required_argument, NULL, OPT_HANG },
	{ "max-restarts", required_argument, NULL, OPT_RESTARTS },
	{ "term-timeout", required_argument, NULL, OPT_TERM },
	{ "sync-interval-ms", required_argument, NULL, OPT_SYNC },
	{ "peer-timeout-ms", required_argument, NULL, OPT_PEER_TIMEOUT },
	{ "evidence-timeout", required_argument, NULL, OPT_EVIDENCE },
	{ "log-dir", required_argument, NULL, OPT_LOGDIR },
	{ "run-id", required_argument, NULL, OPT_RUNID },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "role", required_argument, NULL, OPT_ROLE },
	{ "preempt-signal", required_argument, NULL, OPT_PREEMPT_SIG },
	{ "preempt-grace", required_argument, NULL, OPT_PREEMPT_GRACE },
	{ "straggler-threshold", required_argument, NULL, OPT_STRAGGLER },
	{ "straggler-window", required_argument, NULL, OPT_STRAGGLER_WINDOW },
	{ "slow-nodes", required_argument, NULL, OPT_SLOW_NODES },
	{ "stand-ins", required_argument, NULL, OPT_STAND_INS },
	{ "ckpt-dir", required_argument, NULL, OPT_CKPT_DIR },
	{ "save-interval", required_argument, NULL, OPT_SAVE_INTERVAL },
	{ "keep", required_argument, NULL, OPT_KEEP },
	{ "log-time", no_argument, NULL, OPT_LOG_TIME },
	{ "startup-times", no_argument, NULL, OPT_STARTUP_TIMES },
	{ "step-role", required_argument, NULL, OPT_STEP_ROLE },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
};

#define N_AGENT_OPTS (sizeof(agent_opts) / sizeof(agent_opts[0]))
/* The agent's and the driver's options, one getopt table. */
static struct option long_opts[N_AGENT_OPTS + PHX_DRIVER_NOPTS + 1];

static void build_table(void)
{
	memcpy(long_opts, agent_opts, sizeof(agent_opts));
	memcpy(long_opts + N_AGENT_OPTS, phx_driver_long_opts, sizeof(phx_driver_long_opts));
	memset(&long_opts[N_AGENT_OPTS + PHX_DRIVER_NOPTS], 0, sizeof(*long_opts));
}

void phx_launch_usage(FILE *out)
{
	fprintf(out,
		"usage: phalanx-launch [OPTIONS] -- COMMAND [ARGS]   (in a batch script)\n"
		"       srun --mpi=pmix --ntasks-per-node=1 phalanx-launch --agent [OPTIONS] -- "
		"COMMAND [ARGS]\n\n"
		"  --agent                 run as the agent of this node (inside a step)\n"
		"  --nproc-per-node N      workers per node (default: one per GPU, at least 1)\n"
		"  --layout SPEC           parallelism layout (default dp=*)\n"
		"  --place topo|block      rank placement (default topo)\n"
		"  --hang-timeout SECONDS  no heartbeat progress for this long is a hang\n"
		"  --max-restarts N        in-step restarts of all workers before giving up\n"
		"  --term-timeout SECONDS  TERM to KILL when stopping workers (default 10)\n"
		"  --sync-interval-ms MS   between agreement rounds of the agents (default 1000)\n"
		"  --peer-timeout-ms MS    an agent silent this long: its node is lost (0: off,\n"
		"                          leave it to Slurm; default 600)\n"
		"  --evidence-timeout S    per tool when capturing a hung worker (default 20)\n"
		"  --log-dir DIR           per-rank log files and error files\n"
		"  --run-id ID             TORCHELASTIC_RUN_ID (default JOBID.STEPID)\n"
		"  --config FILE           phalanx.yaml (default %s)\n"
		"  --role NAME[:FIELD]...  a role of an MPMD job (repeatable); fields: nodes=N\n"
		"                          or nodes=MIN-MAX (an elastic pool), nproc=N,\n"
		"                          restart=group|self, max-restarts=N, spares=N,\n"
		"                          max-relaunches=N, fatal=yes|no, a layout (tp=8,pp=2),\n"
		"                          cmd=COMMAND (last); in a batch script each role runs\n"
		"                          in a step of its own\n"
		"  --preempt-signal SIG    asks the workers to save and stop (default USR1; none)\n"
		"  --preempt-grace SECONDS after it, until the workers are stopped (default 60)\n"
		"  --straggler-threshold P a rank P%% slower than its role's median step time\n"
		"                          is a straggler (0: off)\n"
		"  --straggler-window S    seconds of steps the step time is measured over\n"
		"  --ckpt-dir DIR          this job's checkpoint.shared_dir (may hold %%j, %%u)\n"
		"  --save-interval STEPS   this job's checkpoint.interval\n"
		"  --keep N                this job's checkpoint.keep\n"
		"  --log-time              the local time on each line (launcher.log_time)\n"
		"  --startup-times         each agent logs when its start-up phases ended\n"
		"  --slow-nodes HOSTLIST   nodes placement keeps off the critical path (the "
		"driver's preflight)\n"
		"  --stand-ins LOST=SPARE,...  each SPARE takes LOST's ranks (the driver's "
		"relaunch)\n"
		"  --step-role NAME        this step runs role NAME alone (the driver's role "
		"steps)\n",
		PHX_CONF_DEFAULT_PATH);
	phx_driver_usage(out);
	fprintf(out, "\nSECONDS and S take Slurm's time forms too: 90, 10:00, 1:30:00, "
		     "1-00:00:00.\nSee phalanx-launch(1).\n");
}

static int parse_int(const char *opt, const char *s, long min, long max, int *out, char *err,
		     size_t errlen)
{
	char *end;
	long v;

	v = strtol(s, &end, 10);
	if (!*s || *end || v < min || v > max)
		return phx_errf(err, errlen, "--%s '%s' is not a whole number in %ld..%ld", opt, s,
				min, max);
	*out = (int)v;
	return 0;
}

/* A duration (phx_duration_parse(): 90, 10:00, 1-00:00:00) of min to max seconds. */
static int parse_seconds(const char *opt, const char *s, long min, long max, int *out, char *err,
			 size_t errlen)
{
	long long v = phx_duration_parse(s);

	if (v < min || v > max)
		return phx_errf(err, errlen,
				"--%s '%s' is not a duration of %ld to %ld seconds (S, M:S, H:M:S "
				"or D-H:M:S)",
				opt, s, min, max);
	*out = (int)v;
	return 0;
}

/* 0 (off) or at least 100 ms: beats go out every sixth of it, not faster than a scheduler tick. */
static int parse_peer_timeout(const char *s, int *out, char *err, size_t errlen)
{
	if (parse_int("peer-timeout-ms", s, 0, 600000, out, err, errlen) < 0)
		return -1;
	if (*out && *out < 100)
		return phx_errf(err, errlen,
				"--peer-timeout-ms %d is too short: use 0 (off) or 100..600000 ms",
				*out);
	return 0;
}

static void defaults(struct phx_launch_opts *o)
{
	memset(o, 0, sizeof(*o));
	phx_driver_defaults(&o->driver);
	o->place = PHX_PLACE_TOPO;
	o->hang_timeout_s = -1;
	o->peer_timeout_ms = -1;
	o->max_restarts = -1;
	o->term_timeout_s = 10;
	o->sync_ms = 1000;
	o->evidence_timeout_s = 20;
	o->preempt_sig = SIGUSR1;
	o->preempt_grace_s = 60;
	o->straggler_pct = -1;
	o->straggler_window_s = -1;
	o->straggler_min_steps = -1;
	o->log_time = -1;
}

/* The signals the agent handles; any of them may be the preemption signal. */
static int parse_signal(const char *s, int *sig, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = { { "USR1", SIGUSR1 },
		     { "USR2", SIGUSR2 },
		     { "TERM", SIGTERM },
		     { "INT", SIGINT },
		     { "none", 0 } };

	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		if (!strcmp(s, sigs[i].name)) {
			*sig = sigs[i].sig;
			return 0;
		}
	}
	return phx_errf(err, errlen, "--preempt-signal '%s': use USR1, USR2, TERM, INT or none", s);
}

static int add_role(struct phx_launch_opts *o, const char *spec, char *err, size_t errlen)
{
	struct phx_role *r = &o->roles[o->nroles];

	if (o->nroles >= PHX_ROLE_MAX)
		return phx_errf(err, errlen, "--role: at most %d roles", PHX_ROLE_MAX);
	if (phx_role_parse(spec, r, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < o->nroles; i++) {
		if (!strcmp(o->roles[i].name, r->name)) {
			phx_role_free(r);
			return phx_errf(err, errlen,
					"--role %s is given twice; give roles "
					"different names",
					r->name);
		}
	}
	o->nroles++;
	return 0;
}

void phx_launch_opts_free(struct phx_launch_opts *o)
{
	for (size_t i = 0; i < o->nroles; i++)
		phx_role_free(&o->roles[i]);
	o->nroles = 0;
}

static int parse_one(int c, const char *arg, struct phx_launch_opts *o, char *err, size_t errlen)
{
	int v;

	switch (c) {
	case OPT_AGENT:
		o->agent = true;
		return 0;
	case OPT_NPROC:
		if (parse_int("nproc-per-node", arg, 1, 4096, &v, err, errlen))
			return -1;
		o->nproc_per_node = (unsigned)v;
		return 0;
	case OPT_LAYOUT:
		o->layout = arg;
		return 0;
	case OPT_PLACE:
		if (phx_place_mode_parse(arg, &o->place) < 0 || o->place == PHX_PLACE_OFF)
			return phx_errf(err, errlen, "--place '%s': use topo or block", arg);
		return 0;
	case OPT_HANG:
		return parse_seconds("hang-timeout", arg, 1, 86400, &o->hang_timeout_s, err,
				     errlen);
	case OPT_RESTARTS:
		return parse_int("max-restarts", arg, 0, 1000, &o->max_restarts, err, errlen);
	case OPT_TERM:
		return parse_seconds("term-timeout", arg, 0, 3600, &o->term_timeout_s, err, errlen);
	case OPT_SYNC:
		return parse_int("sync-interval-ms", arg, 10, 60000, &o->sync_ms, err, errlen);
	case OPT_PEER_TIMEOUT:
		return parse_peer_timeout(arg, &o->peer_timeout_ms, err, errlen);
	case OPT_EVIDENCE:
		return parse_seconds("evidence-timeout", arg, 1, 600, &o->evidence_timeout_s, err,
				     errlen);
	case OPT_LOGDIR:
		if (!*arg)
			return phx_errf(err, errlen, "--log-dir needs a directory");
		o->log_dir = arg;
		return 0;
	case OPT_RUNID:
		if (!*arg || strpbrk(arg, " \t\n"))
			return phx_errf(err, errlen, "--run-id '%s' must be one word", arg);
		o->run_id = arg;
		return 0;
	case OPT_CONFIG:
		o->config = arg;
		return 0;
	case OPT_ROLE:
		o->explicit_roles = true;
		return add_role(o, arg, err, errlen);
	case OPT_PREEMPT_SIG:
		return parse_signal(arg, &o->preempt_sig, err, errlen);
	case OPT_PREEMPT_GRACE:
		return parse_seconds("preempt-grace", arg, 0, 86400, &o->preempt_grace_s, err,
				     errlen);
	case OPT_STRAGGLER:
		return parse_int("straggler-threshold", arg, 0, 100000, &o->straggler_pct, err,
				 errlen);
	case OPT_STRAGGLER_WINDOW:
		return parse_seconds("straggler-window", arg, 1, 86400, &o->straggler_window_s, err,
				     errlen);
	case OPT_CKPT_DIR:
		o->ckpt_dir = arg;
		return 0;
	case OPT_SAVE_INTERVAL:
		o->save_interval = arg;
		return 0;
	case OPT_KEEP:
		o->keep = arg;
		return 0;
	case OPT_STARTUP_TIMES:
		o->startup_times = true;
		return 0;
	case OPT_STEP_ROLE:
		o->step_role = arg;
		return 0;
	case OPT_LOG_TIME:
		o->log_time = 1;
		return 0;
	case OPT_STAND_INS:
		if (!*arg || strpbrk(arg, " \t\n"))
			return phx_errf(
				err, errlen,
				"--stand-ins '%s' must be LOST=SPARE pairs separated by commas",
				arg);
		o->stand_ins = arg;
		return 0;
	case OPT_SLOW_NODES:
		if (strpbrk(arg, " \t\n"))
			return phx_errf(err, errlen,
					"--slow-nodes '%s' must be one Slurm host list, like "
					"node[1-3]",
					arg);
		o->slow_nodes = *arg ? arg : NULL;
		return 0;
	}
	if (c >= PHX_DOPT_SPARES)
		return phx_driver_parse_one(c, arg, &o->driver, err, errlen);
	return phx_errf(err, errlen, "unknown option; run 'phalanx-launch --help'");
}

/* Without --role: one role, "default", on every node. Every role needs a command. */
static int finish_roles(struct phx_launch_opts *o, char *err, size_t errlen)
{
	size_t open = 0;

	if (!o->nroles) {
		memset(&o->roles[0], 0, sizeof(o->roles[0]));
		snprintf(o->roles[0].name, sizeof(o->roles[0].name), "default");
		o->roles[0].max_restarts = -1;
		o->roles[0].max_relaunches = -1;
		o->nroles = 1;
	}
	/* The driver's step of one role: that role on every node of the step. */
	if (o->step_role && phx_roles_keep(o->roles, &o->nroles, o->step_role, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < o->nroles; i++) {
		open += !o->roles[i].nodes;
		if (!o->roles[i].cmd && o->argc < 1)
			goto no_command;
	}
	if (open > 1)
		return phx_errf(err, errlen,
				"%zu roles leave nodes= out; only one role can take the nodes "
				"the others leave",
				open);
	return 0;
no_command:
	if (!o->explicit_roles)
		return phx_errf(err, errlen,
				"no command to run; put it after '--', e.g. "
				"'phalanx-launch --agent -- python train.py'");
	return phx_errf(err, errlen,
			"no command to run for some roles; give them cmd=COMMAND or put a "
			"command after '--'");
}

static int parse(int argc, char **argv, struct phx_launch_opts *o, char *err, size_t errlen)
{
	int c;

	defaults(o);
	build_table();
	optind = 0; /* GNU: a fresh scan, also when called again */
	opterr = 0;
	/* '+': the worker command's own options are not ours. */
	while ((c = getopt_long(argc, argv, "+h", long_opts, NULL)) != -1) {
		if (c == 'h' || c == OPT_HELP) {
			phx_launch_usage(stdout);
			return 1;
		}
		if (c == OPT_VERSION) {
			printf("phalanx-launch %s\n", PACKAGE_VERSION);
			return 1;
		}
		if (c == '?' || c == ':') {
			if (optopt > 0 && optopt < 0x80)
				return phx_errf(err, errlen,
						"option '-%c' is unknown or lacks its "
						"value; run 'phalanx-launch --help'",
						optopt);
			return phx_errf(err, errlen,
					"option '%s' is unknown or lacks its value; "
					"run 'phalanx-launch --help'",
					argv[optind - 1]);
		}
		if (parse_one(c, optarg, o, err, errlen) < 0)
			return -1;
	}
	o->argv = argv + optind;
	o->argc = argc - optind;
	if (finish_roles(o, err, errlen) < 0)
		return -1;
	if (o->agent && o->driver.any)
		return phx_errf(err, errlen,
				"--spares, --elastic, --max-relaunches, --same-failure-limit, "
				"--[no-]drain-bad-nodes and --srun are for the driver (without "
				"--agent), not for an agent");
	return 0;
}

int phx_launch_override_conf(const struct phx_launch_opts *o, struct phx_conf *conf, char *err,
			     size_t errlen)
{
	const struct {
		const char *value, *key, *opt;
	} set[] = {
		{ o->ckpt_dir, "checkpoint.shared_dir", "--ckpt-dir" },
		{ o->save_interval, "checkpoint.interval", "--save-interval" },
		{ o->keep, "checkpoint.keep", "--keep" },
	};

	for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++)
		if (set[i].value &&
		    phx_conf_override(conf, set[i].key, set[i].value, set[i].opt, err, errlen) < 0)
			return -1;
	return 0;
}

void phx_launch_apply_conf(struct phx_launch_opts *o, const struct phx_conf *conf)
{
	if (o->log_time < 0)
		o->log_time = conf->launcher.log_time;
	if (o->hang_timeout_s < 0)
		o->hang_timeout_s = conf->launcher.hang_timeout_s;
	if (o->peer_timeout_ms < 0)
		o->peer_timeout_ms = conf->launcher.peer_timeout_ms;
	/* The option's floor for phalanx.yaml's value too. */
	if (o->peer_timeout_ms > 0 && o->peer_timeout_ms < 100)
		o->peer_timeout_ms = 100;
	if (o->max_restarts < 0)
		o->max_restarts = conf->launcher.max_restarts;
	if (o->straggler_pct < 0)
		o->straggler_pct = conf->launcher.straggler_threshold;
	if (o->straggler_window_s < 0)
		o->straggler_window_s = conf->launcher.straggler_window_s;
	if (o->straggler_min_steps < 0)
		o->straggler_min_steps = conf->launcher.straggler_min_steps;
	for (size_t i = 0; i < o->nroles; i++) {
		if (o->roles[i].max_restarts < 0)
			o->roles[i].max_restarts = o->max_restarts;
	}
}

int phx_launch_parse(int argc, char **argv, struct phx_launch_opts *o, char *err, size_t errlen)
{
	int rc = parse(argc, argv, o, err, errlen);

	/* Nothing to free for the caller unless the options are used. */
	if (rc != 0)
		phx_launch_opts_free(o);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx-ckptd(8): options, set-up and the event loop. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "checkpoint/ckptd/ckptd_admin.h"
#include "checkpoint/ckptd/ckptd_agent.h"
#include "checkpoint/ckptd/ckptd_authz.h"
#include "checkpoint/ckptd/ckptd_catalog.h"
#include "checkpoint/ckptd/ckptd_clock.h"
#include "checkpoint/ckptd/ckptd_conn.h"
#include "checkpoint/ckptd/ckptd_job.h"
#include "checkpoint/ckptd/ckptd_journal.h"
#include "checkpoint/ckptd/ckptd_metrics.h"
#include "checkpoint/ckptd/ckptd_munge.h"
#include "checkpoint/ckptd/ckptd_recovery.h"
#include "common/conf.h"
#include "common/file.h"
#include "common/log.h"

static struct ckptd *running;

static const char usage[] =
	"usage: phalanx-ckptd [-c FILE] [--listen HOST:PORT] [--socket PATH]\n"
	"                     [--state-dir DIR] [--key FILE] [--metrics HOST:PORT]\n"
	"                     [--keep N] [--slurm-user NAME] [-v]\n";

static void on_signal(int sig)
{
	(void)sig;
	if (running)
		running->stop = 1;
}

static int parse_args(int argc, char **argv, struct ckptd_opts *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "key", required_argument, NULL, 'k' },
		{ "metrics", required_argument, NULL, 'm' },
		{ "keep", required_argument, NULL, 'K' },
		{ "slurm-user", required_argument, NULL, 'u' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	char *end;

	while ((c = getopt_long(argc, argv, ":c:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->conf_path = optarg;
			break;
		case 'l':
			o->listen = optarg;
			break;
		case 's':
			o->socket = optarg;
			break;
		case 'd':
			o->state_dir = optarg;
			break;
		case 'k':
			o->key_file = optarg;
			break;
		case 'm':
			o->metrics = optarg;
			break;
		case 'u':
			o->slurm_user = optarg;
			break;
		case 'v':
			o->log_debug = 1;
			break;
		case 'K':
			o->keep = (int)strtol(optarg, &end, 10);
			if (*end || o->keep < 1 || o->keep > 1000) {
				phx_error("--keep '%s' must be a whole number from 1 to 1000",
					  optarg);
				return 2;
			}
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		case 'V':
			printf("phalanx-ckptd %s\n", PACKAGE_VERSION);
			exit(0);
		case ':':
			phx_error("option '%s' needs a value\n%s", argv[optind - 1], usage);
			return 2;
		default:
			phx_error("unknown option '%s'\n%s", argv[optind - 1], usage);
			return 2;
		}
	}
	if (optind != argc) {
		phx_error("unexpected argument '%s'\n%s", argv[optind], usage);
		return 2;
	}
	return 0;
}

static int load_conf(struct ckptd_opts *o, struct phx_conf *conf)
{
	const char *path = o->conf_path ? o->conf_path : PHX_CONF_DEFAULT_PATH;
	char err[1024];

	if (!o->conf_path && access(path, F_OK) < 0 && errno == ENOENT) {
		phx_info("%s does not exist; using the built-in defaults", path);
		return phx_conf_defaults(conf) < 0 ? 1 : 0;
	}
	if (phx_conf_load_file(path, conf, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		return 1;
	}
	return 0;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	/* Each agent is a socket: 2,048 nodes need more than the usual 1,024. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 8192)
		phx_warn("open-file limit is %llu; more agents than that cannot connect. Raise "
			 "LimitNOFILE in the unit",
			 (unsigned long long)rl.rlim_cur);
}

static int setup(struct ckptd *d, struct phx_conf *conf)
{
	const struct ckptd_opts *o = &d->opts;
	char err[1024], status[1024], ready[1100];
	struct passwd *pw;
	int rc;

	snprintf(d->state_dir, sizeof(d->state_dir), "%s",
		 o->state_dir ? o->state_dir : conf->state_dir);
	d->keep = o->keep ? o->keep : conf->checkpoint.keep;
	d->interval_mode = (enum phx_ckpt_interval_mode)conf->ckptd.interval;
	d->interval_steps = (uint64_t)conf->ckptd.interval_steps;
	d->interval_seconds = (uint64_t)conf->ckptd.interval_seconds;
	d->node_mtbf_prior_s = conf->ckptd.node_mtbf_hours * 3600.0;
	d->max_ranks_per_user = (uint32_t)conf->ckptd.max_ranks_per_user;
	d->rc.user_error_repeats = conf->recovery.user_error_repeats;
	d->rc.drain_after = conf->recovery.drain_after;
	d->rc.fault_window_s = conf->recovery.fault_window_s;
	d->rc.max_requeues = conf->recovery.max_requeues;
	d->rc_act = conf->recovery.act;
	d->rc_too_few = conf->recovery.too_few_nodes;
	d->heartbeat_ms = (unsigned)conf->recovery.heartbeat_ms;
	d->lost_after_ms = (unsigned)conf->recovery.lost_after_ms;
	d->slurm_poll_s = (unsigned)conf->recovery.slurm_poll_s;
	pw = getpwnam(o->slurm_user ? o->slurm_user : "slurm");
	d->slurm_uid = pw ? pw->pw_uid : (uid_t)-1;
	if (phx_key_load(o->key_file ? o->key_file : conf->key_file, geteuid(), &d->key, err,
			 sizeof(err)) < 0) {
		phx_error("%s", err);
		return -1;
	}
	rc = phx_mkdir_durable(d->state_dir, 0700);
	if (rc) {
		phx_error("cannot create state_dir %s: %s; create it (mode 0700, owned by the "
			  "daemon's user) or name another in ckptd.state_dir",
			  d->state_dir, strerror(-rc));
		return -1;
	}
	ckptd_agent_init(d);
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->epfd < 0 || ckptd_admin_init(d, conf->ckptd.munge_socket, err, sizeof(err)) < 0 ||
	    ckptd_catalog_load(d, err, sizeof(err)) < 0 ||
	    ckptd_listen_tcp(d, o->listen ? o->listen : conf->ckptd.listen, err, sizeof(err)) < 0 ||
	    ckptd_listen_unix(d, o->socket ? o->socket : conf->ckptd.socket, err, sizeof(err)) <
		    0 ||
	    ckptd_metrics_start(d, o->metrics ? o->metrics : conf->ckptd.metrics, err,
				sizeof(err)) < 0) {
		phx_error("%s", err);
		return -1;
	}
	snprintf(status, sizeof(status),
		 "phalanx-ckptd %s: agents on %s, admin on %s, metrics on %s, keeping %d "
		 "generations per job",
		 PACKAGE_VERSION, o->listen ? o->listen : conf->ckptd.listen, d->socket_path,
		 d->mhd ? (o->metrics ? o->metrics : conf->ckptd.metrics) : "(off)", d->keep);
	phx_info("%s", status);
	/* Ready: the journal is replayed and every socket accepts. */
	snprintf(ready, sizeof(ready), "READY=1\nSTATUS=%s", status);
	ckptd_notify_send(&d->notify, ready);
	return 0;
}

static void loop(struct ckptd *d)
{
	struct epoll_event evs[256];
	double next_tick = 0;

	while (!d->stop) {
		int n = epoll_wait(d->epfd, evs, 256, 250);
		double woke = ckptd_now(), took;

		if (n < 0 && errno != EINTR) {
			phx_error("epoll_wait: %s", strerror(errno));
			return;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &d->tcp_fd)
				ckptd_accept(d, d->tcp_fd, CKPTD_AGENT);
			else if (p == &d->unix_fd)
				ckptd_accept(d, d->unix_fd, CKPTD_ADMIN);
			else if (p == &d->mhd_fd)
				ckptd_metrics_run(d);
			else if (p == &d->munge_fd)
				ckptd_munge_collect(d);
			else if (!((struct ckptd_conn *)p)->dead)
				ckptd_conn_io(d, p, evs[i].events);
		}
		ckptd_reap(d);
		/* Only a loop that goes round pings: a stuck one is restarted by systemd. */
		ckptd_notify_watchdog(&d->notify, ckptd_now());
		took = ckptd_now() - woke;
		if (took > CKPTD_LATE_S) {
			phx_log(took >= 1.0 ? PHX_LOG_WARN : PHX_LOG_DEBUG,
				"handling one batch of %d events took %.2f s; heartbeats are "
				"credited the delay. A daemon this slow needs a faster host or "
				"fewer jobs",
				n, took);
			ckptd_recovery_credit(d, took);
		}
		if (ckptd_now() >= d->next_recovery) {
			/* A lost agent is declared within a quarter second of its timeout. */
			ckptd_recovery_tick(d);
			d->next_recovery = ckptd_now() + 0.25;
		}
		if (ckptd_now() >= next_tick) {
			ckptd_tick(d);
			ckptd_conn_sweep(d);
			ckptd_metrics_run(d);
			next_tick = ckptd_now() + 1.0;
		}
	}
}

static void teardown(struct ckptd *d)
{
	ckptd_conn_close_all(d);
	ckptd_munge_stop(d);
	ckptd_metrics_stop(d);
	if (d->socket_path[0])
		unlink(d->socket_path);
	ckptd_journal_close(&d->journal);
	ckptd_jobs_free(d);
	ckptd_recovery_free(d);
	ckptd_authz_free(d);
	OPENSSL_cleanse(&d->key, sizeof(d->key));
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	static struct ckptd d = {
		.tcp_fd = -1, .unix_fd = -1, .mhd_fd = -1, .munge_fd = -1, .epfd = -1
	};
	struct phx_conf conf;
	int rc;

	rc = parse_args(argc, argv, &d.opts);
	if (rc)
		return rc;
	if (load_conf(&d.opts, &conf))
		return 1;
	phx_log_set_level(d.opts.log_debug ? PHX_LOG_DEBUG : conf.log_level);
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	running = &d;
	ckptd_notify_open(&d.notify);
	d.started = ckptd_now();
	d.started_wall = ckptd_wall();
	rc = setup(&d, &conf);
	phx_conf_free(&conf);
	if (rc == 0) {
		loop(&d);
		phx_info("phalanx-ckptd stopping");
		ckptd_notify_send(&d.notify, "STOPPING=1");
	}
	teardown(&d);
	ckptd_notify_close(&d.notify);
	return rc ? 1 : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx-launch(1): starts and watches the ranks of a training job. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/proto/heartbeat.h"
#include "common/clock.h"
#include "common/conf.h"
#include "common/hostlist.h"
#include "common/log.h"
#include "common/rundir.h"
#include "health/health.h"
#include "placement/rankmap.h"
#include "placement/topo.h"
#include "launcher/env.h"
#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/role.h"
#include "launcher/xrdv.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_ckpt.h"
#include "launcher/agent/agent_ckptd.h"
#include "launcher/agent/agent_pmix.h"
#include "launcher/agent/agent_wake.h"
#include "launcher/agent/agent_workers.h"
#include "launcher/agent/agent_xid.h"
#include "launcher/agent/agent_xrdv.h"
#include "launcher/driver/driver.h"

/* The site's file (or the documented defaults), then the user's own over it. */
static int load_conf(const struct phx_launch_opts *o, struct phx_conf *conf)
{
	const char *path = o->config ? o->config : PHX_CONF_DEFAULT_PATH;
	char err[1024], user[4096];

	/* No site file is fine: the documented defaults apply. */
	if (!o->config && access(path, F_OK) != 0) {
		if (phx_conf_defaults(conf) < 0)
			return -1;
	} else if (phx_conf_load_file(path, conf, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		return -1;
	}
	if (phx_conf_user_path(user, sizeof(user)) == 0 &&
	    phx_conf_load_user(conf, user, err, sizeof(err)) < 0) {
		phx_error("%s (your own settings; PHALANX_USER_CONFIG= ignores the file)", err);
		phx_conf_free(conf);
		return -1;
	}
	return 0;
}

/* Signals come through a signalfd; blocked before PMIx starts its threads. */
static int setup_signals(struct phx_agent *a)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	a->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	/* Whatever a worker leaves behind becomes ours to stop and reap. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		phx_warn("cannot become a child subreaper: %s; orphans of workers may survive",
			 strerror(errno));
	return a->sig_fd < 0 ? -1 : 0;
}

static void load_topology(struct phx_agent *a)
{
	struct phx_health_ctx ctx = { .node = a->node };
	const char *xml = NULL;
	char path[4096], err[1024];

	if (a->conf.placement.hwloc_xml && *a->conf.placement.hwloc_xml) {
		if (phx_health_expand(a->conf.placement.hwloc_xml, &ctx, path, sizeof(path)) < 0) {
			phx_warn("placement.hwloc_xml '%s' does not expand for node %s; GPUs are "
				 "not bound",
				 a->conf.placement.hwloc_xml, a->node);
			return;
		}
		xml = path;
	}
	if (phx_topo_load(xml, &a->topo, err, sizeof(err)) < 0)
		phx_warn("no node topology, workers are not bound to CPUs and NICs: %s", err);
}

static void *topology_thread(void *arg)
{
	load_topology(arg);
	return NULL;
}

static int make_heartbeat(struct phx_agent *a)
{
	/* Not close-on-exec: every worker inherits it. */
	a->hb_fd = memfd_create("phalanx-heartbeat", 0);
	a->hb_len = phx_hb_size(a->nproc);
	if (a->hb_fd < 0 || ftruncate(a->hb_fd, (off_t)a->hb_len) < 0)
		goto fail;
	a->hb = mmap(NULL, a->hb_len, PROT_READ | PROT_WRITE, MAP_SHARED, a->hb_fd, 0);
	if (a->hb == MAP_FAILED) {
		a->hb = NULL;
		goto fail;
	}
	phx_hb_format(a->hb, a->nproc);
	return 0;
fail:
	phx_error("cannot create the heartbeat page: %s", strerror(errno));
	return -1;
}

static int make_run_dir(struct phx_agent *a)
{
	const char *tmp = getenv("TMPDIR");
	int rc;

	if (a->o->log_dir) {
		if (mkdir(a->o->log_dir, 0755) < 0 && errno != EEXIST) {
			phx_error("cannot create --log-dir %s: %s", a->o->log_dir, strerror(errno));
			return -1;
		}
		snprintf(a->run_dir, sizeof(a->run_dir), "%s", a->o->log_dir);
		return 0;
	}
	rc = phx_rundir_make(tmp && *tmp ? tmp : P_tmpdir, "phalanx-launch", a->run_dir,
			     sizeof(a->run_dir), &a->run_dir_lock);
	if (rc < 0) {
		phx_error("cannot create a directory for the error files under %s: %s; set "
			  "TMPDIR or --log-dir",
			  tmp && *tmp ? tmp : P_tmpdir, strerror(-rc));
		return -1;
	}
	a->run_dir_owned = true;
	return 0;
}

/*
 * A role in a step of its own keeps a copy of the driver's cross-role
 * rendezvous document in the run directory, for its workers. The key
 * stays with the agent.
 */
static int start_rendezvous(struct phx_agent *a)
{
	const char *env = getenv(PHX_XRDV_ENV);
	char file[PATH_MAX];

	if (!a->o->step_role || !env)
		return 0;
	if (snprintf(file, sizeof(file), "%s/rendezvous.json", a->run_dir) >= (int)sizeof(file))
		return PHX_EXIT_SETUP;
	a->xrdv = phx_agent_xrdv_start(env, file);
	unsetenv(PHX_XRDV_ENV);
	if (!a->xrdv)
		return PHX_EXIT_SETUP;
	setenv(PHX_RENDEZVOUS_FILE_ENV, file, 1);
	if (phx_agent_xrdv_wait_first(a->xrdv, 30000) < 0)
		phx_warn("role %s on %s: no rendezvous document from the driver after 30 s; the "
			 "workers start without %s until it comes",
			 a->o->step_role, a->node, file);
	return 0;
}

static void remove_run_dir(struct phx_agent *a)
{
	if (a->run_dir_owned)
		phx_rundir_remove(a->run_dir, a->run_dir_lock);
}

/*
 * The Slurm name of this node: the step's node list at SLURM_NODEID, as
 * the plugin names it; SLURMD_NODENAME and the host name are fallbacks.
 */
static void node_name(char *buf, size_t len)
{
	const char *list = getenv("SLURM_STEP_NODELIST"), *id = getenv("SLURM_NODEID");
	const char *name = getenv("SLURMD_NODENAME");
	struct phx_hostnames nodes;
	char err[256], *end;
	unsigned long i;

	if (list && id && *id && phx_hostlist_expand(list, &nodes, err, sizeof(err)) == 0) {
		i = strtoul(id, &end, 10);
		if (!*end && i < nodes.count && strlen(nodes.names[i]) < len) {
			strcpy(buf, nodes.names[i]);
			phx_hostnames_free(&nodes);
			return;
		}
		phx_hostnames_free(&nodes);
	}
	if (name && *name)
		snprintf(buf, len, "%s", name);
	else if (gethostname(buf, len) < 0)
		snprintf(buf, len, "localhost");
}

static void set_identity(struct phx_agent *a)
{
	const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");

	node_name(a->node, sizeof(a->node));
	if (a->o->run_id)
		snprintf(a->run_id, sizeof(a->run_id), "%s", a->o->run_id);
	else
		snprintf(a->run_id, sizeof(a->run_id), "%s.%s", job ? job : "0", step ? step : "0");
	a->have_cpus = sched_getaffinity(0, sizeof(a->cpus), &a->cpus) == 0;
}

/*
 * This agent's role follows from its rank among the agents alone, so it is
 * known before the wire-up and every agent agrees on everyone's.
 */
static int choose_role(struct phx_agent *a)
{
	struct phx_launch_opts *o = a->o;
	const struct phx_role *r;
	char err[1024];

	if (phx_roles_assign(o->roles, o->nroles, a->pmix.size, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		return PHX_EXIT_USAGE;
	}
	a->role = phx_role_of_agent(o->roles, o->nroles, a->pmix.me.rank);
	r = &o->roles[a->role];
	for (size_t k = 0; k < o->nroles; k++) {
		a->roles[k].policy = o->roles[k].restart;
		a->roles[k].max_restarts = (unsigned)o->roles[k].max_restarts;
	}
	a->nproc = r->nproc ? r->nproc : o->nproc_per_node;
	if (!a->nproc)
		a->nproc = phx_cuda_count(getenv("CUDA_VISIBLE_DEVICES"));
	if (!a->nproc)
		a->nproc = 1;
	a->argv = o->argv;
	if (r->cmd) {
		if (phx_role_argv(r->cmd, &a->cmd_buf, a->cmd_argv) < 0) {
			phx_error("out of memory");
			return PHX_EXIT_SETUP;
		}
		a->argv = a->cmd_argv;
	}
	a->role_env.name = r->name;
	return 0;
}

/* Stamps the end of a start-up phase; the debug log says how long since the agent started. */
static void phase_done(struct phx_agent *a, enum phx_startup_phase p, const char *what)
{
	a->up_ns[p] = phx_now_ns(CLOCK_REALTIME);
	phx_debug("start-up on %s: %s at %.1f ms", a->node, what,
		  (double)(a->up_ns[p] - a->up_ns[PHX_UP_EXEC]) / 1e6);
}

static int prepare(struct phx_agent *a)
{
	char err[1024];
	int rc;

	pthread_t th;
	bool threaded = false;

	/*
	 * The topology serves only to bind workers to their GPU's CPUs and NIC:
	 * a step without GPUs does not read it. hwloc reads the node while PMIx
	 * connects: both take tens of milliseconds.
	 */
	if (phx_cuda_count(getenv("CUDA_VISIBLE_DEVICES"))) {
		threaded = pthread_create(&th, NULL, topology_thread, a) == 0;
		if (!threaded)
			load_topology(a);
	}
	rc = phx_pmix_init(&a->pmix, err, sizeof(err));
	if (threaded)
		pthread_join(th, NULL);
	phase_done(a, PHX_UP_PMIX, "PMIx_Init and topology");
	if (rc < 0) {
		phx_error("%s", err);
		return PHX_EXIT_PMIX;
	}
	rc = choose_role(a);
	if (rc)
		return rc;
	phx_agent_wake_open(a);
	rc = phx_agent_wireup(a);
	phase_done(a, PHX_UP_PLACED, "wire-up and placement");
	if (rc)
		return rc;
	a->w = calloc(a->nproc, sizeof(*a->w));
	if (!a->w || make_heartbeat(a) < 0 || make_run_dir(a) < 0)
		return PHX_EXIT_SETUP;
	rc = start_rendezvous(a);
	if (rc)
		return rc;
	for (unsigned i = 0; i < a->nproc; i++)
		a->w[i].out_fd = a->w[i].err_fd = a->w[i].log_fd = -1;
	rc = phx_agent_ckpt_setup(a);
	if (rc)
		return rc;
	phx_agent_xid_open(a);
	if (a->pmix.me.rank == 0)
		phx_info("starting %lu workers on %u nodes (%u per node), rank 0 at %s:%u, "
			 "hang timeout %d s, max restarts %d",
			 a->world, a->pmix.size, a->nproc, a->master_addr, a->master_port,
			 a->o->hang_timeout_s, a->o->max_restarts);
	if (a->o->explicit_roles && a->pmix.me.rank == a->o->roles[a->role].first_node) {
		const struct phx_role *r = &a->o->roles[a->role];

		phx_info("role %s: ranks %lu..%lu on %u node(s) from %s, restart %s, max "
			 "restarts %d",
			 r->name, a->role_offset[a->role],
			 a->role_offset[a->role] + a->role_world[a->role] - 1, r->nodes, a->node,
			 phx_restart_policy_name(r->restart), r->max_restarts);
	}
	if (phx_agent_spawn_all(a) < 0) {
		phx_agent_stop_all(a);
		return PHX_EXIT_SETUP;
	}
	phase_done(a, PHX_UP_SPAWNED, "workers started");
	rc = phx_agent_ckpt_agree(a);
	phx_debug("start-up on %s: checkpoint restore agreed at %.1f ms", a->node,
		  (double)(phx_now_ns(CLOCK_REALTIME) - a->up_ns[PHX_UP_EXEC]) / 1e6);
	if (rc) {
		phx_agent_stop_all(a);
		return rc;
	}
	/*
	 * Only now: the main loop answers phalanx-ckptd's challenge, and the
	 * fences before it take longer than the daemon's 5 s deadline on a
	 * large or loaded step.
	 */
	phx_agent_ckptd_setup(a);
	return 0;
}

static void cleanup(struct phx_agent *a)
{
	phx_agent_xrdv_stop(a->xrdv);
	phx_agent_wake_close(a);
	phx_agent_xid_close(a);
	phx_agent_ckptd_fini(a);
	phx_agent_ckpt_fini(a);
	for (unsigned i = 0; a->w && i < a->nproc; i++) {
		if (a->w[i].log_fd >= 0)
			close(a->w[i].log_fd);
	}
	free(a->w);
	free(a->cmd_buf);
	free(a->rates);
	free(a->rate_median);
	free(a->rate_peers);
	free(a->rate_slow);
	free(a->straggler_reported);
	for (size_t i = 0; a->hosts && i < a->pmix.size; i++)
		free(a->hosts[i]);
	free(a->hosts);
	for (size_t i = 0; a->addrs && i < a->pmix.size; i++)
		free(a->addrs[i]);
	free(a->addrs);
	if (a->hb)
		munmap(a->hb, a->hb_len);
	if (a->hb_fd >= 0)
		close(a->hb_fd);
	remove_run_dir(a);
	phx_pmix_fini(&a->pmix);
	phx_rankmap_free(&a->map);
	phx_topo_free(a->topo);
	phx_conf_free(&a->conf);
	if (a->sig_fd >= 0)
		close(a->sig_fd);
}

int main(int argc, char **argv)
{
	struct phx_launch_opts o;
	struct phx_agent a = { .o = &o, .hb_fd = -1, .sig_fd = -1, .run_dir_lock = -1 };
	char err[1024];
	int rc, mode;

	a.up_ns[PHX_UP_EXEC] = phx_now_ns(CLOCK_REALTIME);

	rc = phx_launch_parse(argc, argv, &o, err, sizeof(err));
	if (rc > 0)
		return PHX_EXIT_OK;
	if (rc < 0) {
		phx_error("%s", err);
		return PHX_EXIT_USAGE;
	}
	mode = phx_launch_mode(o.agent, getenv("SLURM_JOB_ID"), getenv("SLURM_STEP_ID"), err,
			       sizeof(err));
	if (mode < 0) {
		phx_error("%s", err);
		phx_launch_opts_free(&o);
		return PHX_EXIT_USAGE;
	}
	if (load_conf(&o, &a.conf) < 0) {
		phx_launch_opts_free(&o);
		return PHX_EXIT_USAGE;
	}
	phx_log_set_level(a.conf.log_level);
	if (phx_launch_override_conf(&o, &a.conf, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		phx_conf_free(&a.conf);
		phx_launch_opts_free(&o);
		return PHX_EXIT_USAGE;
	}
	phx_launch_apply_conf(&o, &a.conf);
	phx_log_set_time(o.log_time > 0);
	if (mode == 1) {
		rc = phx_driver_main(&o, &a.conf, argc, argv);
		phx_conf_free(&a.conf);
		phx_launch_opts_free(&o);
		return rc;
	}
	set_identity(&a);
	if (setup_signals(&a) < 0) {
		phx_error("cannot set up signal handling: %s", strerror(errno));
		phx_conf_free(&a.conf);
		phx_launch_opts_free(&o);
		return PHX_EXIT_SETUP;
	}
	rc = prepare(&a);
	if (!rc)
		rc = phx_agent_supervise(&a);
	cleanup(&a);
	phx_launch_opts_free(&o);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PMIx wire-up of the agents: each is a client of slurmstepd's PMIx server,
 * one rank per node. One collecting fence exchanges every node's facts;
 * later fences carry the agreement rounds (see restart.c). No store,
 * no extra sockets: Slurm's PMIx tree does the collective.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/clock.h"
#include "common/hostlist.h"
#include "common/log.h"
#include "placement/layout.h"
#include "placement/placement.h"
#include "placement/rankmap.h"
#include "launcher/env.h"
#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/role.h"
#include "launcher/standin.h"
#include "launcher/agent/agent.h"
#include "launcher/agent/agent_pmix.h"
#include "launcher/agent/agent_wake.h"

#define FACTS_KEY "phx.facts"

static int pmix_fail(char *err, size_t errlen, const char *what, pmix_status_t rc)
{
	return phx_errf(err, errlen, "%s failed: %s", what, PMIx_Error_string(rc));
}

static int get_u32(const pmix_proc_t *proc, const char *key, uint32_t *out)
{
	pmix_value_t *val = NULL;

	if (PMIx_Get(proc, key, NULL, 0, &val) != PMIX_SUCCESS || !val)
		return -1;
	if (val->type == PMIX_UINT32)
		*out = val->data.uint32;
	else if (val->type == PMIX_UINT16)
		*out = val->data.uint16;
	else {
		PMIX_VALUE_RELEASE(val);
		return -1;
	}
	PMIX_VALUE_RELEASE(val);
	return 0;
}

int phx_pmix_init(struct phx_pmix *pm, char *err, size_t errlen)
{
	pmix_proc_t job;
	pmix_status_t rc;
	uint32_t local = 1;

	memset(pm, 0, sizeof(*pm));
	pm->done_pipe[0] = pm->done_pipe[1] = -1;
	rc = PMIx_Init(&pm->me, NULL, 0);
	if (rc != PMIX_SUCCESS)
		return pmix_fail(err, errlen, "PMIx_Init (run the agents with 'srun --mpi=pmix')",
				 rc);
	pm->inited = true;
	PMIX_LOAD_PROCID(&job, pm->me.nspace, PMIX_RANK_WILDCARD);
	if (get_u32(&job, PMIX_JOB_SIZE, &pm->size) < 0 || !pm->size)
		return phx_errf(err, errlen, "PMIx has no job size (PMIX_JOB_SIZE)");
	if (get_u32(&job, PMIX_LOCAL_SIZE, &local) == 0 && local != 1)
		return phx_errf(err, errlen,
				"%u agents share this node; run one per node "
				"(srun --ntasks-per-node=1)",
				local);
	if (pipe2(pm->done_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return phx_errf(err, errlen, "pipe: %s", strerror(errno));
	return 0;
}

void phx_pmix_fini(struct phx_pmix *pm)
{
	if (pm->inited)
		PMIx_Finalize(NULL, 0);
	for (int i = 0; i < 2; i++) {
		if (pm->done_pipe[i] >= 0)
			close(pm->done_pipe[i]);
	}
	memset(pm, 0, sizeof(*pm));
	pm->done_pipe[0] = pm->done_pipe[1] = -1;
}

static int put(const char *key, const char *value, char *err, size_t errlen)
{
	pmix_value_t val;
	pmix_status_t rc;

	PMIX_VALUE_CONSTRUCT(&val);
	val.type = PMIX_STRING;
	val.data.string = (char *)value;
	rc = PMIx_Put(PMIX_GLOBAL, key, &val);
	if (rc != PMIX_SUCCESS)
		return pmix_fail(err, errlen, "PMIx_Put", rc);
	rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS)
		return pmix_fail(err, errlen, "PMIx_Commit", rc);
	return 0;
}

static int gather(struct phx_pmix *pm, const char *key, char **values, char *err, size_t errlen)
{
	for (uint32_t r = 0; r < pm->size; r++)
		values[r] = NULL;
	for (uint32_t r = 0; r < pm->size; r++) {
		pmix_proc_t proc;
		pmix_value_t *val = NULL;
		pmix_status_t rc;

		PMIX_LOAD_PROCID(&proc, pm->me.nspace, r);
		rc = PMIx_Get(&proc, key, NULL, 0, &val);
		if (rc != PMIX_SUCCESS || !val || val->type != PMIX_STRING || !val->data.string) {
			if (val)
				PMIX_VALUE_RELEASE(val);
			goto fail;
		}
		values[r] = strdup(val->data.string);
		PMIX_VALUE_RELEASE(val);
		if (!values[r])
			goto fail;
	}
	return 0;
fail:
	for (uint32_t r = 0; r < pm->size; r++) {
		free(values[r]);
		values[r] = NULL;
	}
	return phx_errf(err, errlen, "PMIx_Get(%s) of an agent failed after the fence", key);
}

static void fence_info(pmix_info_t *info)
{
	bool collect = true;

	PMIX_INFO_LOAD(info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
}

int phx_pmix_allgather(struct phx_pmix *pm, const char *key, const char *value, char **values,
		       char *err, size_t errlen)
{
	pmix_proc_t all;
	pmix_info_t info;
	pmix_status_t rc;

	if (put(key, value, err, errlen) < 0)
		return -1;
	PMIX_LOAD_PROCID(&all, pm->me.nspace, PMIX_RANK_WILDCARD);
	fence_info(&info);
	rc = PMIx_Fence(&all, 1, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	if (rc != PMIX_SUCCESS)
		return pmix_fail(err, errlen, "PMIx_Fence", rc);
	return gather(pm, key, values, err, errlen);
}

/* PMIx's progress thread: only a write(2), the main loop does the rest. */
static void round_done(pmix_status_t status, void *cbdata)
{
	struct phx_pmix *pm = cbdata;
	ssize_t n;

	n = write(pm->done_pipe[1], &status, sizeof(status));
	(void)n;
}

int phx_pmix_round_start(struct phx_pmix *pm, const char *key, const char *value, char *err,
			 size_t errlen)
{
	static pmix_info_t info; /* lives until the callback, and one round at a time */
	static bool info_loaded;
	pmix_proc_t all;
	pmix_status_t rc;

	if (put(key, value, err, errlen) < 0)
		return -1;
	if (!info_loaded) {
		fence_info(&info);
		info_loaded = true;
	}
	PMIX_LOAD_PROCID(&all, pm->me.nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Fence_nb(&all, 1, &info, 1, round_done, pm);
	if (rc != PMIX_SUCCESS)
		return pmix_fail(err, errlen, "PMIx_Fence_nb", rc);
	pm->in_flight = true;
	return 0;
}

int phx_pmix_round_finish(struct phx_pmix *pm, const char *key, char **values, char *err,
			  size_t errlen)
{
	pmix_status_t status;

	if (read(pm->done_pipe[0], &status, sizeof(status)) != sizeof(status))
		return phx_errf(err, errlen, "lost the completion of a PMIx fence");
	pm->in_flight = false;
	if (status != PMIX_SUCCESS)
		return pmix_fail(err, errlen, "PMIx_Fence_nb", status);
	return gather(pm, key, values, err, errlen);
}

/* ------------------------------------------------------------ facts */

unsigned phx_free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	unsigned port = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static struct json_object *addresses(void)
{
	struct json_object *arr = json_object_new_array();
	struct ifaddrs *ifa, *i;
	char buf[INET_ADDRSTRLEN];

	if (!arr || getifaddrs(&ifa) < 0)
		return arr;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
			continue;
		if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
			      sizeof(buf)))
			json_object_array_add(arr, json_object_new_string(buf));
	}
	freeifaddrs(ifa);
	return arr;
}

static char *facts_json(struct phx_agent *a)
{
	struct json_object *o = json_object_new_object();
	char topo[128];
	char *s;

	snprintf(topo, sizeof(topo), "gpus=%zu nics=%zu numa=%zu cpus=%u",
		 a->topo ? a->topo->ngpus : 0, a->topo ? a->topo->nnics : 0,
		 a->topo ? a->topo->nnumas : 0, a->topo ? a->topo->npus : 0);
	json_object_object_add(o, "host", json_object_new_string(a->node));
	json_object_object_add(o, "addrs", addresses());
	json_object_object_add(o, "port", json_object_new_int((int)phx_free_port()));
	/* The role's own rendezvous, apart from the job's on the role's rank 0 node. */
	json_object_object_add(o, "rport", json_object_new_int((int)phx_free_port()));
	json_object_object_add(
		o, "gpus",
		json_object_new_int((int)phx_cuda_count(getenv("CUDA_VISIBLE_DEVICES"))));
	json_object_object_add(o, "nproc", json_object_new_int((int)a->nproc));
	json_object_object_add(o, "wport", json_object_new_int((int)phx_agent_wake_port(a)));
	/* Agent 0's key is the step's: one key, no choice to agree on. */
	if (a->pmix.me.rank == 0)
		json_object_object_add(o, "wkey", json_object_new_string(phx_agent_wake_key(a)));
	json_object_object_add(o, "topo", json_object_new_string(topo));
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

struct fact {
	char host[256];
	char addr[64];
	char wkey[PHX_WAKE_KEY_HEX + 1];
	unsigned port, rport, nproc, wport;
};

static int parse_fact(const char *s, struct fact *f)
{
	struct json_object *o = json_tokener_parse(s), *v;
	int rc = -1;

	memset(f, 0, sizeof(*f));
	if (!o)
		return -1;
	if (!json_object_object_get_ex(o, "host", &v))
		goto out;
	snprintf(f->host, sizeof(f->host), "%s", json_object_get_string(v));
	if (json_object_object_get_ex(o, "addrs", &v) && json_object_array_length(v) > 0)
		snprintf(f->addr, sizeof(f->addr), "%s",
			 json_object_get_string(json_object_array_get_idx(v, 0)));
	if (json_object_object_get_ex(o, "port", &v))
		f->port = (unsigned)json_object_get_int(v);
	if (json_object_object_get_ex(o, "rport", &v))
		f->rport = (unsigned)json_object_get_int(v);
	if (json_object_object_get_ex(o, "nproc", &v))
		f->nproc = (unsigned)json_object_get_int(v);
	if (json_object_object_get_ex(o, "wport", &v))
		f->wport = (unsigned)json_object_get_int(v);
	if (json_object_object_get_ex(o, "wkey", &v))
		snprintf(f->wkey, sizeof(f->wkey), "%s", json_object_get_string(v));
	rc = f->host[0] ? 0 : -1;
out:
	json_object_put(o);
	return rc;
}

static int place_topo(struct phx_agent *a, struct phx_layout *layout, char **hosts, size_t n,
		      unsigned nproc, const char *node, struct phx_rankmap *map)
{
	struct phx_hostnames slow = { 0 };
	struct phx_plan *plan = NULL;
	char err[1024];
	int rc;

	if (a->o->slow_nodes &&
	    phx_hostlist_expand(a->o->slow_nodes, &slow, err, sizeof(err)) < 0) {
		phx_error("--slow-nodes '%s': %s", a->o->slow_nodes, err);
		return -1;
	}
	rc = phx_rankmap_place_slow(&a->conf, layout, hosts, n, nproc, node, slow.names, slow.count,
				    map, &plan, err, sizeof(err));
	phx_hostnames_free(&slow);
	for (size_t i = 0; plan && a->pmix.me.rank == 0 && map == &a->map && i < plan->n_warnings;
	     i++)
		phx_warn("%s", plan->warnings[i]);
	for (size_t i = 0; plan && a->pmix.me.rank == 0 && map == &a->map && i < plan->n_nodes;
	     i++) {
		if (plan->nodes[i].flags & PHX_PLAN_NODE_SLOW)
			phx_info("placement: node %s is slow (--slow-nodes): kept off the "
				 "critical path",
				 plan->nodes[i].name);
	}
	if (rc < 0)
		phx_error("%s; fix it or use --place block", err);
	phx_plan_free(plan);
	return rc;
}

/* The map of node within role k, whose nodes are hosts[0..n) with nproc workers each. */
static int place_role(struct phx_agent *a, unsigned k, char **hosts, size_t n, unsigned nproc,
		      const char *node, struct phx_rankmap *map)
{
	const struct phx_role *r = &a->o->roles[k];
	struct phx_layout layout;
	const char *spec = r->layout[0] ? r->layout : a->o->layout ? a->o->layout : "dp=*";
	char err[1024];

	if (phx_layout_parse(spec, &layout, err, sizeof(err)) < 0 ||
	    phx_layout_resolve(&layout, (unsigned long)n * nproc, err, sizeof(err)) < 0) {
		if (a->o->explicit_roles)
			phx_error("role %s: layout %s does not fit %zu nodes x %u workers: %s",
				  r->name, spec, n, nproc, err);
		else
			phx_error("--layout %s does not fit %zu nodes x %u workers: %s", spec, n,
				  nproc, err);
		return -1;
	}
	if (a->o->place == PHX_PLACE_TOPO)
		return place_topo(a, &layout, hosts, n, nproc, node, map);
	/* Block order follows the agents' ranks, which follow Slurm's node order. */
	if (phx_rankmap_block(&layout, hosts, n, nproc, node, map, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		return -1;
	}
	return 0;
}

/*
 * Global ranks: the roles' in the order given, each role's ranks in its own
 * placement. The job's rank 0 is role 0's rank 0, wherever role 0 put it.
 */
static int place(struct phx_agent *a, char **hosts, struct fact *f)
{
	const struct phx_role *roles = a->o->roles, *mine = &roles[a->role];
	struct phx_rankmap first = { 0 };
	unsigned long offset = 0;
	int rc;

	for (size_t k = 0; k < a->o->nroles; k++) {
		a->role_offset[k] = offset;
		a->role_world[k] = (unsigned long)roles[k].nodes * f[roles[k].first_node].nproc;
		offset += a->role_world[k];
	}
	a->world = offset;
	a->role_env.rank_offset = a->role_offset[a->role];
	a->role_env.world = a->world;
	a->role_env.node_offset = mine->first_node;
	a->role_env.nodes = a->pmix.size;
	rc = place_role(a, a->role, hosts + mine->first_node, mine->nodes, a->nproc,
			hosts[a->pmix.me.rank], &a->map);
	if (rc < 0 || a->role == 0)
		return rc;
	rc = place_role(a, 0, hosts + roles[0].first_node, roles[0].nodes,
			f[roles[0].first_node].nproc, hosts[roles[0].first_node], &first);
	if (rc == 0)
		snprintf(a->job_master, sizeof(a->job_master), "%s", first.master);
	phx_rankmap_free(&first);
	return rc;
}

static int check_facts(struct phx_agent *a, struct fact *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned k = phx_role_of_agent(a->o->roles, a->o->nroles, (unsigned)i);
		const struct fact *head = &f[a->o->roles[k].first_node];

		if (f[i].nproc != head->nproc) {
			phx_error("node %s runs %u workers and node %s %u; give every node of a "
				  "role the same --nproc-per-node (nproc=) and GPU count",
				  f[i].host, f[i].nproc, head->host, head->nproc);
			return -1;
		}
		for (size_t j = 0; j < i; j++) {
			if (!strcmp(f[i].host, f[j].host)) {
				phx_error("two agents run on node %s; run one per node "
					  "(srun --ntasks-per-node=1)",
					  f[i].host);
				return -1;
			}
		}
	}
	return 0;
}

/* The wake-up's peers: every agent's port and address, agent 0's key. */
static void wake_connect(struct phx_agent *a, const struct fact *f, size_t n)
{
	unsigned *ports = calloc(n, sizeof(*ports));

	for (size_t i = 0; ports && i < n; i++)
		ports[i] = f[i].wport;
	if (ports && a->hosts && a->addrs)
		phx_agent_wake_connect(a, ports, f[0].wkey);
	else
		phx_agent_wake_close(a);
	free(ports);
}

/*
 * Where rank 0 runs: its node's first address, so no name lookup is needed.
 * The same for the role's rank 0, with the node's second port.
 */
static void find_master(struct phx_agent *a, struct fact *f, char **placed, size_t n)
{
	const char *job = a->job_master[0] ? a->job_master : a->map.master;

	/* By the names the placement used: a stand-in's is the node it replaces. */
	for (size_t i = 0; i < n; i++) {
		const char *addr = f[i].addr[0] ? f[i].addr : f[i].host;

		if (!strcmp(placed[i], job)) {
			a->master_agent = (unsigned)i;
			a->master_port = f[i].port;
			snprintf(a->master_addr, sizeof(a->master_addr), "%s", addr);
		}
		if (!strcmp(placed[i], a->map.master)) {
			a->role_master_agent = (unsigned)i;
			a->role_master_port = f[i].rport;
			snprintf(a->role_master_addr, sizeof(a->role_master_addr), "%s", addr);
		}
	}
}

/*
 * The driver's --stand-ins: each spare is placed under the name of the
 * node it replaces (hosts[] renamed; *spec holds the names), so the
 * placement, which depends on the names alone, gives every surviving node
 * its ranks of the last step. Topology placement of one role only: block
 * order and the roles' node ranges follow the agents' order instead.
 */
static int stand_in(struct phx_agent *a, char **hosts, size_t n, char **spec)
{
	char err[512];

	if (!a->o->stand_ins)
		return 0;
	if (a->o->place != PHX_PLACE_TOPO || a->o->explicit_roles) {
		if (a->pmix.me.rank == 0)
			phx_info("placement: the spares do not take the lost nodes' places, "
				 "so ranks move (--stand-ins needs --place topo and one role)");
		return 0;
	}
	*spec = strdup(a->o->stand_ins);
	if (!*spec || phx_stand_ins_apply(*spec, hosts, n, err, sizeof(err)) < 0) {
		phx_error("%s", *spec ? err : "out of memory");
		return -1;
	}
	if (a->pmix.me.rank == 0)
		phx_info("placement: %s (each spare takes the ranks of the node it replaces; "
			 "the others keep theirs)",
			 a->o->stand_ins);
	return 0;
}

int phx_agent_wireup(struct phx_agent *a)
{
	size_t n = a->pmix.size;
	char **values = calloc(n, sizeof(*values)), **hosts = calloc(n, sizeof(*hosts));
	struct fact *facts = calloc(n, sizeof(*facts));
	char *mine = facts_json(a), err[1024], *spec = NULL;
	int rc = PHX_EXIT_PMIX;

	if (!values || !hosts || !facts || !mine) {
		phx_error("out of memory in the wire-up");
		rc = PHX_EXIT_SETUP;
		goto out;
	}
	if (phx_pmix_allgather(&a->pmix, FACTS_KEY, mine, values, err, sizeof(err)) < 0) {
		phx_error("wire-up: %s", err);
		goto out;
	}
	rc = PHX_EXIT_SETUP;
	for (size_t i = 0; i < n; i++) {
		if (parse_fact(values[i], &facts[i]) < 0) {
			phx_error("wire-up: agent %zu sent facts that are not Phalanx's: '%.80s'",
				  i, values[i]);
			goto out;
		}
		hosts[i] = facts[i].host;
	}
	a->up_ns[PHX_UP_WIRED] = phx_now_ns(CLOCK_REALTIME);
	if (check_facts(a, facts, n) < 0 || stand_in(a, hosts, n, &spec) < 0 ||
	    place(a, hosts, facts) < 0)
		goto out;
	find_master(a, facts, hosts, n);
	a->hosts = calloc(n, sizeof(*a->hosts));
	a->addrs = calloc(n, sizeof(*a->addrs));
	for (size_t i = 0; a->hosts && a->addrs && i < n; i++) {
		a->hosts[i] = strdup(facts[i].host);
		a->addrs[i] = strdup(facts[i].addr[0] ? facts[i].addr : facts[i].host);
	}
	wake_connect(a, facts, n);
	rc = 0;
out:
	for (size_t i = 0; values && i < n; i++)
		free(values[i]);
	free(values);
	free(hosts);
	free(facts);
	free(mine);
	free(spec);
	return rc;
}

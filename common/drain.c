/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slurm_update_node is looked up at run time: the SPANK plugin, which also
 * links this code, is not linked against libslurm (slurmstepd brings its
 * own copy, libslurmfull, with the same call), and must load where it is
 * missing. In the programs, which link libslurm, the lookup finds it there.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/drain.h"
#include "common/log.h"
#include "common/slurm_compat.h"

typedef void (*init_update_fn)(update_node_msg_t *msg);
typedef int (*update_node_fn)(update_node_msg_t *msg);
typedef char *(*strerror_fn)(int errnum);

/* Slurm's calls leave their error in errno (slurm_get_errno(), gone in 24.11, read it). */
static const char *slurm_err(void)
{
	int err = errno;
	strerror_fn str;

	*(void **)&str = dlsym(RTLD_DEFAULT, "slurm_strerror");
	return str ? str(err) : strerror(err);
}

/* reason_uid NULL: the one slurm_init_update_node_msg() sets. */
static int drain(const char *node, const char *reason, const uid_t *reason_uid, char *err,
		 size_t errlen)
{
	update_node_msg_t msg;
	init_update_fn init;
	update_node_fn update;

	*(void **)&init = dlsym(RTLD_DEFAULT, "slurm_init_update_node_msg");
	*(void **)&update = dlsym(RTLD_DEFAULT, "slurm_update_node");
	if (!init || !update)
		return phx_errf(err, errlen, "slurm_update_node is not loaded in this process");
	phx_slurm_init();
	init(&msg);
	msg.node_names = (char *)node;
	msg.node_state = NODE_STATE_DRAIN;
	msg.reason = (char *)reason;
	if (reason_uid)
		msg.reason_uid = (uint32_t)*reason_uid;
	if (update(&msg) != SLURM_SUCCESS)
		return phx_errf(err, errlen, "%s", slurm_err());
	return 0;
}

int phx_slurm_drain(const char *node, const char *reason, char *err, size_t errlen)
{
	return drain(node, reason, NULL, err, errlen);
}

int phx_slurm_drain_by(const char *node, const char *reason, uid_t reason_uid, char *err,
		       size_t errlen)
{
	return drain(node, reason, &reason_uid, err, errlen);
}

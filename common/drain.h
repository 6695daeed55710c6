/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Draining a node with Phalanx's reason through libslurm
 * (slurm_update_node), so that 'sinfo -R' says what was measured.
 */
#ifndef PHX_DRAIN_H
#define PHX_DRAIN_H

#include <stddef.h>
#include <sys/types.h>

/* Slurm keeps reasons of any length; sinfo shows the start. Keep it short. */
#define PHX_DRAIN_REASON_MAX 200

/*
 * Sets node to DRAIN with reason. Returns 0, or -1 with Slurm's reason in
 * err (not allowed, unknown node, libslurm not loaded in this process).
 */
int phx_slurm_drain(const char *node, const char *reason, char *err, size_t errlen);
/* The same with the reason recorded as set by reason_uid (sinfo -R's USER). */
int phx_slurm_drain_by(const char *node, const char *reason, uid_t reason_uid, char *err,
		       size_t errlen);

#endif

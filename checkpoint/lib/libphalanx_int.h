/* SPDX-License-Identifier: Apache-2.0 */
/* What the parts of libphalanx share; nothing here is exported. */
#ifndef PHX_LIBPHALANX_INT_H
#define PHX_LIBPHALANX_INT_H

/* The heartbeat page once attached (phx_init), else NULL. */
extern void *hb_page __attribute__((visibility("hidden")));

/* Closes the agent socket and unmaps the staging buffers. */
void phx_ckpt_finalize(void) __attribute__((visibility("hidden")));

#endif

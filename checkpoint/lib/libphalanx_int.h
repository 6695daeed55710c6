/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the parts of libphalanx share; nothing here is exported. The calls
 * go one way: the checkpoint half (libphalanx_ckpt.c) calls the core
 * (libphalanx.c), which reaches the checkpoint half only through the hook
 * registered here.
 */
#ifndef PHX_LIBPHALANX_INT_H
#define PHX_LIBPHALANX_INT_H

struct phx_hb_header;

/*
 * The heartbeat page once attached (phx_init), else NULL. An atomic load:
 * a trainer's save thread reads it while its training thread attaches.
 */
const struct phx_hb_header *phx_lib_hb_header(void) __attribute__((visibility("hidden")));

/*
 * Registers what phx_finalize() runs before it unmaps the heartbeat page:
 * the checkpoint half registers its own finalizer (closes the agent socket,
 * unmaps the staging buffers) before it first talks to the agent.
 */
void phx_lib_at_finalize(void (*fini)(void)) __attribute__((visibility("hidden")));

#endif

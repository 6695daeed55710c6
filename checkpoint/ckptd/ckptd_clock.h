/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's two clocks: monotonic for timeouts, realtime for ledgers and Slurm. */
#ifndef PHX_CKPTD_CLOCK_H
#define PHX_CKPTD_CLOCK_H

/* Seconds, monotonic. */
double ckptd_now(void);
/* Seconds since the epoch. */
double ckptd_wall(void);

#endif

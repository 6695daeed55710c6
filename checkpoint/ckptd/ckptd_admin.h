/* SPDX-License-Identifier: Apache-2.0 */
/* The handler of the admin socket's messages. */
#ifndef PHX_CKPTD_ADMIN_H
#define PHX_CKPTD_ADMIN_H

#include "checkpoint/ckptd/ckptd.h"

/* Registers the admin handler with the connection layer. */
void ckptd_admin_init(struct ckptd *d);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The handler of the admin socket's messages. */
#ifndef PHX_CKPTD_ADMIN_H
#define PHX_CKPTD_ADMIN_H

#include "checkpoint/ckptd/ckptd.h"

#include <stddef.h>

/* Registers the admin handler with the connection layer and starts the
 * MUNGE checks of TCP admins (munge_socket "" = libmunge's default). */
int ckptd_admin_init(struct ckptd *d, const char *munge_socket, char *err, size_t errlen);

#endif

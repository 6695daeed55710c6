/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVIDIA Xid errors in a node's kernel log. The driver logs each as
 *   NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
 * read from /dev/kmsg as a record "PRIORITY,SEQ,USEC,FLAGS;MESSAGE" or from
 * a plain text log. Some Xids are the application's doing (13, 31, 43:
 * a bad kernel or memory access); the ones phx_xid_fatal() lists mean the
 * GPU, its memory or its links are broken, and the node should not run
 * the job again until it is checked.
 */
#ifndef PHX_XID_H
#define PHX_XID_H

#include <stdbool.h>
#include <stddef.h>

struct phx_xid {
	unsigned code;
	char pci[32]; /* "0000:3b:00" */
	char text[160]; /* what follows the code, for the report */
};

/* 1 with *x filled when line[0..len) is an Xid record, 0 when it is not. */
int phx_xid_parse(const char *line, size_t len, struct phx_xid *x);

/* The Xid means broken hardware (ECC, fallen off the bus, NVLink, GSP), not the application. */
bool phx_xid_fatal(unsigned code);

#endif

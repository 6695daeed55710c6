/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/xid.h"

#define MARK "NVRM: Xid ("

bool phx_xid_fatal(unsigned code)
{
	/*
	 * 48 double-bit ECC, 61/62 internal micro-controller halt, 64 row
	 * remapping failed, 74 NVLink, 79 fallen off the bus, 92 high
	 * single-bit ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP,
	 * 140 unrecovered ECC.
	 */
	static const unsigned fatal[] = { 48, 61, 62, 64, 74, 79, 92, 94, 95, 119, 120, 140 };

	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (fatal[i] == code)
			return true;
	return false;
}

/* The bounded copy of line[0..len) without its record header and line end. */
static size_t message(const char *line, size_t len, char *out, size_t cap)
{
	const char *semi = memchr(line, ';', len);
	size_t n;

	/* A /dev/kmsg record: "PRI,SEQ,USEC,FLAGS;MESSAGE"; the header has no spaces. */
	if (semi && !memchr(line, ' ', (size_t)(semi - line))) {
		len -= (size_t)(semi + 1 - line);
		line = semi + 1;
	}
	n = len < cap - 1 ? len : cap - 1;
	memcpy(out, line, n);
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return n;
}

int phx_xid_parse(const char *line, size_t len, struct phx_xid *x)
{
	char msg[512], *p, *end;
	unsigned long code;
	size_t pci;

	message(line, len, msg, sizeof(msg));
	p = strstr(msg, MARK);
	if (!p)
		return 0;
	p += sizeof(MARK) - 1;
	if (!strncmp(p, "PCI:", 4))
		p += 4;
	pci = strcspn(p, ")");
	if (!p[pci] || pci == 0 || pci >= sizeof(x->pci) || p[pci + 1] != ':')
		return 0;
	memset(x, 0, sizeof(*x));
	memcpy(x->pci, p, pci);
	p += pci + 2;
	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return 0;
	code = strtoul(p, &end, 10);
	if (code > 100000)
		return 0;
	x->code = (unsigned)code;
	while (*end == ',' || *end == ' ')
		end++;
	snprintf(x->text, sizeof(x->text), "%s", end);
	return 1;
}

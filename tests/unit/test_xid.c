/* SPDX-License-Identifier: Apache-2.0 */
/* Xid records of the kernel log: parsed from /dev/kmsg records and plain text, judged fatal or not.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "health/xid.h"

static int parse(const char *line, struct phx_xid *x)
{
	return phx_xid_parse(line, strlen(line), x);
}

static void test_records(void **state)
{
	struct phx_xid x;

	(void)state;
	assert_int_equal(parse("6,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
			       "name=python3, GPU has fallen off the bus.\n",
			       &x),
			 1);
	assert_int_equal(x.code, 79);
	assert_string_equal(x.pci, "0000:3b:00");
	assert_string_equal(x.text, "pid=1234, name=python3, GPU has fallen off the bus.");
	/* dmesg's text form, with its timestamp. */
	assert_int_equal(parse("[  123.456] NVRM: Xid (PCI:0000:18:00): 13, pid=99, Graphics SM "
			       "Warp Exception",
			       &x),
			 1);
	assert_int_equal(x.code, 13);
	assert_string_equal(x.pci, "0000:18:00");
	/* Older drivers leave out "PCI:". */
	assert_int_equal(parse("NVRM: Xid (0000:86:00): 48, An uncorrectable double bit error", &x),
			 1);
	assert_int_equal(x.code, 48);
	assert_string_equal(x.pci, "0000:86:00");
}

static void test_not_xid(void **state)
{
	static const char *const lines[] = {
		"4,77,1,-;NVRM: GPU at PCI:0000:3b:00: GPU-abc",
		"NVRM: Xid (PCI:0000:3b:00): pid=1",
		"NVRM: Xid (PCI:0000:3b:00) 79",
		"NVRM: Xid (): 79, x",
		"NVRM: Xid (PCI:0000:3b:00",
		"eth0: link up",
		"",
	};
	struct phx_xid x;

	(void)state;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		assert_int_equal(parse(lines[i], &x), 0);
	/* Only len bytes count: the record cut before its code is none. */
	assert_int_equal(phx_xid_parse("NVRM: Xid (PCI:0000:3b:00): 79", 27, &x), 0);
}

static void test_fatal(void **state)
{
	(void)state;
	/* Hardware: ECC, off the bus, NVLink, GSP. */
	assert_true(phx_xid_fatal(48));
	assert_true(phx_xid_fatal(79));
	assert_true(phx_xid_fatal(74));
	assert_true(phx_xid_fatal(95));
	assert_true(phx_xid_fatal(119));
	/* The application's: illegal access, exceptions, preemption clean-up. */
	assert_false(phx_xid_fatal(13));
	assert_false(phx_xid_fatal(31));
	assert_false(phx_xid_fatal(43));
	assert_false(phx_xid_fatal(45));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records),
		cmocka_unit_test(test_not_xid),
		cmocka_unit_test(test_fatal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

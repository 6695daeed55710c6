/* SPDX-License-Identifier: Apache-2.0 */
/* The pure rules of GPU isolation: lists, selection, masks, CUDA numbering. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/gpulist.h"

static char err[256];

static struct phx_gpus list(const char *s)
{
	struct phx_gpus g;

	if (phx_gpus_parse(s, &g, err, sizeof(err)) < 0)
		fail_msg("'%s' refused: %s", s, err);
	return g;
}

static void assert_list(const struct phx_gpus *g, const char *want)
{
	char buf[2048];

	assert_int_equal(phx_gpus_format(g, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

static void test_parse(void **state)
{
	static const struct {
		const char *in, *out;
	} good[] = {
		{ "", "" },	      { "0", "0" },
		{ "7", "7" },	      { "0,1", "0,1" },
		{ "0,2-3", "0,2,3" }, { "5-5", "5" },
		{ "3,1,2", "3,1,2" }, { "6-7,0-1", "6,7,0,1" },
		{ "255", "255" },     { "010", "10" },
	};
	struct phx_gpus g;
	char buf[2048];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		g = list(good[i].in);
		assert_list(&g, good[i].out);
	}
	g = list("0-255");
	assert_int_equal(g.n, PHX_GPU_MAX);
	assert_int_equal(phx_gpus_format(&g, buf, sizeof(buf)), 0);
	assert_int_equal(phx_gpus_format(&g, buf, 8), -1);
	assert_int_equal(phx_gpus_format(&g, buf, 0), -1);
}

static void test_parse_refused(void **state)
{
	static const struct {
		const char *in, *why;
	} bad[] = {
		{ "NoDevFiles", "not a list of GPU numbers" },
		{ "GPU-8f4c1e2a-5b6d-4c3e-9a1b-2c3d4e5f6a7b", "not a list" },
		{ ",", "not a list" },
		{ "0,", "not a list" },
		{ ",0", "not a list" },
		{ "0,,1", "not a list" },
		{ "0-", "not a list" },
		{ "-1", "not a list" },
		{ "0--1", "not a list" },
		{ "0-1-2", "not a list" },
		{ " 0", "not a list" },
		{ "0 ", "not a list" },
		{ "0x1", "not a list" },
		{ "+1", "not a list" },
		{ "1.5", "not a list" },
		{ "3-1", "runs backwards" },
		{ "256", "out of range (0 to 255)" },
		{ "0-256", "out of range" },
		{ "99999999999999999999", "out of range" },
		{ "4294967297", "out of range" },
		{ "1,1", "listed twice" },
		{ "0-3,2", "listed twice" },
	};
	struct phx_gpus g;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (phx_gpus_parse(bad[i].in, &g, err, sizeof(err)) != -1)
			fail_msg("'%s' accepted", bad[i].in);
		if (!strstr(err, bad[i].why))
			fail_msg("'%s': '%s' lacks '%s'", bad[i].in, err, bad[i].why);
		assert_int_equal(g.n, 0);
	}
	assert_int_equal(phx_gpus_parse(NULL, &g, err, sizeof(err)), -1);
	/* No room for a message is fine. */
	assert_int_equal(phx_gpus_parse("x", &g, NULL, 0), -1);
}

static void test_has_rank(void **state)
{
	struct phx_gpus g = list("6,2,4");

	assert_true(phx_gpus_has(&g, 2));
	assert_false(phx_gpus_has(&g, 3));
	/* CUDA numbers what is left in device order: 2 -> 0, 4 -> 1, 6 -> 2. */
	assert_int_equal(phx_gpus_rank(&g, 2), 0);
	assert_int_equal(phx_gpus_rank(&g, 4), 1);
	assert_int_equal(phx_gpus_rank(&g, 6), 2);
	assert_int_equal(phx_gpus_rank(&g, 5), -1);
	g = list("");
	assert_int_equal(phx_gpus_rank(&g, 0), -1);
}

static void selected(enum phx_isolate_mode mode, const char *alloc, unsigned task, unsigned ntasks,
		     const char *want)
{
	struct phx_gpus a = list(alloc), v;

	assert_int_equal(phx_gpus_select(mode, &a, task, ntasks, &v), 0);
	assert_list(&v, want);
}

static void test_select(void **state)
{
	struct phx_gpus a = list("2,3"), v;

	/* job: every task keeps every GPU of the step, for NCCL P2P and CUDA IPC. */
	selected(PHX_ISOLATE_JOB, "2,3", 0, 2, "2,3");
	selected(PHX_ISOLATE_JOB, "2,3", 1, 2, "2,3");
	selected(PHX_ISOLATE_JOB, "", 0, 1, "");
	/* task: one block each. */
	selected(PHX_ISOLATE_TASK, "2,3", 0, 2, "2");
	selected(PHX_ISOLATE_TASK, "2,3", 1, 2, "3");
	selected(PHX_ISOLATE_TASK, "0-7", 0, 4, "0,1");
	selected(PHX_ISOLATE_TASK, "0-7", 3, 4, "6,7");
	selected(PHX_ISOLATE_TASK, "0-7", 0, 3, "0,1");
	selected(PHX_ISOLATE_TASK, "0-7", 1, 3, "2,3,4");
	selected(PHX_ISOLATE_TASK, "0-7", 2, 3, "5,6,7");
	selected(PHX_ISOLATE_TASK, "4,5", 0, 1, "4,5");
	/* Fewer GPUs than tasks: shared, never none. */
	selected(PHX_ISOLATE_TASK, "2,3", 0, 4, "2");
	selected(PHX_ISOLATE_TASK, "2,3", 1, 4, "2");
	selected(PHX_ISOLATE_TASK, "2,3", 2, 4, "3");
	selected(PHX_ISOLATE_TASK, "2,3", 3, 4, "3");
	selected(PHX_ISOLATE_TASK, "5", 6, 7, "5");
	selected(PHX_ISOLATE_TASK, "", 0, 2, "");
	/* The order Slurm gave is kept. */
	selected(PHX_ISOLATE_TASK, "3,1,2,0", 1, 2, "2,0");
	/* Huge task counts do not overflow. */
	selected(PHX_ISOLATE_TASK, "0-255", 4294967294u, 4294967295u, "255");
	assert_int_equal(phx_gpus_select(PHX_ISOLATE_TASK, &a, 2, 2, &v), -1);
	assert_int_equal(phx_gpus_select(PHX_ISOLATE_JOB, &a, 0, 0, &v), -1);
	assert_int_equal(v.n, 0);
}

static void test_hidden(void **state)
{
	struct phx_gpus present = list("0-7"), visible = list("2,3"), h;

	phx_gpus_hidden(&present, &visible, &h);
	assert_list(&h, "0,1,4,5,6,7");
	/* A GPU Slurm gave but the node lacks is not "hidden". */
	visible = list("3,9");
	present = list("0-4");
	phx_gpus_hidden(&present, &visible, &h);
	assert_list(&h, "0,1,2,4");
	visible = list("");
	phx_gpus_hidden(&present, &visible, &h);
	assert_list(&h, "0,1,2,3,4");
	present = list("");
	phx_gpus_hidden(&present, &visible, &h);
	assert_list(&h, "");
}

static void cuda(const char *cvd, const char *slurm_cvd, const char *alloc, const char *visible,
		 int n, const char *want)
{
	struct phx_gpus a = list(alloc), v = list(visible);
	char out[256] = "untouched";

	assert_int_equal(phx_gpus_cuda(cvd, slurm_cvd, &a, &v, out, sizeof(out)), n);
	if (n >= 0)
		assert_string_equal(out, want);
}

static void test_cuda(void **state)
{
	struct phx_gpus a = list("2,3"), v = list("2,3");
	char small[2];

	/* No cgroup: Slurm writes device numbers; the job keeps 2,3 -> CUDA 0,1. */
	cuda("2,3", "2,3", "2,3", "2,3", 2, "0,1");
	/* ConstrainDevices: Slurm already counts from 0, nothing changes. */
	cuda("0,1", "0,1", "2,3", "2,3", 2, "0,1");
	/* Slurm bound the task (--gpu-bind): its subset, in either numbering. */
	cuda("3", "2,3", "2,3", "2,3", 1, "1");
	cuda("1", "0,1", "2,3", "2,3", 1, "1");
	/* task mode: only the task's own GPU is left, and it is CUDA device 0. */
	cuda("2,3", "2,3", "2,3", "3", 1, "0");
	cuda("0,1", "0,1", "2,3", "3", 1, "0");
	cuda("2", "2,3", "2,3", "3", 0, "");
	/* Slurm's order is kept; numbers follow device order. */
	cuda("6,4", "6,4", "6,4", "6,4", 2, "1,0");
	cuda("5,1,3", "5,1,3", "5,1,3", "1,5", 2, "1,0");
	/* What cannot be read is left to the caller. */
	cuda("GPU-1234", "2,3", "2,3", "2,3", -1, NULL);
	cuda("NoDevFiles", "NoDevFiles", "", "", -1, NULL);
	cuda("4", "2,3", "2,3", "2,3", -1, NULL);
	cuda("2,3", "2,3,4", "2,3", "2,3", -1, NULL);
	cuda("2,3", "2", "2,3", "2,3", -1, NULL);
	cuda("", "", "", "", 0, "");
	assert_int_equal(phx_gpus_cuda("2,3", "2,3", &a, &v, small, sizeof(small)), -1);
}

static void test_info_minor(void **state)
{
	static const char real[] = "Model: \t\t NVIDIA H100 80GB HBM3\n"
				   "IRQ:   \t\t 470\n"
				   "GPU UUID: \t GPU-8f4c1e2a-5b6d-4c3e-9a1b-2c3d4e5f6a7b\n"
				   "Video BIOS: \t 96.00.99.00.01\n"
				   "Bus Type: \t PCIe\n"
				   "DMA Size: \t 52 bits\n"
				   "DMA Mask: \t 0xfffffffffffff\n"
				   "Bus Location: \t 0000:1b:00.0\n"
				   "Device Minor: \t 3\n"
				   "GPU Excluded:\t No\n";
	unsigned minor = 99;

	assert_int_equal(phx_gpu_info_minor(real, &minor), 0);
	assert_int_equal(minor, 3);
	assert_int_equal(phx_gpu_info_minor("Device Minor: 0", &minor), 0);
	assert_int_equal(minor, 0);
	assert_int_equal(phx_gpu_info_minor("Device Minor:\t12\r\n", &minor), 0);
	assert_int_equal(minor, 12);
	minor = 99;
	assert_int_equal(phx_gpu_info_minor("", &minor), -1);
	assert_int_equal(phx_gpu_info_minor("Model: x\n", &minor), -1);
	assert_int_equal(phx_gpu_info_minor("Device Minor:\n", &minor), -1);
	assert_int_equal(phx_gpu_info_minor("Device Minor: x\n", &minor), -1);
	assert_int_equal(phx_gpu_info_minor("Device Minor: 3x\n", &minor), -1);
	assert_int_equal(phx_gpu_info_minor("Device Minor: 256\n", &minor), -1);
	assert_int_equal(phx_gpu_info_minor("Device Minor: -1\n", &minor), -1);
	assert_int_equal(phx_gpu_info_minor("X Device Minor: 1\n", &minor), -1);
	assert_int_equal(minor, 99);
}

static void path(const char *root, const char *pattern, const char *node, unsigned i,
		 const char *want)
{
	char buf[64];

	if (!want) {
		assert_int_equal(phx_gpu_path(root, pattern, node, i, buf, sizeof(buf)), -1);
		return;
	}
	assert_int_equal(phx_gpu_path(root, pattern, node, i, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

static void test_path(void **state)
{
	char buf[8];

	path("/", "/dev/nvidia%u", NULL, 3, "/dev/nvidia3");
	path("", "/dev/nvidia%u", NULL, 0, "/dev/nvidia0");
	path(NULL, "/dev/nvidia%u", NULL, 12, "/dev/nvidia12");
	path("/srv/fake", "/dev/gpu%u", NULL, 7, "/srv/fake/dev/gpu7");
	path("/srv/fake/", "/dev/gpu%u", NULL, 7, "/srv/fake/dev/gpu7");
	path("/srv/%n", "/dev/gpus/%u/dev", "node2", 1, "/srv/node2/dev/gpus/1/dev");
	path("/srv/100%%", "/dev/a%%%u", NULL, 5, "/srv/100%/dev/a%5");
	/* %n without a node, an unknown escape, a lone %, too long. */
	path("/srv/%n", "/dev/gpu%u", NULL, 1, NULL);
	path("/", "/dev/gpu%d", NULL, 1, NULL);
	path("/srv/%u", "/dev/gpu%u", "n", 1, NULL);
	path("/", "/dev/gpu%", NULL, 1, NULL);
	path("/", "/dev/a-very-long-name-that-does-not-fit-into-the-64-byte-buffer-%u", NULL, 1,
	     NULL);
	assert_int_equal(phx_gpu_path("/", "/dev/nvidia%u", NULL, 1, buf, 0), -1);
	assert_int_equal(phx_gpu_path("/", "/dev/nvidia%u", NULL, 1, buf, sizeof(buf)), -1);
}

static void test_cuda_entry(void **state)
{
	char out[64];

	assert_int_equal(phx_cuda_entry("0,1,2,3", 0, out, sizeof(out)), 0);
	assert_string_equal(out, "0");
	assert_int_equal(phx_cuda_entry("4,5,6,7", 3, out, sizeof(out)), 0);
	assert_string_equal(out, "7");
	/* UUIDs work too: entries are copied, never parsed. */
	assert_int_equal(phx_cuda_entry("GPU-aa,GPU-bb", 1, out, sizeof(out)), 0);
	assert_string_equal(out, "GPU-bb");
	assert_int_equal(phx_cuda_entry("5", 0, out, sizeof(out)), 0);
	assert_string_equal(out, "5");
	assert_int_equal(phx_cuda_entry("0,1", 2, out, sizeof(out)), -1);
	assert_int_equal(phx_cuda_entry("0,,1", 1, out, sizeof(out)), -1);
	assert_int_equal(phx_cuda_entry("10,11,123456", 2, out, 6), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),	       cmocka_unit_test(test_parse_refused),
		cmocka_unit_test(test_has_rank),       cmocka_unit_test(test_select),
		cmocka_unit_test(test_hidden),	       cmocka_unit_test(test_cuda),
		cmocka_unit_test(test_info_minor),     cmocka_unit_test(test_path),
		cmocka_unit_test(test_cuda_entry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

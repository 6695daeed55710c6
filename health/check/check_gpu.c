/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU part of phalanx-check, per device:
 *
 * - host<->device copy bandwidth from pinned memory, best of a few tries;
 * - a memory test of a slice: words holding their own address (twice,
 *   the second time inverted) written through the copy engine and read
 *   back, so a bad cell or a wrong address line shows as a count;
 * - a bf16 GEMM through cuBLAS on tensor cores: small integers whose
 *   products add up exactly in fp32, so sampled elements are compared
 *   for equality with the sums worked out here, and its TFLOP/s.
 *
 * Everything goes through the CUDA runtime and cuBLAS: no kernel of our
 * own, so no device compiler is needed to build it.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "common/log.h"
#include "health/check/check.h"

#define COPY_BYTES (256u << 20)
#define COPY_TRIES 3
#define GEMM_ITERS 10
#define GEMM_SAMPLES 4096

struct dev {
	struct phx_check_gpu *gpu;
	void *host; /* pinned, COPY_BYTES */
	void *buf; /* device, COPY_BYTES */
	cudaEvent_t start, stop;
};

__attribute__((format(printf, 2, 3))) static int gpu_fail(struct phx_check_gpu *gpu,
							  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(gpu->error, sizeof(gpu->error), fmt, ap);
	va_end(ap);
	return -1;
}

#define CU(gpu, call)                                                                              \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess)                                                             \
			return gpu_fail(gpu, "%s: %s", #call, cudaGetErrorString(e_));             \
	} while (0)

/* Milliseconds between the two events after what was queued between them. */
static int elapsed(struct dev *d, float *ms)
{
	CU(d->gpu, cudaEventSynchronize(d->stop));
	CU(d->gpu, cudaEventElapsedTime(ms, d->start, d->stop));
	return 0;
}

static int copy_once(struct dev *d, enum cudaMemcpyKind kind, double *best)
{
	void *dst = kind == cudaMemcpyHostToDevice ? d->buf : d->host;
	void *src = kind == cudaMemcpyHostToDevice ? d->host : d->buf;
	float ms;
	double gbps;

	CU(d->gpu, cudaEventRecord(d->start, 0));
	CU(d->gpu, cudaMemcpyAsync(dst, src, COPY_BYTES, kind, 0));
	CU(d->gpu, cudaEventRecord(d->stop, 0));
	if (elapsed(d, &ms) < 0)
		return -1;
	gbps = ms > 0 ? COPY_BYTES / (ms / 1e3) / 1e9 : 0;
	*best = gbps > *best ? gbps : *best;
	return 0;
}

static int copy_test(struct dev *d)
{
	memset(d->host, 0x5a, COPY_BYTES);
	for (int i = 0; i < COPY_TRIES; i++) {
		if (copy_once(d, cudaMemcpyHostToDevice, &d->gpu->h2d_gbps) < 0 ||
		    copy_once(d, cudaMemcpyDeviceToHost, &d->gpu->d2h_gbps) < 0)
			return -1;
	}
	return 0;
}

static uint64_t pattern(uint64_t word, uint64_t flip)
{
	return (word * 0x9e3779b97f4a7c15ull) ^ word ^ flip;
}

static void fill(uint64_t *h, size_t words, uint64_t first, uint64_t flip)
{
	for (size_t w = 0; w < words; w++)
		h[w] = pattern(first + w, flip);
}

static uint64_t compare(const uint64_t *h, size_t words, uint64_t first, uint64_t flip)
{
	uint64_t bad = 0;

	for (size_t w = 0; w < words; w++)
		bad += h[w] != pattern(first + w, flip);
	return bad;
}

static int mem_pass(struct dev *d, char *slice, size_t bytes, uint64_t flip)
{
	uint64_t *h = d->host;

	for (size_t off = 0; off < bytes; off += COPY_BYTES) {
		size_t n = bytes - off < COPY_BYTES ? bytes - off : COPY_BYTES;

		fill(h, n / 8, off / 8, flip);
		CU(d->gpu, cudaMemcpy(slice + off, h, n, cudaMemcpyHostToDevice));
	}
	for (size_t off = 0; off < bytes; off += COPY_BYTES) {
		size_t n = bytes - off < COPY_BYTES ? bytes - off : COPY_BYTES;

		CU(d->gpu, cudaMemcpy(h, slice + off, n, cudaMemcpyDeviceToHost));
		d->gpu->memtest_errors += compare(h, n / 8, off / 8, flip);
	}
	return 0;
}

static int mem_test(struct dev *d, unsigned mib)
{
	size_t bytes = (size_t)mib << 20;
	void *slice = NULL;
	cudaError_t e;
	int rc;

	if (!mib)
		return 0;
	e = cudaMalloc(&slice, bytes);
	if (e != cudaSuccess)
		return gpu_fail(d->gpu, "cannot allocate %u MiB for the memory test: %s", mib,
				cudaGetErrorString(e));
	rc = mem_pass(d, slice, bytes, 0);
	if (!rc)
		rc = mem_pass(d, slice, bytes, ~0ull);
	cudaFree(slice);
	d->gpu->memtest_mib = mib;
	return rc;
}

/* Small integers, exact in bf16; their products add up exactly in fp32. */
static int a_val(size_t i, size_t k)
{
	return (int)((i * 7 + k * 3) % 5) - 2;
}

static int b_val(size_t k, size_t j)
{
	return (int)((k * 5 + j * 11 + 1) % 5) - 2;
}

/* bf16 is the top half of an fp32; exact for these small integers. */
static uint16_t bf16(int v)
{
	float f = (float)v;
	uint32_t bits;

	memcpy(&bits, &f, sizeof(bits));
	return (uint16_t)(bits >> 16);
}

struct gemm {
	size_t n;
	uint16_t *ha, *hb;
	float *hc;
	void *da, *db, *dc;
	cublasHandle_t blas;
};

static int gemm_setup(struct dev *d, struct gemm *g)
{
	size_t n = g->n;

	g->ha = malloc(n * n * sizeof(*g->ha));
	g->hb = malloc(n * n * sizeof(*g->hb));
	g->hc = malloc(n * n * sizeof(*g->hc));
	if (!g->ha || !g->hb || !g->hc)
		return gpu_fail(d->gpu, "out of host memory for a %zux%zu GEMM", n, n);
	/* Column-major, as cuBLAS reads them. */
	for (size_t c = 0; c < n; c++) {
		for (size_t r = 0; r < n; r++) {
			g->ha[r + c * n] = bf16(a_val(r, c));
			g->hb[r + c * n] = bf16(b_val(r, c));
		}
	}
	CU(d->gpu, cudaMalloc(&g->da, n * n * sizeof(*g->ha)));
	CU(d->gpu, cudaMalloc(&g->db, n * n * sizeof(*g->hb)));
	CU(d->gpu, cudaMalloc(&g->dc, n * n * sizeof(*g->hc)));
	CU(d->gpu, cudaMemcpy(g->da, g->ha, n * n * sizeof(*g->ha), cudaMemcpyHostToDevice));
	CU(d->gpu, cudaMemcpy(g->db, g->hb, n * n * sizeof(*g->hb), cudaMemcpyHostToDevice));
	if (cublasCreate(&g->blas) != CUBLAS_STATUS_SUCCESS)
		return gpu_fail(d->gpu, "cublasCreate failed");
	return 0;
}

static int gemm_once(struct dev *d, struct gemm *g)
{
	const float alpha = 1, beta = 0;
	int n = (int)g->n;
	cublasStatus_t s;

	s = cublasGemmEx(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, g->da, CUDA_R_16BF, n,
			 g->db, CUDA_R_16BF, n, &beta, g->dc, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
			 CUBLAS_GEMM_DEFAULT);
	if (s != CUBLAS_STATUS_SUCCESS)
		return gpu_fail(d->gpu, "cublasGemmEx (bf16, %dx%d): %s", n, n,
				cublasGetStatusString(s));
	return 0;
}

/* Sampled elements against the sums worked out here. */
static bool gemm_check(const struct gemm *g)
{
	size_t n = g->n;

	for (size_t s = 0; s < GEMM_SAMPLES; s++) {
		size_t i = s < 2 ? s * (n - 1) : (s * 7919) % n;
		size_t j = s < 2 ? s * (n - 1) : (s * 104729 + s / 7) % n;
		long want = 0;

		for (size_t k = 0; k < n; k++)
			want += (long)a_val(i, k) * b_val(k, j);
		if (g->hc[i + j * n] != (float)want)
			return false;
	}
	return true;
}

static int gemm_test(struct dev *d, size_t n)
{
	struct gemm g = { .n = n };
	float ms = 0;
	int rc = gemm_setup(d, &g);

	if (!rc)
		rc = gemm_once(d, &g); /* warm-up: cuBLAS picks its kernel */
	if (!rc && cudaEventRecord(d->start, 0) != cudaSuccess)
		rc = gpu_fail(d->gpu, "cudaEventRecord failed");
	for (int i = 0; !rc && i < GEMM_ITERS; i++)
		rc = gemm_once(d, &g);
	if (!rc && cudaEventRecord(d->stop, 0) != cudaSuccess)
		rc = gpu_fail(d->gpu, "cudaEventRecord failed");
	if (!rc)
		rc = elapsed(d, &ms);
	if (!rc && cudaMemcpy(g.hc, g.dc, n * n * sizeof(*g.hc), cudaMemcpyDeviceToHost))
		rc = gpu_fail(d->gpu, "reading the GEMM result back failed");
	if (!rc) {
		d->gpu->gemm_ok = gemm_check(&g);
		d->gpu->gemm_tflops = ms > 0 ? 2.0 * n * n * n * GEMM_ITERS / (ms / 1e3) / 1e12 : 0;
	}
	if (g.blas)
		cublasDestroy(g.blas);
	cudaFree(g.da);
	cudaFree(g.db);
	cudaFree(g.dc);
	free(g.ha);
	free(g.hb);
	free(g.hc);
	return rc;
}

static int dev_setup(struct dev *d, int index)
{
	struct cudaDeviceProp prop;

	CU(d->gpu, cudaSetDevice(index));
	CU(d->gpu, cudaGetDeviceProperties(&prop, index));
	snprintf(d->gpu->name, sizeof(d->gpu->name), "%.*s", (int)sizeof(d->gpu->name) - 1,
		 prop.name);
	CU(d->gpu, cudaMallocHost(&d->host, COPY_BYTES));
	CU(d->gpu, cudaMalloc(&d->buf, COPY_BYTES));
	CU(d->gpu, cudaEventCreate(&d->start));
	CU(d->gpu, cudaEventCreate(&d->stop));
	return 0;
}

static void test_device(const struct phx_conf *conf, int index, struct phx_check_gpu *gpu)
{
	struct dev d = { .gpu = gpu };

	gpu->index = index;
	if (dev_setup(&d, index) == 0 && copy_test(&d) == 0 &&
	    mem_test(&d, (unsigned)conf->check.memtest_mib) == 0)
		gemm_test(&d, (size_t)conf->check.gemm_size);
	if (gpu->error[0])
		phx_error("check: GPU %d: %s", index, gpu->error);
	if (d.start)
		cudaEventDestroy(d.start);
	if (d.stop)
		cudaEventDestroy(d.stop);
	cudaFree(d.buf);
	cudaFreeHost(d.host);
	/* A sticky error (an Xid) must not spill onto the next device's results. */
	cudaDeviceReset();
}

/* CUDA reports a missing driver as an old one; say which it is. */
static bool driver_present(struct phx_check_node *node)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (lib) {
		dlclose(lib);
		return true;
	}
	snprintf(node->error, sizeof(node->error),
		 "no usable GPU: no NVIDIA driver on this node (%s); install the driver or take "
		 "the node out of GPU partitions",
		 dlerror());
	return false;
}

int phx_gpu_check(const struct phx_conf *conf, struct phx_check_node *node)
{
	cudaError_t e;
	int n = 0;

	e = cudaGetDeviceCount(&n);
	if (e == cudaErrorInsufficientDriver && !driver_present(node))
		return 0;
	if (e != cudaSuccess) {
		snprintf(node->error, sizeof(node->error),
			 "no usable GPU: CUDA reports '%s' (%s); check the driver with nvidia-smi",
			 cudaGetErrorString(e), cudaGetErrorName(e));
		return 0;
	}
	if (n <= 0) {
		snprintf(node->error, sizeof(node->error), "no usable GPU: CUDA sees no device");
		return 0;
	}
	if (n > PHX_CHECK_MAX_GPUS)
		n = PHX_CHECK_MAX_GPUS;
	node->gpus = calloc((size_t)n, sizeof(*node->gpus));
	if (!node->gpus)
		return -1;
	for (int i = 0; i < n; i++) {
		test_device(conf, i, &node->gpus[i]);
		node->n_gpus++;
	}
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for libnvidia-ml.so.1, so that the NVML health check can be
 * tested without a GPU. It exports the calls the check uses, with the
 * signatures of nvml.h; what it reports comes from the environment:
 *
 *   FAKE_NVML_COUNT=N        GPUs, minor number = index (default 2)
 *   FAKE_NVML_INIT_FAIL=1    nvmlInit_v2: driver not loaded
 *   FAKE_NVML_CRASH=1        nvmlInit_v2 aborts
 *   FAKE_NVML_HANG=1         nvmlInit_v2 sleeps for a minute
 *   FAKE_NVML_LOST=I         GPU I has fallen off the bus
 *   FAKE_NVML_ECC=I          GPU I has 3 uncorrectable volatile ECC errors
 *   FAKE_NVML_PENDING=I      GPU I has retired pages pending
 *   FAKE_NVML_REMAP_FAIL=I   GPU I failed to remap a memory row
 *   FAKE_NVML_NVLINK_DOWN=I  GPU I has link 2 of its 4 NVLinks down
 *   FAKE_NVML_NO_NVLINK=1    no GPU has NVLinks (PCIe cards)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_GPU_IS_LOST 15

typedef struct nvml_device *nvml_device_t;

/* The exported calls; prototypes here keep -Wmissing-prototypes quiet. */
int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int rc);
int nvmlDeviceGetCount_v2(unsigned *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvml_device_t *dev);
int nvmlDeviceGetMinorNumber(nvml_device_t dev, unsigned *minor);
int nvmlDeviceGetTotalEccErrors(nvml_device_t dev, int type, int counter,
				unsigned long long *count);
int nvmlDeviceGetRetiredPagesPendingStatus(nvml_device_t dev, int *pending);
int nvmlDeviceGetRemappedRows(nvml_device_t dev, unsigned *corr, unsigned *unc, unsigned *pending,
			      unsigned *failed);
int nvmlDeviceGetNvLinkState(nvml_device_t dev, unsigned link, int *active);

static long env_num(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 10) : def;
}

static unsigned dev_index(nvml_device_t dev)
{
	return (unsigned)((uintptr_t)dev - 1);
}

static int is(const char *name, nvml_device_t dev)
{
	return env_num(name, -1) == (long)dev_index(dev);
}

int nvmlInit_v2(void)
{
	if (env_num("FAKE_NVML_CRASH", 0))
		abort();
	if (env_num("FAKE_NVML_HANG", 0))
		sleep(60);
	return env_num("FAKE_NVML_INIT_FAIL", 0) ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_SUCCESS;
}

int nvmlShutdown(void)
{
	return NVML_SUCCESS;
}

const char *nvmlErrorString(int rc)
{
	switch (rc) {
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	default:
		return "Unknown Error";
	}
}

int nvmlDeviceGetCount_v2(unsigned *count)
{
	*count = (unsigned)env_num("FAKE_NVML_COUNT", 2);
	return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvml_device_t *dev)
{
	if (env_num("FAKE_NVML_LOST", -1) == (long)index)
		return NVML_ERROR_GPU_IS_LOST;
	*dev = (nvml_device_t)(uintptr_t)(index + 1);
	return NVML_SUCCESS;
}

int nvmlDeviceGetMinorNumber(nvml_device_t dev, unsigned *minor)
{
	*minor = dev_index(dev);
	return NVML_SUCCESS;
}

int nvmlDeviceGetTotalEccErrors(nvml_device_t dev, int type, int counter, unsigned long long *count)
{
	/* Only the uncorrected (1) volatile (0) counter is ever set. */
	*count = type == 1 && counter == 0 && is("FAKE_NVML_ECC", dev) ? 3 : 0;
	return NVML_SUCCESS;
}

int nvmlDeviceGetRetiredPagesPendingStatus(nvml_device_t dev, int *pending)
{
	*pending = is("FAKE_NVML_PENDING", dev);
	return NVML_SUCCESS;
}

int nvmlDeviceGetRemappedRows(nvml_device_t dev, unsigned *corr, unsigned *unc, unsigned *pending,
			      unsigned *failed)
{
	*corr = *unc = *pending = 0;
	*failed = (unsigned)is("FAKE_NVML_REMAP_FAIL", dev);
	return NVML_SUCCESS;
}

int nvmlDeviceGetNvLinkState(nvml_device_t dev, unsigned link, int *active)
{
	if (env_num("FAKE_NVML_NO_NVLINK", 0))
		return NVML_ERROR_NOT_SUPPORTED;
	if (link >= 4)
		return NVML_ERROR_INVALID_ARGUMENT;
	*active = !(link == 2 && is("FAKE_NVML_NVLINK_DOWN", dev));
	return NVML_SUCCESS;
}

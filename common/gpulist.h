/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU lists as Slurm writes them ("0,2-3") and the pure decisions of GPU
 * isolation: which GPUs a task keeps, which are hidden, and how
 * CUDA_VISIBLE_DEVICES is renumbered once the others are hidden. No
 * system calls here, so every rule is unit tested.
 */
#ifndef PHX_GPULIST_H
#define PHX_GPULIST_H

#include <stdbool.h>
#include <stddef.h>

#include "common/conf.h"

/*
 * Entries in one list, and the bound on device numbers: NVIDIA minors
 * stop at 253 (254 and 255 are nvidia-modeset and nvidiactl).
 */
#define PHX_GPU_MAX 256

/* GPU device numbers (N of /dev/nvidiaN), in the order they were given. */
struct phx_gpus {
	unsigned n;
	unsigned id[PHX_GPU_MAX];
};

/*
 * Parses "0,2-3" (also "" = none). Refuses anything else, duplicates and
 * numbers from PHX_GPU_MAX up, with the reason in err.
 */
int phx_gpus_parse(const char *s, struct phx_gpus *out, char *err, size_t errlen);
/* "0,2,3"; -1 when it does not fit. */
int phx_gpus_format(const struct phx_gpus *g, char *buf, size_t len);
bool phx_gpus_has(const struct phx_gpus *g, unsigned id);
/*
 * How many entries of g are below id, when id is in g, else -1: the CUDA
 * ordinal of GPU id when only the GPUs of g are left to the driver.
 */
int phx_gpus_rank(const struct phx_gpus *g, unsigned id);

/*
 * The GPUs task `task` (local id) of `ntasks` on the node keeps: all of
 * alloc in job mode; in task mode an equal block of alloc (one GPU shared
 * by several tasks when there are fewer GPUs than tasks). -1 when task is
 * not below ntasks.
 */
int phx_gpus_select(enum phx_isolate_mode mode, const struct phx_gpus *alloc, unsigned task,
		    unsigned ntasks, struct phx_gpus *visible);
/* The GPUs of present that are not in visible. */
void phx_gpus_hidden(const struct phx_gpus *present, const struct phx_gpus *visible,
		     struct phx_gpus *hidden);

/*
 * Rewrites CUDA_VISIBLE_DEVICES into ordinals among the visible GPUs.
 * slurm_cvd is Slurm's step-wide value: its entries stand, position by
 * position, for the GPUs of alloc, whatever numbering Slurm chose (device
 * numbers, or 0.. under ConstrainDevices). cvd is the value to rewrite
 * (slurm_cvd itself, or a per-task subset of it). Entries that are not
 * visible are dropped. Returns the number of entries written to out, or
 * -1 when cvd or slurm_cvd is not such a list (UUIDs, "NoDevFiles").
 */
int phx_gpus_cuda(const char *cvd, const char *slurm_cvd, const struct phx_gpus *alloc,
		  const struct phx_gpus *visible, char *out, size_t len);

/* The "Device Minor:" of /proc/driver/nvidia/gpus/BUS/information text. */
int phx_gpu_info_minor(const char *text, unsigned *minor);

/*
 * The device file of GPU index: root (its %n = node, %% = %) followed by
 * pattern (its %u = index, %% = %); root "/" adds nothing. -1 when an
 * escape is not one of those, a %n has no node, or it does not fit.
 */
int phx_gpu_path(const char *root, const char *pattern, const char *node, unsigned index, char *buf,
		 size_t len);

/*
 * Entry `index` of CUDA_VISIBLE_DEVICES (a number or a GPU UUID): the GPU
 * that cudaSetDevice(index) selects. 0, or -1 when index is out of range,
 * the entry is empty or out is small.
 */
int phx_cuda_entry(const char *list, unsigned index, char *out, size_t len);

#endif

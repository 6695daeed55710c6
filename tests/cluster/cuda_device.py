#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What torch.cuda.set_device(N) would select, without CUDA: a stand-in
for cudaSetDevice over the lab's fake GPUs, resolved the way the CUDA
runtime does.

The driver numbers the GPUs it can open, in minor (PCI bus) order; a GPU
whose device file is masked (a bind mount of /dev/null, 1:3) is left out.
CUDA_VISIBLE_DEVICES lists driver ordinals; the list ends at the first
entry that is not a valid ordinal (or repeats one), and device N is the
Nth entry of what is left. Unset: every GPU the driver has.

usage: cuda_device.py LAB_DIR [DEVICE]   (DEVICE defaults to $LOCAL_RANK)

Prints one line of KEY=VALUE: the device asked for, the physical GPU
(device file number) it selects or "invalid" (cudaErrorInvalidDevice),
the task's CPUs, and the variables the contract is about.
"""
import os
import stat
import sys

GPU_MAJOR = 195


def driver_gpus(lab):
    """Device file numbers the driver can open, in its order."""
    gpus = []
    for n in range(64):
        try:
            st = os.stat(os.path.join(lab, "dev", "gpu%d" % n))
        except FileNotFoundError:
            continue
        if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == GPU_MAJOR:
            gpus.append(os.minor(st.st_rdev))
    return sorted(gpus)


def visible_gpus(gpus, cvd):
    if cvd is None:
        return list(gpus)
    seen = []
    for entry in cvd.split(","):
        entry = entry.strip()
        if not entry.isdigit() or int(entry) >= len(gpus) or gpus[int(entry)] in seen:
            break
        seen.append(gpus[int(entry)])
    return seen


def cpus():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split()[1]
    return "?"


def main():
    lab = sys.argv[1]
    device = int(sys.argv[2] if len(sys.argv) > 2 else os.environ["LOCAL_RANK"])
    visible = visible_gpus(driver_gpus(lab), os.environ.get("CUDA_VISIBLE_DEVICES"))
    gpu = str(visible[device]) if 0 <= device < len(visible) else "invalid"
    env = lambda name: os.environ.get(name, "-").replace(" ", "_")
    fields = [
        ("host", os.uname().nodename),
        ("rank", env("RANK")),
        ("local", env("LOCAL_RANK")),
        ("device", str(device)),
        ("gpu", gpu),
        ("count", str(len(visible))),
        ("cvd", env("CUDA_VISIBLE_DEVICES")),
        ("step", env("SLURM_STEP_GPUS")),
        ("cudadev", env("PHALANX_CUDA_DEVICE")),
        ("cpus", cpus()),
        ("procid", env("SLURM_PROCID")),
        ("localid", env("SLURM_LOCALID")),
        ("nodeid", env("SLURM_NODEID")),
        ("ntasks", env("SLURM_NTASKS")),
        ("tpn", env("SLURM_NTASKS_PER_NODE")),
        ("world", env("WORLD_SIZE")),
    ]
    print(" ".join("%s=%s" % kv for kv in fields), flush=True)


if __name__ == "__main__":
    main()

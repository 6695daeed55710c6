#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The set_device(LOCAL_RANK) contract on real GPUs: one worker per GPU of
this machine, each with the environment phalanx-launch's agent gives it
(tests/gpu/worker_env, the launcher's own code), calls
torch.cuda.set_device(int(os.environ["LOCAL_RANK"])) as Megatron-LM,
DeepSpeed and torchtitan do, and all of them run an NCCL all-reduce. Passes
when every worker lands on a GPU of its own (PCI bus ids distinct, together
all the GPUs) and the all-reduce sums to the expected value.

usage: set_device.py WORKER_ENV_BINARY
"""
import os
import subprocess
import sys

WORKER = r'''
import os, torch, torch.distributed as dist
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dev = torch.cuda.current_device()
props = torch.cuda.get_device_properties(dev)
bus = str(getattr(props, "uuid", None) or getattr(props, "pci_bus_id", dev))
dist.init_process_group("nccl")
x = torch.full((1 << 20,), float(dist.get_rank() + 1), device="cuda")
dist.all_reduce(x)
n = dist.get_world_size()
ok = bool((x == n * (n + 1) / 2).all())
print("rank=%s local=%d cvd=%s device=%d bus=%s allreduce=%s" % (
    os.environ["RANK"], local, os.environ.get("CUDA_VISIBLE_DEVICES"), dev, bus,
    "ok" if ok else "wrong"), flush=True)
dist.destroy_process_group()
'''


def main():
    import torch

    binary = sys.argv[1]
    n = torch.cuda.device_count()
    if n < 1:
        sys.exit("phalanx: set_device: no CUDA device here")
    # The agent's view: all of this machine's GPUs, as Slurm lists them.
    base = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(n)))
    port = str(29000 + os.getpid() % 1000)
    procs = []
    for slot in range(n):
        out = subprocess.run([binary, str(slot), str(n), port], env=base, check=True,
                             capture_output=True, text=True).stdout
        env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER], env=env,
                                      stdout=subprocess.PIPE, text=True))
    lines = [p.communicate(timeout=300)[0].strip() for p in procs]
    rcs = [p.returncode for p in procs]
    for line in lines:
        print(line)
    buses = [dict(kv.split("=", 1) for kv in l.split())["bus"] for l in lines if l]
    if any(rcs) or len(set(buses)) != n or any("allreduce=ok" not in l for l in lines):
        sys.exit("phalanx: set_device: FAILED: exit codes %s, %d distinct GPUs of %d"
                 % (rcs, len(set(buses)), n))
    print("phalanx: set_device: %d workers, %d distinct GPUs, NCCL all-reduce ok" % (n, n))


if __name__ == "__main__":
    main()

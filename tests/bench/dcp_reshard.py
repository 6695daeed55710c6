#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""dcp.load resharding 8 ranks' state onto 4: phalanx.dcp against PyTorch's own.

    dcp_reshard.py save MIB DIR   (8 workers of phalanx-launch --agent, whose
                                   node-local tier is DIR/tier)
    dcp_reshard.py load MIB DIR   (4 workers of phalanx-launch, any tiers)

The state is FSDP-like: 32 float32 DTensors of MIB/32 MiB each, sharded by
rows over the job's ranks (Shard(0) on a 1-D CPU mesh over gloo), each
element a function of its global position. save writes it once through
dcp.save with phalanx.dcp.StorageWriter (waiting until the agent says it is
durable) and once with FileSystemWriter into DIR/fsw. load builds the same
DTensors over 4 ranks and times dcp.load with
phalanx.dcp.StorageReader(DIR/tier) and with FileSystemReader(DIR/fsw),
each first in turn, REPEAT times each, then checks every element against its
position. Both read files the save just wrote (the page cache holds them
alike). Rank 0 prints each load (the slowest rank's time), the medians and
the ratio phalanx / dcp.
"""
import os
import shutil
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard

import phalanx
import phalanx.dcp as pdcp

TENSORS = 32
COLS = 1024
REPEAT = 4


def shape(mib):
    """Rows a multiple of 24: an even split over 8, 6, 4 and 3 ranks."""
    rows = (mib << 20) // TENSORS // 4 // COLS
    return max(24, rows - rows % 24), COLS


def state(mib, mesh, empty):
    """This rank's shards; element (r, c) of tensor i is (r * COLS + c) % 65521 + i."""
    rows, cols = shape(mib)
    world, rank = mesh.size(), mesh.get_local_rank()
    local = rows // world
    out = {}
    for i in range(TENSORS):
        if empty:
            t = torch.zeros(local, cols)
        else:
            t = expected(rank * local, local, cols, i)
        out[f"layer{i}.weight"] = DTensor.from_local(t, mesh, [Shard(0)], run_check=False,
                                                     shape=(rows, cols), stride=(cols, 1))
    return {"model": out}


def expected(row0, nrows, cols, i):
    pos = torch.arange(row0 * cols, (row0 + nrows) * cols, dtype=torch.int64)
    return (pos % 65521).to(torch.float32).add_(i).reshape(nrows, cols)


def timed(fn):
    dist.barrier()
    t = time.perf_counter()
    fn()
    dist.barrier()
    took = torch.tensor([time.perf_counter() - t], dtype=torch.float64)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    return took.item()


def say(msg):
    if dist.get_rank() == 0:
        print(msg, flush=True)


def save(mib, top):
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    sd = state(mib, mesh, False)
    phx = phalanx.Phalanx()
    step = 1

    def through_phalanx():
        dcp.save(sd, storage_writer=pdcp.StorageWriter(step, phx=phx))
        if not phx.save_wait(step, timeout=600):
            raise SystemExit("phalanx: bench: the save did not become durable in 600 s")

    fsw = os.path.join(top, "fsw")
    if dist.get_rank() == 0:
        shutil.rmtree(fsw, ignore_errors=True)
    t_phx = timed(through_phalanx)
    t_fsw = timed(lambda: dcp.save(sd, storage_writer=dcp.FileSystemWriter(fsw)))
    say(f"save of {mib} MiB on {dist.get_world_size()} ranks: phalanx.dcp until durable "
        f"{t_phx:.3f} s, FileSystemWriter {t_fsw:.3f} s")


def load(mib, top):
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    rows, cols = shape(mib)
    local = rows // world
    times = {"phalanx": [], "dcp": []}
    readers = {
        "phalanx": lambda: pdcp.StorageReader(os.path.join(top, "tier")),
        "dcp": lambda: dcp.FileSystemReader(os.path.join(top, "fsw")),
    }
    for k in range(REPEAT):
        # Each first in turn: the one that goes first meets a colder page cache.
        for name, reader in sorted(readers.items(), reverse=bool(k % 2)):
            sd = state(mib, mesh, True)
            took = timed(lambda: dcp.load(sd, storage_reader=reader()))
            for i in range(TENSORS):
                got = sd["model"][f"layer{i}.weight"].to_local()
                if not torch.equal(got, expected(mesh.get_local_rank() * local, local, cols, i)):
                    raise SystemExit(f"phalanx: bench: {name} load: layer{i} on rank "
                                     f"{dist.get_rank()} is not the saved state")
            times[name].append(took)
            say(f"load {k + 1}: {name} {took:.3f} s (resharded 8 -> {world}, verified)")
    p, d = statistics.median(times["phalanx"]), statistics.median(times["dcp"])
    say(f"dcp.load {mib} MiB resharded 8 -> {world} ranks: phalanx.dcp StorageReader "
        f"{p:.3f} s, FileSystemReader {d:.3f} s, ratio {p / d:.2f} (median of {REPEAT})")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("save", "load"):
        sys.exit(__doc__)
    mode, mib, top = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo")
    try:
        (save if mode == "save" else load)(mib, top)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The save stall of one state dict: Phalanx against PyTorch's own DCP.

    ckpt_dcp.py MIB SAVES DIR     (a worker of phalanx-launch --agent)

The state dict is model-like: 32 float32 tensors of MIB/32 MiB each under
"model" and "optim". Measured on it, in this process:
  floor     a copy of every tensor into fresh memory (what any staging pays)
  phalanx   phalanx.pytorch.save(): the copy into the agent's staging memory;
            persistence to the tiers goes on in the agent (after WARMUP saves
            not counted: the agent's buffers, reused by every later save,
            exist by then)
  phalanx.dcp  dcp.async_save() with phalanx.dcp.StorageWriter: its stall
            (the copy into the agent's memory that its stage() makes, a
            snapshot the training may change at once), and the time until
            phx.save_wait() says the step is durable; and with
            StorageWriter(snapshot=False), which leaves CPU tensors in place
            until the future is done, as FileSystemWriter does
  dcp       torch.distributed.checkpoint.async_save() with FileSystemWriter
            into DIR (PyTorch 2.3 and later): the stall until it returns,
            and the time until its future is done (written and fsynced);
            on the state as it is (FileSystemWriter stages CPU tensors
            without a copy, so they must not change until the future is
            done), and on two snapshots: a clone made for each save, and a
            copy into a CPU state dict made once and reused (what its
            cache_staged_state_dict does, without the pinning it needs
            CUDA for).
            A PyTorch with DCP but no async_save has the synchronous
            save_state_dict() instead, stall and durable alike.
Prints one line per save, then the medians and the ratios phalanx / dcp,
snapshot against snapshot and in place against in place.
"""
import os
import shutil
import statistics
import sys
import time

import torch
import torch.distributed.checkpoint as dcp

import phalanx
import phalanx.pytorch as pp

TENSORS = 32


def state_dict(mib):
    n = (mib << 20) // 2 // TENSORS // 4
    # Distinct, cheap contents: no page is left untouched or shared.
    return {
        part: {f"layer{i}.weight": torch.arange(n, dtype=torch.float32).add_(i + base)
               for i in range(TENSORS)}
        for part, base in (("model", 0.0), ("optim", 0.5))
    }


def tensors(state):
    for part in state.values():
        yield from part.values()


def floor_copy(state):
    t = time.perf_counter()
    copies = [x.clone() for x in tensors(state)]
    took = time.perf_counter() - t
    del copies
    return took


# Saves before the measured ones: the agent keeps a worker's staging buffers
# (the committed one and another) and reuses them, so a training job's saves
# after its first two copy into memory already touched; so do these.
WARMUP = 2


def phalanx_saves(phx, state, saves):
    stalls = []
    step = 0
    while len(stalls) < saves + WARMUP:
        step += 1
        t = time.perf_counter()
        ok = pp.save(phx, step, state)
        took = time.perf_counter() - t
        if ok:
            stalls.append(took)
            print(f"phalanx save {len(stalls)}: stall {took:.3f} s"
                  f"{' (warm-up)' if len(stalls) <= WARMUP else ''}", flush=True)
        # A training step between saves: the agent digests the last one meanwhile.
        time.sleep(2)
    return stalls[WARMUP:]


def phalanx_dcp_saves(phx, state, saves, snapshot, first):
    """dcp.async_save through phalanx.dcp.StorageWriter: the stall until it
    returns, the time until its future is done (committed in the agent's
    memory) and until phx.save_wait says the step is durable (in a tier)."""
    from phalanx.dcp import StorageWriter
    stalls, durable = [], []
    for i in range(1, saves + WARMUP + 1):
        step = first + i
        t = time.perf_counter()
        fut = dcp.async_save(state, storage_writer=StorageWriter(step, phx=phx,
                                                                 snapshot=snapshot))
        stall = time.perf_counter() - t
        fut.result()
        phx.save_wait(step)
        done = time.perf_counter() - t
        stalls.append(stall)
        durable.append(done)
        print(f"phalanx.dcp async_save{'' if snapshot else ' (in place)'} {i}: stall "
              f"{stall:.3f} s, durable after {done:.3f} s"
              f"{' (warm-up)' if i <= WARMUP else ''}", flush=True)
        time.sleep(2)
    return stalls[WARMUP:], durable[WARMUP:]


def snapshot(state):
    return {part: {k: v.clone() for k, v in d.items()} for part, d in state.items()}


def copy_into(cache, state):
    for part, d in state.items():
        for k, v in d.items():
            cache[part][k].copy_(v)
    return cache


# How FileSystemWriter's async_save is given the state: as it is, a clone
# made for each save, a copy into one CPU state dict made once.
SNAPS = {"": None, " of a clone": "clone", " of a reused copy": "cached"}


def dcp_saves(state, saves, top, snap, tail):
    """snap: None, or how a consistent snapshot of CPU tensors is taken first
    (SNAPS); tail: its words in the lines printed."""
    stalls, durable = [], []
    has_async = hasattr(dcp, "async_save")
    cache = snapshot(state) if snap == "cached" else None
    for i in range(1, saves + 1):
        path = os.path.join(top, f"dcp-{i}")
        writer = dcp.FileSystemWriter(path)
        t = time.perf_counter()
        if has_async:
            if snap == "clone":
                given = snapshot(state)
            elif snap == "cached":
                given = copy_into(cache, state)
            else:
                given = state
            fut = dcp.async_save(given, storage_writer=writer)
            stall = time.perf_counter() - t
            fut.result()
        else:
            dcp.save_state_dict(state, storage_writer=writer, no_dist=True)
            stall = time.perf_counter() - t
        done = time.perf_counter() - t
        stalls.append(stall)
        durable.append(done)
        kind = ("async_save" if has_async else "save_state_dict") + tail
        print(f"dcp {kind} {i}: stall {stall:.3f} s, durable after {done:.3f} s", flush=True)
        shutil.rmtree(path, ignore_errors=True)
        time.sleep(2)
    return stalls, durable, kind


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: ckpt_dcp.py MIB SAVES DIR")
    mib, saves, top = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    phx = phalanx.Phalanx()
    if not phx.available():
        sys.exit("phalanx: bench: no agent; run this under phalanx-launch --agent")
    state = state_dict(mib)
    total = sum(x.numel() * x.element_size() for x in tensors(state)) >> 20
    print(f"PyTorch {torch.__version__}, state dict of {2 * TENSORS} tensors, {total} MiB")
    floor = statistics.median(floor_copy(state) for _ in range(3))
    print(f"floor: copy into fresh memory {floor:.3f} s")
    ours = statistics.median(phalanx_saves(phx, state, saves))
    print(f"median stall: phalanx {ours:.3f} s ({ours / floor:.2f}x the copy)")
    has_async = hasattr(dcp, "async_save")
    pdcp = {}
    for snap_ours in (True, False) if has_async else ():
        pstalls, pdurable = phalanx_dcp_saves(phx, state, saves, snap_ours,
                                              1000 if snap_ours else 2000)
        pdcp[snap_ours] = statistics.median(pstalls), statistics.median(pdurable)
        print(f"median stall: phalanx.dcp async_save{'' if snap_ours else ' (in place)'} "
              f"{pdcp[snap_ours][0]:.3f} s ({pdcp[snap_ours][0] / floor:.2f}x the copy), "
              f"durable after {pdcp[snap_ours][1]:.3f} s")
    # As the user calls it, and with the snapshots that make it a consistent
    # checkpoint of CPU tensors (async_save stages CPU tensors without a
    # copy: the training must leave them alone until its future is done).
    for kind_tail, snap in SNAPS.items() if has_async else (("", None),):
        stalls, durable, kind = dcp_saves(state, saves, top, snap, kind_tail)
        theirs = statistics.median(stalls)
        print(f"median stall: dcp {kind} {theirs:.3f} s ({theirs / floor:.2f}x the copy), "
              f"durable after {statistics.median(durable):.3f} s; "
              f"stall ratio phalanx / dcp {kind}: {ours / theirs:.2f}")
        if has_async:
            # Like against like: a snapshot against a snapshot, in place against in place.
            mine = pdcp[snap is not None]
            print(f"phalanx.dcp{'' if snap else ' (in place)'} / FileSystemWriter{kind_tail}, "
                  f"both through dcp.async_save: stall {mine[0] / theirs:.2f}, "
                  f"durable {mine[1] / statistics.median(durable):.2f}")
    phx.finalize()


if __name__ == "__main__":
    main()

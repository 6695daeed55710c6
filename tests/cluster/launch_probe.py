#!/usr/bin/env python3
"""A worker for the phalanx-launch cluster tests (70-launch.bats).

A small PyTorch DDP (gloo) job that reports each step to the agent through
libphalanx (ctypes, no binding), so the agent can see it hang, and that can
be told to misbehave:

  --mode train       train --steps steps and check the replicas agree
  --mode raise       rank --rank raises an exception (every attempt); with
                     --linger S it closes its connections first (its peers
                     fail at once) and exits S seconds after the exception
  --mode env         print the torchrun environment and exit (--role-env:
                     also the role's rendezvous and tensor parallel rank)
  --mode beat        no PyTorch: beat every --step-sleep seconds for
                     --duration seconds (rank --rank sleeps --slow times
                     longer per step); on a save request from the agent
                     (the heartbeat page's save_request) print "saved" and
                     exit, unless --ignore-save names this rank

--group role trains in the role's own process group (ROLE_RANK,
ROLE_WORLD_SIZE at PHALANX_ROLE_MASTER_ADDR/_PORT) instead of the job's.
Each rank prints "pid RANK PID RESTART" first, so a test can signal a
worker of its choosing.
"""
import argparse
import atexit
import ctypes
import gc
import mmap
import os
import signal
import struct
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record

ENV = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
       "GROUP_WORLD_SIZE", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR",
       "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
       "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "PHALANX_AGENT_SHM",
       "PHALANX_AGENT_SLOT", "PHALANX_LAYOUT", "PHALANX_DP_RANK", "PHALANX_JOB_TOKEN",
       "CUDA_VISIBLE_DEVICES", "PMIX_RANK"]
ROLE_ENV = ["PHALANX_ROLE_MASTER_ADDR", "PHALANX_ROLE_MASTER_PORT", "PHALANX_TP_RANK"]


def libphalanx():
    lib = ctypes.CDLL(os.environ["PHX_LIBPHALANX"])
    lib.phx_heartbeat.argtypes = [ctypes.c_long]
    lib.phx_heartbeat.restype = ctypes.c_int
    return lib


def heartbeat_fn():
    return libphalanx().phx_heartbeat


def save_requests():
    """The heartbeat page's save_request counter (header offset 32)."""
    page = mmap.mmap(int(os.environ["PHALANX_AGENT_SHM"]), 64, mmap.MAP_SHARED,
                     mmap.PROT_READ)
    return lambda: struct.unpack_from("<Q", page, 32)[0]


def beat_loop(args, rank):
    # The agent forwards the preemption signal; this worker saves on the request.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    beat = heartbeat_fn()
    saves = save_requests()
    seen = saves()
    pause = args.step_sleep * (args.slow if rank == args.rank else 1)
    end = time.monotonic() + args.duration
    step = 0
    while time.monotonic() < end:
        step += 1
        time.sleep(pause)
        beat(step)
        if saves() != seen and rank not in args.ignore_save:
            print(f"saved rank {rank} step {step}", flush=True)
            return 0
    print(f"done rank {rank} steps {step}", flush=True)
    return 0


def init_group(args):
    if args.group == "role":
        addr = os.environ["PHALANX_ROLE_MASTER_ADDR"]
        port = os.environ["PHALANX_ROLE_MASTER_PORT"]
        dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}",
                                rank=int(os.environ["ROLE_RANK"]),
                                world_size=int(os.environ["ROLE_WORLD_SIZE"]))
    else:
        dist.init_process_group("gloo")


@record
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="train", choices=["train", "raise", "env", "beat"])
    ap.add_argument("--group", default="job", choices=["job", "role"])
    ap.add_argument("--role-env", action="store_true")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--slow", type=float, default=1)
    ap.add_argument("--ignore-save", type=int, action="append", default=[])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--step-sleep", type=float, default=0.1)
    ap.add_argument("--rank", type=int, default=0, help="the rank that misbehaves")
    ap.add_argument("--linger", type=float, default=0)
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
    print(f"pid {rank} {os.getpid()} {restart}", flush=True)
    if args.mode == "env":
        print(f"env HOST={socket.gethostname()} "
              + " ".join(f"{k}={os.environ.get(k, '-')}"
                       for k in ENV + (ROLE_ENV if args.role_env else [])), flush=True)
        return 0
    if args.mode == "beat":
        return beat_loop(args, rank)
    init_group(args)
    world = dist.get_world_size()
    torch.manual_seed(1234)
    model = nn.Linear(8, 1)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    # The first heartbeat arms the hang check: start-up (imports, the
    # process group) is not a step, and takes seconds on a loaded node.
    beat = heartbeat_fn()
    if beat(0) != 0:
        raise RuntimeError("phx_heartbeat failed: no agent")
    print(f"beating {rank}", flush=True)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(1, args.steps + 1):
        if args.mode == "raise" and rank == args.rank and step == 2:
            if args.linger:
                # A slow exit as its peers see it: the connections close
                # while the process still lingers in its teardown.
                atexit.register(time.sleep, args.linger)
                del ddp, opt
                gc.collect()
                dist.destroy_process_group()
            raise ValueError(f"injected failure on rank {rank} at step {step}")
        x = torch.randn(16, 8, generator=gen)
        opt.zero_grad()
        ddp(x).pow(2).mean().backward()
        opt.step()
        beat(step)
        time.sleep(args.step_sleep)
    # The last step: what follows (a gather, shutting down) is not a hang.
    libphalanx().phx_finalize()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    print(f"done rank {rank} restart {restart} steps {args.steps} identical {same}", flush=True)
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

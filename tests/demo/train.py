#!/usr/bin/env python3
"""A small but real data-parallel training job (PyTorch DDP, gloo).

It trains an MLP on a synthetic regression task, keeps a checkpoint of
model + optimizer + step, and resumes from it when the job is requeued after
a failure, so the demo can show that no more than one checkpoint interval of
work is lost. Rank and world come from the torchrun environment (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), falling back to Slurm's
SLURM_PROCID/SLURM_NTASKS when started by plain srun.
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def env(name, fallback=None, default=None):
    value = os.environ.get(name)
    if value is None and fallback:
        value = os.environ.get(fallback)
    return value if value is not None else default


def log(rank, msg):
    print(f"[rank {rank}@{socket.gethostname()}] {msg}", flush=True)


def save_atomic(state, path):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--ckpt-dir", required=True)
    ap.add_argument("--ckpt-every", type=int, default=20)
    ap.add_argument("--step-sleep", type=float, default=0.05,
                    help="seconds per step, so a failure can land mid-run")
    args = ap.parse_args()

    rank = int(env("RANK", "SLURM_PROCID", "0"))
    world = int(env("WORLD_SIZE", "SLURM_NTASKS", "1"))
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)

    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    true_w = torch.randn(32, 1, generator=torch.Generator().manual_seed(7))

    ckpt = os.path.join(args.ckpt_dir, "train.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        log(rank, f"resumed from checkpoint at step {start} "
                  f"(restart {env('SLURM_RESTART_COUNT', default='0')})")
    gen = torch.Generator().manual_seed(1000 + rank)
    loss = torch.tensor(0.0)
    for step in range(start, args.steps):
        x = torch.randn(64, 32, generator=gen)
        y = x @ true_w
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        time.sleep(args.step_sleep)
        done = step + 1
        if done % args.ckpt_every == 0 or done == args.steps:
            if rank == 0:
                save_atomic({"model": model.state_dict(), "opt": opt.state_dict(),
                             "step": done}, ckpt)
            dist.barrier()
            if rank == 0:
                log(rank, f"step {done}/{args.steps} loss {loss.item():.4f} (checkpoint)")
    # Replicas must agree: DDP keeps their weights identical.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    if rank == 0:
        log(rank, f"finished {args.steps} steps, final loss {loss.item():.4f}, "
                  f"replicas identical: {same}")
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
"""A two-stage pipeline trained data-parallel over gloo, through Phalanx.

Ranks follow Megatron's order (tp fastest, pp slowest), read from
PHALANX_LAYOUT: with dp data-parallel ranks, rank r is stage r // dp at dp
index r % dp. Stage 0 holds W0, stage 1 holds W1 and the loss; each step
trains on a fixed global batch of G samples split over the dp ranks, one
sample per micro-batch: stage 0 sends the activation to its stage 1 peer,
which sends back the activation's gradient.

The result does not depend on dp, so a run that shrinks dp halfway ends on
the same bits as one that never did: each sample's gradient is rounded to a
fixed-point integer, and integers add up exactly in any order and over any
split of the batch (a deterministic all-reduce). Each rank saves its stage's
weights through phalanx.pytorch (the same on every dp rank: replicated, or
--sharded to declare them dp-sharded) and checks at restore that the shard
is its own stage's. Prints each stage's final weights' sha256.
"""
import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist

G = 12  # samples per step: divides evenly over dp 1, 2, 3, 4, 6 and 12
H = 16  # width of both stages: a stage's weights fit the other's shape
SCALE = 2.0 ** 30  # fixed point of the per-sample gradients
LR = 2.0 ** -6


def log(rank, msg):
    print(f"[rank {rank}] {msg}", flush=True)


def layout():
    """(dp, pp) from PHALANX_LAYOUT; only dp and pp may be above 1 here."""
    sizes = dict(kv.split("=") for kv in os.environ["PHALANX_LAYOUT"].split(",")
                 if not kv.startswith("order="))
    if any(int(sizes.get(k, 1)) != 1 for k in ("tp", "cp", "ep")) or int(sizes["pp"]) != 2:
        sys.exit(f"pipeline_train: needs tp=cp=ep=1 and pp=2, got {os.environ['PHALANX_LAYOUT']}")
    return int(sizes["dp"]), 2


def sample(step, j):
    """Sample j of step's global batch, the same whatever rank trains on it."""
    g = torch.Generator().manual_seed(step * 1000 + j)
    x = torch.randn(H, generator=g, dtype=torch.float64)
    return x, torch.randn(H, generator=g, dtype=torch.float64)


def fixed(grad):
    return torch.round(grad * SCALE).to(torch.int64)


def train_step(step, stage, dp_index, dp, peer, w):
    """This rank's summed fixed-point gradient over its part of step's batch."""
    acc = torch.zeros(H, H, dtype=torch.int64)
    for j in range(dp_index, G, dp):
        x, target = sample(step, j)
        wg = w.detach().requires_grad_()
        if stage == 0:
            h = torch.tanh(wg @ x)
            dist.send(h.detach(), peer)
            grad_h = torch.empty(H, dtype=torch.float64)
            dist.recv(grad_h, peer)
            h.backward(grad_h)
        else:
            h = torch.empty(H, dtype=torch.float64)
            dist.recv(h, peer)
            h.requires_grad_()
            loss = ((wg @ h - target) ** 2).sum()
            loss.backward()
            dist.send(h.grad, peer)
        acc += fixed(wg.grad)
    return acc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-sleep", type=float, default=0.02)
    ap.add_argument("--sharded", action="store_true",
                    help="declare the saved weights dp-sharded (a restore onto another dp refuses)")
    args = ap.parse_args()

    import phalanx
    import phalanx.pytorch as ppt

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dp, pp = layout()
    if dp * pp != world:
        sys.exit(f"pipeline_train: dp {dp} x pp {pp} is not the world of {world}")
    stage, dp_index = rank // dp, rank % dp
    peer = rank + dp if stage == 0 else rank - dp
    dist.init_process_group("gloo")
    groups = [dist.new_group([s * dp + i for i in range(dp)]) for s in range(pp)]
    group = groups[stage]

    phx = phalanx.Phalanx()
    w = torch.randn(H, H, generator=torch.Generator().manual_seed(stage + 1),
                    dtype=torch.float64) * 0.5
    start = 0
    got = ppt.restore(phx)
    if got is not None:
        step, state = got
        if state["stage"] != stage:
            sys.exit(f"[rank {rank}] restored stage {state['stage']}'s weights on stage {stage}")
        w, start = state["w"].clone(), step + 1
        log(rank, f"resumed from generation {step} at step {step}, stage {stage}, "
                  f"dp {dp_index} of {dp}")
    else:
        log(rank, f"starting, stage {stage}, dp {dp_index} of {dp}")

    for step in range(start, args.steps):
        acc = train_step(step, stage, dp_index, dp, peer, w)
        dist.all_reduce(acc, group=group)
        w = w - LR * (acc.to(torch.float64) / SCALE) / G
        phx.heartbeat(step)
        if phx.should_save(step):
            ppt.save(phx, step, {"w": w, "stage": stage}, busy="wait",
                     sharded=args.sharded)
        time.sleep(args.step_sleep)

    digest = hashlib.sha256(w.numpy().tobytes()).hexdigest()
    if dp_index == 0:
        log(rank, f"finished {args.steps} steps, stage {stage} final-weights sha256 {digest}")
    phx.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

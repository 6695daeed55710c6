#!/usr/bin/env python3
"""A small but real data-parallel training job (PyTorch DDP, gloo).

It trains an MLP on a synthetic regression task, keeps a checkpoint of
model + optimizer + step, and resumes from it when the job is requeued after
a failure, so the demo can show that no more than one checkpoint interval of
work is lost. With --phalanx every rank saves its shard through Phalanx's
API instead (memory the node agent owns, persisted by phalanx-launch; the
interval is phalanx.yaml's checkpoint.interval) and restores the newest
committed generation; --log-digest prints the SHA-256 of each shard saved
and restored, so tests can check a restore is bit-identical, and
--weights-digest the SHA-256 of the final weights. Rank and world come from
the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), falling back to Slurm's SLURM_PROCID/SLURM_NTASKS when
started by plain srun.
"""
import argparse
import hashlib
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
    ap.add_argument("--ckpt-dir", help="checkpoint directory (without --phalanx)")
    ap.add_argument("--phalanx", action="store_true",
                    help="save and restore through libphalanx (under phalanx-launch)")
    ap.add_argument("--state-mb", type=int, default=0,
                    help="extra state to save, in MiB (makes saves take longer)")
    ap.add_argument("--log-digest", action="store_true",
                    help="print the SHA-256 of each shard saved and restored")
    ap.add_argument("--weights-digest", action="store_true",
                    help="rank 0 prints the SHA-256 of the final weights")
    ap.add_argument("--ckpt-every", type=int, default=20)
    ap.add_argument("--step-sleep", type=float, default=0.05,
                    help="seconds per step, so a failure can land mid-run")
    ap.add_argument("--wait-durable", metavar="DIR",
                    help="after each save, wait until it is durable, then report whether "
                         "DIR (%%n: this node) holds its manifest")
    ap.add_argument("--busy-wait", action="store_true",
                    help="when the agent is busy, wait for a buffer instead of skipping")
    ap.add_argument("--mark-first", action="store_true",
                    help="rank 0 says when its first step (after a restore or not) is done")
    args = ap.parse_args()
    if not args.phalanx and not args.ckpt_dir:
        ap.error("--ckpt-dir is required without --phalanx")

    rank = int(env("RANK", "SLURM_PROCID", "0"))
    world = int(env("WORLD_SIZE", "SLURM_NTASKS", "1"))
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)

    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    # DDP lays its gradient bucket out anew after the first backward pass,
    # and the layout decides the order of the all-reduce's sums: one pass
    # that changes nothing puts a resumed run on the layout an uninterrupted
    # one trains with, so both end on the same bits.
    ddp(torch.zeros(1, 32)).sum().mul(0).backward()
    opt.zero_grad()
    true_w = torch.randn(32, 1, generator=torch.Generator().manual_seed(7))

    # Extra state, changed every step so each generation differs.
    extra = torch.zeros(args.state_mb * (1 << 18), dtype=torch.float32)
    if args.phalanx:
        return train_phalanx(args, rank, world, model, ddp, opt, true_w, extra)
    ckpt = os.path.join(args.ckpt_dir, "train.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        log(rank, f"resumed from checkpoint at step {start} "
                  f"(restart {env('SLURM_RESTART_COUNT', default='0')})")
    loss = torch.tensor(0.0)
    for step in range(start, args.steps):
        x = batch(rank, step)
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
    return finish(args, rank, world, model, loss)


def batch(rank, step):
    # A step's data depends on (rank, step) only: a run resumed from a
    # checkpoint replays exactly what an uninterrupted run trains on.
    gen = torch.Generator().manual_seed(1000 + rank + 7919 * step)
    return torch.randn(64, 32, generator=gen)


def train_phalanx(args, rank, world, model, ddp, opt, true_w, extra):
    import phalanx
    import phalanx.pytorch as pp

    phx = phalanx.Phalanx()
    start = 0
    got = phx.restore()
    if got is not None:
        gen_step, view = got
        state = pp.decode(view)
        if args.log_digest:
            log(rank, f"restored step {gen_step} sha256 {hashlib.sha256(view).hexdigest()}")
        del view
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        extra.copy_(state["extra"])
        start = state["step"]
        log(rank, f"resumed from generation {gen_step} at step {start}")
    loss = torch.tensor(0.0)
    for step in range(start, args.steps):
        x = batch(rank, step)
        y = x @ true_w
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        extra.add_(1.0)
        time.sleep(args.step_sleep)
        done = step + 1
        if args.mark_first and rank == 0 and step == start:
            how = "after the restore" if got is not None else "from scratch"
            log(rank, f"first step {how} done: step {done}")
        phx.heartbeat(done)
        if phx.should_save(done):
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": done,
                     "extra": extra}
            h = hashlib.sha256() if args.log_digest else None
            saved = pp.save(phx, done, state, digest=h,
                            busy="wait" if args.busy_wait else "skip")
            if not saved:
                log(rank, f"save of step {done} skipped: the agent is still persisting")
            elif h:
                log(rank, f"saved step {done} sha256 {h.hexdigest()}")
            elif rank == 0:
                log(rank, f"step {done}/{args.steps} loss {loss.item():.4f} (saved)")
            if saved and args.wait_durable:
                report_durable(rank, saved, args.wait_durable)
    return finish(args, rank, world, model, loss)


def report_durable(rank, saved, pattern):
    """Waits for the save, then says what this node's directory holds right then."""
    durable = saved.wait(timeout=120)
    where = pattern.replace("%n", socket.gethostname())
    try:
        latest = open(os.path.join(where, "latest")).read().strip()
        manifest = os.path.exists(os.path.join(where, latest, "manifest.json"))
    except OSError:
        latest, manifest = "none", False
    log(rank, f"durable step {saved.step}: {durable} latest {latest} manifest {manifest}")


def finish(args, rank, world, model, loss):
    # Replicas must agree: DDP keeps their weights identical.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    if rank == 0:
        log(rank, f"finished {args.steps} steps, final loss {loss.item():.4f}, "
                  f"replicas identical: {same}")
        if args.weights_digest:
            # Bit for bit: a run that resumed must end where an uninterrupted one does.
            h = hashlib.sha256()
            for p in model.state_dict().values():
                h.update(p.detach().contiguous().numpy().tobytes())
            log(rank, f"final-weights sha256 {h.hexdigest()}")
    dist.destroy_process_group()
    # PyTorch 1.13 can deadlock freeing DDP after this (the Reducer's
    # destructor joins a gloo thread that waits for the GIL to free the last
    # collective's tensors): the work is done, so leave without the teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if same else 1)


if __name__ == "__main__":
    sys.exit(main())

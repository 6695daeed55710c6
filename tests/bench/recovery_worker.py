#!/usr/bin/python3
"""A light training worker for tests/bench/recovery --light: no PyTorch, so
2 cores carry one per node on 64 lab nodes.

  recovery_worker.py --steps N [--step-sleep S] [--state-mib M] [--mark-first]

Each step sleeps S seconds, beats and, when Phalanx says so, saves a state
of M MiB (the step and this rank in its first bytes) through libphalanx's
Python binding. It restores the newest committed generation first and
checks the bytes are its own rank's state of that step. Rank 0 says when
its first step is done, as tests/demo/train.py --mark-first does.
"""
import argparse
import os
import socket
import struct
import sys
import time

import phalanx

HEAD = struct.Struct("<qq")


def log(rank, msg):
    print(f"[rank {rank}@{socket.gethostname()}] {msg}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--step-sleep", type=float, default=0.05)
    ap.add_argument("--state-mib", type=int, default=1)
    ap.add_argument("--mark-first", action="store_true")
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    phx = phalanx.Phalanx()
    state = bytearray(args.state_mib << 20)
    start = 0
    got = phx.restore()
    if got is not None:
        gen_step, view = got
        start, owner = HEAD.unpack_from(view)
        if start != gen_step or owner != rank or len(view) != len(state):
            sys.exit(f"phalanx: rank {rank} restored step {start} of rank {owner} "
                     f"({len(view)} bytes) from generation {gen_step}: not its state")
        state[:] = view
        del view
        log(rank, f"resumed from generation {gen_step} at step {start}")
    for step in range(start, args.steps):
        time.sleep(args.step_sleep)
        done = step + 1
        HEAD.pack_into(state, 0, done, rank)
        if args.mark_first and rank == 0 and step == start:
            how = "after the restore" if got is not None else "from scratch"
            log(rank, f"first step {how} done: step {done}")
        phx.heartbeat(done)
        if phx.should_save(done):
            try:
                phx.save_bytes(done, state)
            except phalanx.PhalanxError as e:
                if e.status != phalanx.EBUSY:
                    raise
    phx.finalize()
    if rank == 0:
        log(rank, f"done: step {args.steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

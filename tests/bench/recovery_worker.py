#!/usr/bin/python3
"""A light training worker for tests/bench/recovery --light: no PyTorch, so
2 cores carry one per node on 64 lab nodes.

  recovery_worker.py --steps N [--step-sleep S] [--state-mib M] [--mark-first]

Each step sleeps S seconds, waits for every rank to end it (a star through
rank 0 at MASTER_ADDR:MASTER_PORT, the lock-step a training step's
all-reduce imposes: without it 64 ranks on 2 cores drift apart by more
generations than a node keeps, and none is ever held by all), beats and,
when Phalanx says so, saves a state of M MiB (the step and this rank in its
first bytes) through libphalanx's Python binding. A peer that goes away
leaves the rank waiting, as a collective does, until Phalanx stops it. It restores the newest committed generation first and
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


class StepSync:
    """Every rank ends each step together, through rank 0."""

    def __init__(self, rank, world):
        self.rank = rank
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        if world == 1:
            self.peers = []
        elif rank == 0:
            with socket.create_server(("", port), backlog=world) as srv:
                self.peers = [srv.accept()[0] for _ in range(world - 1)]
        else:
            deadline = time.monotonic() + 300
            while True:
                try:
                    self.peers = [socket.create_connection((addr, port), timeout=5)]
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            self.peers[0].settimeout(None)

    def step(self):
        try:
            if self.rank == 0:
                for p in self.peers:
                    self._one(p)
                for p in self.peers:
                    p.sendall(b"g")
            elif self.peers:
                self.peers[0].sendall(b"s")
                self._one(self.peers[0])
        except OSError as e:
            log(self.rank, f"a peer went away ({e}); waiting to be stopped")
            while True:
                time.sleep(3600)

    @staticmethod
    def _one(p):
        if not p.recv(1):
            raise ConnectionResetError("end of stream")


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
    sync = StepSync(rank, int(os.environ["WORLD_SIZE"]))
    for step in range(start, args.steps):
        time.sleep(args.step_sleep)
        sync.step()
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

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A toy RL post-training job for the launcher's roles in steps of their own:
a trainer role (DDP over gloo) and a rollout role, which exchange weights and
samples in a cross-role gloo group ("sync") that they form again whenever
the job's processes change.

  rl_job.py trainer (--ckpt-dir DIR | --phalanx) --iters N [--iter-sleep S]
                    [--stop-file F]
  rl_job.py rollout [--gen-sleep S]
  (both: [--sync-timeout S], seconds a sync group's forming or collective
  may take before it counts as failed, default 10)

The trainer trains nn.Linear(8, 4) with DDP over its own processes
(init_process_group("gloo") from MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE). Each iteration every rank trains a step on the last samples;
then rank 0 (the only trainer in the sync group) sends its weights and the
iteration to the rollout workers and gathers their samples, and broadcasts
the outcome to the other trainer ranks, which so never wait on a sync. A
sync group that cannot form or fails is logged and formed again (in a
thread: the iterations go on meanwhile, with the last samples). Rank 0
saves {model, optimizer, iteration} to DIR/ckpt.pt every 5 iterations;
every rank resumes from it; with --phalanx every rank saves and restores
through Phalanx's checkpoint engine instead (phalanx.pytorch, every
checkpoint.interval iterations, PHALANX_LIBRARY and PYTHONPATH as for
tests/demo/train.py); the trainer exits 0 after --iters iterations
counted across restarts, or after the first iteration that finds the
--stop-file (rank 0 looks; a checkpoint of that iteration is saved).

A rollout worker waits for the rendezvous document to list a running
trainer, joins the sync group of the document's epoch, and then, for each
weights it receives, "generates" (sleeps --gen-sleep) and sends samples
back. On any error or a new epoch it leaves the group and joins again; it
exits 0 only when the document shows the trainer role "done".

A dead member fails the sync at once (its connections close); one that
stops answering holds the trainer for up to --sync-timeout in that
iteration, while every trainer rank goes on beating (a bounded wait is
not a hang), so only the stopped rollout looks hung to the launcher.

The sync group of job epoch E: a TCPStore hosted by trainer rank 0 on
(trainer nodes[0], the trainer role's port), key prefix "sync-E/G" with G
the trainer's attempt at E (the store's counter "sync-E/gen"), a
ProcessGroupGloo of 1 + (rollout nodes x nproc) ranks: trainer rank 0 is
sync rank 0, rollout worker LOCAL_RANK on the i-th rollout node is
1 + i * nproc + LOCAL_RANK.

Environment:
  PHALANX_RENDEZVOUS_FILE  the cross-role document (JSON, replaced by rename):
                           {"epoch": E, "roles": [{"name", "epoch", "state",
                           "nproc", "port", "nodes"}, ...]}; without it the
                           trainer trains alone and rollouts wait
  PHALANX_EPOCH            the job epoch the process started in: an older
                           document is not acted on
  PHALANX_ROLE_EPOCH       the role's epoch then (logged)
  PHX_RL_NODE              this node's name in the document (overrides
                           PHALANX_NODE, SLURMD_NODENAME, the host name), so
                           that one host can play several nodes in tests
  LOCAL_RANK               a rollout worker's place on its node (default 0)
  PHX_LIBPHALANX           libphalanx to report progress and waits through, as
                           launch_probe.py does: phx_heartbeat once per
                           trainer iteration (the iteration) and rollout
                           generation (the count), and every 0.5 s while a
                           rollout waits (the first report must reach an
                           agent, else the process fails at start, as the
                           probe does); unset: no reports

Output lines (flushed, one each):
  rl trainer start iter I restored R     rank 0; R 1 after a checkpoint
  rl trainer iter I epoch E synced S samples_from R
                                         rank 0, every iteration; E the sync
                                         group's job epoch or -1
  rl trainer done iters N                rank 0, at the end (N the last
                                         iteration: --iters, or the one
                                         that found --stop-file)
  rl rollout NODE joined epoch E rank K  on each (re)join
  rl rollout NODE gen from_iter I epoch E  each generation
and notes about groups formed, lost and failed ("rl trainer sync ...",
"rl rollout NODE left ...").
"""
import argparse
import ctypes
import datetime
import json
import os
import signal
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch._C._distributed_c10d import AllreduceOptions, BroadcastOptions

try:
    ProcessGroupGloo = dist.ProcessGroupGloo
except AttributeError:
    from torch._C._distributed_c10d import ProcessGroupGloo

IN, OUT = 8, 4
NWEIGHTS = IN * OUT + OUT
ROWS = 8  # samples per rollout worker and generation
ROW = IN + OUT  # a sample: observation, target
HEAD = 3  # iteration, epoch, attempt before the weights
STOP, REGROUP = -1, -2  # "iterations" that end a group
CKPT_EVERY = 5
POLL = 0.2


def say(msg):
    print(msg, flush=True)


def first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


class Heartbeat:
    """phx_heartbeat through libphalanx (ctypes, as launch_probe.py does)."""

    def __init__(self):
        self.lib = None
        self.lock = threading.Lock()
        self.step = 0
        self._waiting = False
        path = os.environ.get("PHX_LIBPHALANX")
        if path:
            lib = ctypes.CDLL(path)
            lib.phx_heartbeat.argtypes = [ctypes.c_long]
            lib.phx_heartbeat.restype = ctypes.c_int
            lib.phx_wait_begin.restype = ctypes.c_int
            lib.phx_wait_end.restype = ctypes.c_int
            lib.phx_finalize.argtypes = []
            lib.phx_finalize.restype = None
            self.lib = lib

    @property
    def waiting(self):
        return self._waiting

    @waiting.setter
    def waiting(self, on):
        """Waiting on the other role: told to Phalanx (phx_wait_begin(3)), for the goodput."""
        if on != self._waiting and self.lib:
            (self.lib.phx_wait_begin if on else self.lib.phx_wait_end)()
        self._waiting = on

    def beat(self, step):
        with self.lock:
            self.step = step
            return self.lib.phx_heartbeat(step) if self.lib else 0

    def arm(self, step):
        # The first heartbeat arms the hang check: start-up is not a step.
        if self.beat(step) != 0:
            raise RuntimeError("phx_heartbeat failed: no agent")

    def keep_beating(self, every=0.5):
        """Beats the last step every `every` seconds while .waiting is set."""
        def loop():
            while True:
                time.sleep(every)
                if self.waiting:
                    self.beat(self.step)
        if self.lib:
            threading.Thread(target=loop, daemon=True).start()

    def finalize(self):
        # What follows the last step (shutting down) is not a hang.
        self.waiting = False
        with self.lock:
            if self.lib:
                self.lib.phx_finalize()
            self.lib = None  # no beat after it


def read_doc(last):
    """The rendezvous document, or `last` when it cannot be read now."""
    path = os.environ.get("PHALANX_RENDEZVOUS_FILE")
    if not path:
        return None
    try:
        with open(path) as f:
            doc = json.load(f)
        int(doc["epoch"])
        return doc
    except (OSError, ValueError, KeyError, TypeError):
        return last


def role_of(doc, name):
    for r in (doc or {}).get("roles", []):
        if r.get("name") == name:
            return r
    return None


def same_node(a, b):
    return a == b or a.split(".")[0] == b.split(".")[0]


def node_name():
    for var in ("PHX_RL_NODE", "PHALANX_NODE", "SLURMD_NODENAME"):
        if os.environ.get(var):
            return os.environ[var]
    return socket.gethostname()


def min_epoch():
    try:
        return int(os.environ.get("PHALANX_EPOCH", "0"))
    except ValueError:
        return 0


def sync_target(doc, node=None, local=0):
    """(epoch, host, port, size, rank) of the sync group the document calls
    for, rank being this rollout worker's (node given) or 0; None when there
    is none now (a role not running, this node not listed, a stale document)."""
    if doc is None or int(doc["epoch"]) < min_epoch():
        return None
    tr, ro = role_of(doc, "trainer"), role_of(doc, "rollout")
    if not tr or not ro or tr.get("state") != "running" or ro.get("state") != "running":
        return None
    if not tr.get("nodes") or not ro.get("nodes") or not tr.get("port"):
        return None
    nproc = int(ro.get("nproc") or 1)
    size = 1 + len(ro["nodes"]) * nproc
    rank = 0
    if node is not None:
        idx = [i for i, n in enumerate(ro["nodes"]) if same_node(n, node)]
        if not idx or local >= nproc:
            return None
        rank = 1 + idx[0] * nproc + local
    try:
        host = socket.gethostbyname(tr["nodes"][0])
    except OSError:
        return None
    return int(doc["epoch"]), host, int(tr["port"]), size, rank


def make_store(host, port, master, timeout):
    """A TCPStore with no fixed world (members change per attempt)."""
    kw = dict(wait_for_workers=False)
    try:
        # PyTorch 2.x asks for libuv by default; some builds lack it.
        return dist.TCPStore(host, port, None, master, timeout, use_libuv=True, **kw)
    except TypeError:  # 1.13: no use_libuv
        return dist.TCPStore(host, port, None, master, timeout, **kw)
    except RuntimeError as e:
        if "libuv" not in str(e):
            raise
        return dist.TCPStore(host, port, None, master, timeout, use_libuv=False, **kw)


def gen_key(epoch):
    return f"sync-{epoch}/gen"


def new_group(store, epoch, attempt, rank, size, timeout):
    return ProcessGroupGloo(dist.PrefixStore(f"sync-{epoch}/{attempt}", store), rank, size,
                            timeout)


# ProcessGroupGloo's own calls (lists of tensors, a Work to wait for), the
# same in 1.13 and 2.x; the group's timeout makes a silent peer an exception.
def broadcast(pg, t):
    opts = BroadcastOptions()
    opts.rootRank = 0
    opts.rootTensor = 0
    pg.broadcast([t], opts).wait()


def allreduce(pg, t):
    pg.allreduce([t], AllreduceOptions()).wait()


class Forming:
    """A sync group being formed in a thread of its own (it waits for every
    member up to the timeout); .result is (pg, attempt) or an exception."""

    def __init__(self, fn, epoch):
        self.epoch = epoch
        self.result = None
        self.attempt = None
        self.abandoned = False
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn):
        try:
            self.result = fn(self)
        except Exception as e:  # reported by the caller
            self.result = e
        if self.abandoned:
            self.result = None  # the group (if any) goes with this thread

    def done(self):
        return not self.thread.is_alive()


class TrainerSync:
    """Trainer rank 0's end of the sync group."""

    def __init__(self, timeout):
        self.timeout = datetime.timedelta(seconds=timeout)
        self.doc = None
        self.stores = {}  # epoch -> the TCPStore this process hosts
        self.pg = None
        self.epoch = self.size = self.attempt = None
        self.forming = None
        self.last_try = 0.0

    def _form(self, epoch, host, port, size):
        def fn(f):
            store = self.stores.get(epoch)
            if store is None:
                store = make_store(host, port, True, self.timeout)
                self.stores[epoch] = store
            f.attempt = store.add(gen_key(epoch), 1)
            return new_group(store, epoch, f.attempt, 0, size, self.timeout), f.attempt
        return fn

    def drop(self, why=None):
        if self.pg is not None and why is not None:
            # Tells the members to leave at once (best effort): they need not
            # wait out the timeout to learn that this group is over.
            try:
                head = torch.zeros(HEAD + NWEIGHTS, dtype=torch.float64)
                head[0] = why
                broadcast(self.pg, head)
            except Exception:
                pass
        self.pg = None

    def _adopt(self, target):
        """Takes the group formed, starts forming one; True with a group."""
        epoch, host, port, size, _ = target
        f = self.forming
        if f is not None and f.done():
            self.forming = None
            if isinstance(f.result, Exception):
                say(f"rl trainer sync failed epoch {f.epoch} attempt {f.attempt}: "
                    f"{first_line(f.result)}")
            elif f.result is not None and f.epoch == epoch:
                self.pg, self.attempt = f.result
                self.epoch, self.size = epoch, size
                say(f"rl trainer sync formed epoch {epoch} attempt {self.attempt} size {size}")
                return True
        if f is not None and f.epoch != epoch:
            f.abandoned = True  # its members are gone: it fails on its own
            self.forming = None
        if self.forming is None and time.monotonic() - self.last_try >= 1.0:
            self.stores = {e: s for e, s in self.stores.items() if e == epoch}
            self.last_try = time.monotonic()
            self.forming = Forming(self._form(epoch, host, port, size), epoch)
        return False

    def step(self, it, weights):
        """One iteration's sync: (synced, epoch, rollouts, samples or None)."""
        self.doc = read_doc(self.doc)
        target = sync_target(self.doc)
        if target is None:
            self.drop(REGROUP)
            if self.forming is not None:
                self.forming.abandoned = True
                self.forming = None
            return 0, -1, 0, None
        epoch, _, _, size, _ = target
        if self.pg is not None and (self.epoch != epoch or self.size != size):
            self.drop(REGROUP)
        if self.pg is None and not self._adopt(target):
            return 0, -1, 0, None
        try:
            head = torch.zeros(HEAD + NWEIGHTS, dtype=torch.float64)
            head[0], head[1], head[2] = it, self.epoch, self.attempt
            head[HEAD:] = weights
            broadcast(self.pg, head)
            got = torch.zeros(self.size, 2 + ROWS * ROW, dtype=torch.float64)
            allreduce(self.pg, got)
        except Exception as e:
            say(f"rl trainer sync lost epoch {self.epoch} attempt {self.attempt} at iter {it}: "
                f"{first_line(e)}")
            self.drop()
            return 0, self.epoch, 0, None
        rows = got[1:]
        ok = (rows[:, 0] == 1) & (rows[:, 1] == it)
        n = int(ok.sum())
        if n == 0:
            return 0, self.epoch, 0, None
        samples = rows[ok, 2:].reshape(-1, ROW).to(torch.float32)
        return 1, self.epoch, n, samples

    def finish(self):
        self.drop(STOP)
        if self.forming is not None:
            self.forming.abandoned = True


def flat_weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()]).to(torch.float64)


def first_samples():
    g = torch.Generator().manual_seed(42)
    x = torch.randn(ROWS * 2, IN, generator=g)
    w = torch.randn(OUT, IN, generator=g)
    return torch.cat([x, torch.tanh(x @ w.t())], dim=1)


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


def trainer(args):
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    torch.manual_seed(1234)
    model = nn.Linear(IN, OUT)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    phx, ckpt, state = None, None, None
    if args.phalanx:
        import phalanx
        import phalanx.pytorch as pp

        phx = phalanx.Phalanx()
        got = phx.restore()
        if got is not None:
            state = pp.decode(got[1])
            del got
    else:
        os.makedirs(args.ckpt_dir, exist_ok=True)
        ckpt = os.path.join(args.ckpt_dir, "ckpt.pt")
        if os.path.exists(ckpt):
            state = torch.load(ckpt, map_location="cpu")
    start, restored = 1, 0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start, restored = int(state["iter"]) + 1, 1
    hb = Heartbeat()
    hb.arm(start - 1)
    if rank == 0:
        say(f"rl trainer start iter {start} restored {restored}")
        say(f"rl trainer epochs job {os.environ.get('PHALANX_EPOCH', '-')} "
            f"role {os.environ.get('PHALANX_ROLE_EPOCH', '-')} world {world}")
    sync = TrainerSync(args.sync_timeout) if rank == 0 else None
    samples = first_samples()
    # Waiting on rank 0's sync (bounded by --sync-timeout) is not a hang:
    # beats go on meanwhile, from a thread, as a waiting rollout's do.
    hb.keep_beating()
    it = start - 1
    stop = False
    while it < args.iters and not stop:
        it += 1
        # (1) a step on the last samples, this rank's share of them.
        mine = samples[rank::world] if samples.shape[0] >= world else samples
        opt.zero_grad()
        nn.functional.mse_loss(ddp(mine[:, :IN]), mine[:, IN:]).backward()
        opt.step()
        # (2, 3) rank 0 syncs with the rollouts; (4) every rank learns the
        # outcome (and whether to stop) from rank 0, so all take the same
        # collectives.
        head = torch.zeros(5, dtype=torch.float64)
        got = None
        hb.waiting = True
        if rank == 0:
            synced, epoch, nfrom, got = sync.step(it, flat_weights(model))
            head[0], head[1], head[2] = synced, epoch, nfrom
            head[3] = got.shape[0] if got is not None else 0
            head[4] = bool(args.stop_file and os.path.exists(args.stop_file))
        dist.broadcast(head, 0)
        hb.waiting = False
        if head[0] == 1:
            if got is None:
                got = torch.zeros(int(head[3]), ROW)
            dist.broadcast(got, 0)
            samples = got
        stop = bool(head[4] == 1)
        if rank == 0:
            say(f"rl trainer iter {it} epoch {int(head[1])} synced {int(head[0])} "
                f"samples_from {int(head[2])}")
        hb.beat(it)
        if phx is not None:
            if phx.should_save(it) or stop:
                pp.save(phx, it, {"model": model.state_dict(), "opt": opt.state_dict(),
                                  "iter": it}, busy="wait")
        elif it % CKPT_EVERY == 0 or stop:
            if rank == 0:
                save_atomic({"model": model.state_dict(), "opt": opt.state_dict(), "iter": it},
                            ckpt)
            dist.barrier()
        time.sleep(args.iter_sleep)
    hb.finalize()
    if rank == 0:
        sync.finish()
        say(f"rl trainer done iters {it}")
    dist.barrier()
    dist.destroy_process_group()
    # PyTorch 1.13 can deadlock freeing DDP after this (train.py): leave
    # without the teardown, and without waiting for sync threads.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def generate(weights, it, rank):
    """Samples from the policy received: observations and soft targets."""
    w = weights[:IN * OUT].reshape(OUT, IN).to(torch.float32)
    b = weights[IN * OUT:].to(torch.float32)
    g = torch.Generator().manual_seed(7919 * it + rank)
    x = torch.randn(ROWS, IN, generator=g)
    logits = x @ w.t() + b
    best = nn.functional.one_hot(logits.argmax(dim=1), OUT).to(torch.float32)
    y = 0.9 * torch.tanh(logits) + 0.1 * best
    return torch.cat([x, y], dim=1).flatten().to(torch.float64)


class RolloutJoin:
    """A rollout worker joining the sync group of one epoch, in a thread:
    connects to the trainer's store, waits for an attempt >= min_attempt,
    joins it. The main loop watches the trainer's counter meanwhile and
    moves to a newer attempt."""

    def __init__(self, target, min_attempt, timeout):
        self.target = target
        self.min_attempt = min_attempt
        self.timeout = timeout
        self.poll_store = None
        self.forming = Forming(self._join, target[0])

    def _join(self, f):
        epoch, host, port, size, rank = self.target
        # PyTorch's store client waits a second between refused connects:
        # knock first, so a store that comes up is joined at once.
        end = time.monotonic() + self.timeout.total_seconds()
        while not f.abandoned:
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > end:
                    raise TimeoutError(f"nothing listens on {host}:{port}")
                time.sleep(0.1)
        if f.abandoned:
            return None
        store = make_store(host, port, False, self.timeout)
        self.poll_store = make_store(host, port, False, self.timeout)
        while not f.abandoned:
            attempt = store.add(gen_key(epoch), 0)
            if attempt >= self.min_attempt:
                f.attempt = attempt
                return new_group(store, epoch, attempt, rank, size, self.timeout), attempt
            time.sleep(POLL)
        return None

    def newer(self):
        """The trainer's attempt when it is past the one being joined, else None."""
        f = self.forming
        if f.attempt is None or self.poll_store is None:
            return None
        now = self.poll_store.add(gen_key(self.target[0]), 0)
        return now if now > f.attempt else None

    def abandon(self):
        self.forming.abandoned = True


def rollout(args):
    node = node_name()
    local = int(os.environ.get("LOCAL_RANK", "0") or 0)
    timeout = datetime.timedelta(seconds=args.sync_timeout)
    hb = Heartbeat()
    hb.arm(0)
    hb.waiting = True
    hb.keep_beating()
    say(f"rl rollout {node} start local_rank {local} "
        f"epochs job {os.environ.get('PHALANX_EPOCH', '-')} "
        f"role {os.environ.get('PHALANX_ROLE_EPOCH', '-')}")
    doc = None
    join = None  # a RolloutJoin under way
    pg = None
    cur = None  # the target of join / pg
    attempt = 0
    min_attempt = 1  # at cur's epoch
    next_try = 0.0
    gens = 0
    while True:
        if pg is None:
            doc = read_doc(doc)
            tr = role_of(doc, "trainer")
            if tr and tr.get("state") == "done":
                if join:
                    join.abandon()
                say(f"rl rollout {node} exit: trainer done after {gens} generations")
                hb.finalize()
                sys.stdout.flush()
                os._exit(0)
            target = sync_target(doc, node, local)
            if target != cur:
                if join:
                    join.abandon()
                join = None
                if cur is None or target is None or target[0] != cur[0]:
                    min_attempt = 1
                cur = target
            if cur is None:
                time.sleep(POLL)
                continue
            if join is None:
                if time.monotonic() < next_try:
                    time.sleep(POLL)
                    continue
                join = RolloutJoin(cur, min_attempt, timeout)
            f = join.forming
            if not f.done():
                try:
                    newer = join.newer()
                except Exception:
                    newer = None  # the thread sees it too
                if newer is not None:
                    join.abandon()
                    join = None
                    min_attempt = newer
                    continue
                time.sleep(POLL)
                continue
            join = None
            if isinstance(f.result, Exception) or f.result is None:
                if f.result is not None:
                    say(f"rl rollout {node} join failed epoch {cur[0]}: {first_line(f.result)}")
                next_try = time.monotonic() + 1.0
                continue
            pg, attempt = f.result
            min_attempt = attempt + 1
            say(f"rl rollout {node} joined epoch {cur[0]} rank {cur[4]}")
        # One round: weights in, samples out.
        epoch, _, _, size, rank = cur
        try:
            head = torch.zeros(HEAD + NWEIGHTS, dtype=torch.float64)
            broadcast(pg, head)
            it = int(head[0])
            if it < 0:
                why = "the trainer finished" if it == STOP else "the trainer regroups"
                say(f"rl rollout {node} left epoch {epoch}: {why}")
                pg = None
                continue
            hb.waiting = False
            time.sleep(args.gen_sleep)
            out = torch.zeros(size, 2 + ROWS * ROW, dtype=torch.float64)
            out[rank, 0], out[rank, 1] = 1, it
            out[rank, 2:] = generate(head[HEAD:], it, rank)
            hb.waiting = True
            allreduce(pg, out)
        except Exception as e:
            hb.waiting = True
            say(f"rl rollout {node} left epoch {epoch}: {first_line(e)}")
            pg = None
            continue
        gens += 1
        hb.beat(gens)
        say(f"rl rollout {node} gen from_iter {it} epoch {epoch}")


def isolated(run, args):
    """PyTorch 1.x's TCPStore client runs a watcher thread that aborts the
    whole process (std::terminate) when the store's host resets the
    connection, as the trainer's rank 0 does when its step is stopped (fixed
    in PyTorch 2). So under 1.x the rollout loop runs in a child process,
    started again when a signal ends it: the worker the agent supervises,
    and beats through, stays the same process."""
    child = 0

    def stop(signum, frame):
        if child:
            os.kill(child, signum)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        child = os.fork()
        if child == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                rc = run(args)
            except SystemExit as e:
                rc = e.code
            sys.stdout.flush()
            os._exit(rc if isinstance(rc, int) else 1)
        _, status = os.waitpid(child, 0)
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        say(f"rl rollout {node_name()} sync process ended by signal "
            f"{os.WTERMSIG(status)}; starting another")


def main():
    ap = argparse.ArgumentParser(description="a toy RL job: trainer and rollout roles")
    sub = ap.add_subparsers(dest="role", required=True)
    t = sub.add_parser("trainer")
    how = t.add_mutually_exclusive_group(required=True)
    how.add_argument("--ckpt-dir", help="torch.save to DIR/ckpt.pt every 5 iterations")
    how.add_argument("--phalanx", action="store_true",
                     help="save and restore through Phalanx's checkpoint engine")
    t.add_argument("--iters", type=int, required=True)
    t.add_argument("--iter-sleep", type=float, default=0.1)
    t.add_argument("--stop-file", help="stop after the iteration that finds this file")
    r = sub.add_parser("rollout")
    r.add_argument("--gen-sleep", type=float, default=0.2)
    for p in (t, r):
        p.add_argument("--sync-timeout", type=float, default=10.0)
    args = ap.parse_args()
    if args.role == "trainer":
        return trainer(args)
    if int(torch.__version__.split(".")[0]) < 2:
        return isolated(rollout, args)
    return rollout(args)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A job that saves and loads through torch.distributed.checkpoint (DCP)
with phalanx.dcp, for the lab tests (74-dcp).

save: trains a small MLP for --steps steps with Adam on gloo and saves the
model and optimizer state with dcp.save (or dcp.async_save with --async,
changing every tensor of the state as soon as it returns)
and storage_writer=phalanx.dcp.StorageWriter(step) at the last step, then
waits until the save is durable. Where PyTorch has FSDP2 (2.6), every parameter is sharded with
fully_shard over the job's ranks and the state dicts come from
torch.distributed.checkpoint.state_dict (DTensors, as FSDP2 training code
saves them). PyTorch 2.6's FSDP2 forward needs a device stream that its CPU
build lacks, so each step computes the gradients from the full parameters
of a plain copy of the model and gives each rank its shard of them: the
state saved is FSDP2's, the math is the same as unsharded training.
Without FSDP2 (1.13) every rank holds the whole state, as with DDP.

load: builds the same model and optimizer on this job's ranks (another
world size, or the same) and loads the state with dcp.load, through the
agent (no --dir) or from a directory tier (--dir).

Both print, from rank 0, "state sha256 HEX" over every full tensor of the
model and optimizer state in name order: a load matches a save exactly when
the resharded bytes are the saved ones.
"""
import argparse
import hashlib
import sys
import warnings

import torch
import torch.distributed as dist
try:
    import torch.distributed.checkpoint as dcp
except ImportError:  # PyTorch 1.13
    import torch.distributed._shard.checkpoint as dcp
import torch.nn as nn

import phalanx
import phalanx.dcp as pdcp

try:
    from torch.distributed.fsdp import fully_shard  # PyTorch 2.6
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
except ImportError:
    fully_shard = None


def say(msg):
    """A line of rank 0's (phalanx-launch puts "[rank 0] " before it)."""
    if dist.get_rank() == 0:
        print(msg, flush=True)


def build(fsdp):
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(24, 40), nn.Tanh(), nn.Linear(40, 12))
    plain = None
    if fsdp:
        plain = nn.Sequential(nn.Linear(24, 40), nn.Tanh(), nn.Linear(40, 12))
        plain.load_state_dict(model.state_dict())
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    return model, plain, opt


def full(t):
    return t.full_tensor() if fully_shard and isinstance(t, DTensor) else t


def train_step(model, plain, opt, step):
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(16, 24, generator=g), torch.randn(16, 12, generator=g)
    if plain is None:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
    else:
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, p in plain.named_parameters():
                p.copy_(params[name].full_tensor())
        plain.zero_grad()
        nn.functional.mse_loss(plain(x), y).backward()
        for name, p in plain.named_parameters():
            params[name].grad = distribute_tensor(p.grad, params[name].device_mesh,
                                                  params[name].placements)
    opt.step()
    opt.zero_grad()


def state_dicts(model, opt, fsdp):
    if fsdp:
        msd, osd = get_state_dict(model, opt)
        return {"model": msd, "optim": osd}
    return {"model": model.state_dict(), "optim": opt.state_dict()}


def tensors(obj, prefix="", local=False):
    """(name, tensor) of every tensor in obj: a DTensor whole, or its local part."""
    if isinstance(obj, dict):
        for k in sorted(obj, key=str):
            yield from tensors(obj[k], f"{prefix}/{k}", local)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from tensors(v, f"{prefix}/{i}", local)
    elif isinstance(obj, torch.Tensor):
        if local and fully_shard and isinstance(obj, DTensor):
            yield prefix, obj.to_local()
        else:
            yield prefix, obj if local else full(obj)


def state_sha(state):
    h = hashlib.sha256()
    for name, t in tensors(state):
        h.update(name.encode())
        h.update(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def touch(state):
    """Changes every tensor of state in place, without a collective (the
    async save's thread runs its own on the same process group)."""
    with torch.no_grad():
        for _, t in tensors(state, local=True):
            if t.is_floating_point():
                t.add_(1.0)
            elif t.numel():
                t.add_(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("save", "load"))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--dir", help="load from this directory tier (else through the agent)")
    ap.add_argument("--async", dest="use_async", action="store_true",
                    help="save with dcp.async_save and wait for its future")
    ap.add_argument("--in-place", action="store_true",
                    help="with --async: StorageWriter(snapshot=False), the state left "
                    "alone until the future is done")
    ap.add_argument("--no-room", action="store_true",
                    help="with --async: stage no room for DCP's pickled items and "
                    "metadata, so the shard outgrows it")
    args = ap.parse_args()

    # DTensor's random ops on a CPU mesh warn on every rank; none is used.
    warnings.filterwarnings("ignore", message="DTensor random operators")
    dist.init_process_group("gloo")
    fsdp = fully_shard is not None
    model, plain, opt = build(fsdp)
    say(f"world {dist.get_world_size()} fsdp2 {'yes' if fsdp else 'no'}")
    if args.mode == "load":
        state = state_dicts(model, opt, fsdp) if fsdp else \
            {"model": model.state_dict()}
        reader = pdcp.StorageReader(args.dir)
        if hasattr(dcp, "load"):
            dcp.load(state, storage_reader=reader)
        else:
            dcp.load_state_dict(state, storage_reader=reader)
        if fsdp:
            set_state_dict(model, opt, model_state_dict=state["model"],
                           optim_state_dict=state["optim"])
        else:
            model.load_state_dict(state["model"])
        say(f"loaded step {reader.step}")
        say(f"state sha256 {state_sha(state_dicts(model, opt, fsdp) if fsdp else state)}")
        return 0
    for step in range(1, args.steps + 1):
        train_step(model, plain, opt, step)
    # 1.13's optimizer state has int steps and keys DCP 1.13 cannot plan;
    # there the model's state alone goes through DCP.
    state = state_dicts(model, opt, fsdp) if fsdp else {"model": model.state_dict()}
    writer = pdcp.StorageWriter(args.steps, snapshot=not args.in_place)
    if args.no_room:
        pdcp.PICKLE_ROOM = pdcp.META_ROOM = pdcp.META_ITEM_ROOM = 0
    saved = state_sha(state)
    try:
        if args.use_async:
            fut = dcp.async_save(state, storage_writer=writer)
            # AsyncStager's contract: once async_save returns, training may
            # change the state; the save holds it as it was.
            if not args.in_place:
                touch(state)
            fut.result()
        elif hasattr(dcp, "save"):
            dcp.save(state, storage_writer=writer)
        else:
            dcp.save_state_dict(state, storage_writer=writer)
    except Exception as e:  # the no-agent case: the error every rank gets
        say(f"save failed: {type(e).__name__}: {e}")
        return 3
    durable = phalanx.Phalanx().save_wait(args.steps, 120)
    say(f"saved step {args.steps} durable {durable}")
    say(f"state sha256 {saved}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

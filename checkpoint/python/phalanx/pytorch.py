# SPDX-License-Identifier: Apache-2.0
"""Model and optimizer state dicts through Phalanx, tensors never pickled.

A shard is: b"PHXSTATE", a little-endian u32 format version (2; 1 is
read too), a u32 index length, a u64 offset of the tensor data, the index
(UTF-8 JSON), then each tensor's raw bytes at a 64-byte aligned offset.
The index is the state's tree with each tensor replaced by {"t": [dtype,
shape, offset, nbytes]} (every dtype of the running PyTorch: float8,
unsigned, complex, ...); dicts with str or int keys keep their key types
({"d": [[key, value], ...]}), tuples stay tuples ({"u": [...]}), plain
JSON values (numbers, strings, booleans, None) are stored as they are.
Any other value (argparse.Namespace, sets, numpy and Python RNG states,
DeepSpeed's client_state) is pickled, {"p": [offset, nbytes, [leaf, ...]]},
with the tensors and numeric numpy arrays inside it kept out of the pickle
as leaves of their own ({"n": [dtype, shape, offset, nbytes]} for numpy).
restore() unpickles them: only restore shards your own job wrote, as for
torch.load; decode(..., allow_pickle=False) refuses them instead.

    import phalanx, phalanx.pytorch as pp
    phx = phalanx.Phalanx()
    got = pp.restore(phx)                       # None or (step, state)
    if got: model.load_state_dict(got[1]["model"]); ...
    if phx.should_save(step):
        pp.save(phx, step, {"model": model.state_dict(), "opt": opt.state_dict()})
"""
import io
import json
from collections import OrderedDict
import pickle
import re
import struct
import time
import warnings

import torch

try:
    import numpy
except ImportError:  # numpy arrays then are pickled whole, like any object
    numpy = None
try:
    from torch.distributed.tensor import DTensor as _DTensor  # PyTorch 2.4+
except ImportError:
    _DTensor = None

from . import EBUSY, PhalanxError

MAGIC = b"PHXSTATE"
VERSION = 2
HEAD = struct.Struct("<8sIIQ")
ALIGN = 64

# Every plain dtype this PyTorch has, by its canonical name ("float32", not
# "float"); quantized and sub-byte dtypes have no plain bytes to copy.
_DTYPES = {name: getattr(torch, name) for name in dir(torch)
           if isinstance(getattr(torch, name), torch.dtype)
           and str(getattr(torch, name)) == "torch." + name
           and not re.match(r"q|bits|u?int[1-7]$", name)}
_NAMES = {v: k for k, v in _DTYPES.items()}


class FormatError(ValueError):
    """A buffer that is not a Phalanx state shard."""


def _align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _tensor_entry(t, tensors, offset):
    if t.dtype not in _NAMES:
        raise TypeError(f"phalanx: tensors of dtype {t.dtype} cannot be saved")
    nbytes = t.numel() * t.element_size()
    tensors.append((t, offset))
    return {"t": [_NAMES[t.dtype], list(t.shape), offset, nbytes]}, _align(offset + nbytes)


def _bytes_entry(data, tensors, offset):
    """data's bytes (as a uint8 tensor) in the data region: (offset, nbytes, next offset)."""
    t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
        torch.empty(0, dtype=torch.uint8)
    tensors.append((t, offset))
    return offset, len(data), _align(offset + len(data))


def _numeric_array(obj):
    return numpy is not None and isinstance(obj, numpy.ndarray) and \
        obj.dtype.kind in "biufc" and not obj.dtype.hasobject


def _pickled(obj, tensors, offset):
    """obj pickled, its tensors and numeric numpy arrays stored beside the pickle."""
    leaves = []

    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            nonlocal offset
            if _plain_tensor(o):
                entry, offset = _tensor_entry(o, tensors, offset)
            elif _numeric_array(o):
                a = numpy.ascontiguousarray(o)
                off, n, offset = _bytes_entry(a.view(numpy.uint8).reshape(-1).tobytes()
                                              if a.size else b"", tensors, offset)
                entry = {"n": [a.dtype.str, list(a.shape), off, n]}
            else:
                return None
            leaves.append(entry)
            return len(leaves) - 1

    buf = io.BytesIO()
    try:
        Pickler(buf, protocol=4).dump(obj)
    except Exception as e:
        raise TypeError(f"phalanx: cannot save a {type(obj).__name__}: it does not pickle "
                        f"({e}); convert it to tensors or plain values") from e
    off, n, offset = _bytes_entry(buf.getbuffer(), tensors, offset)
    return {"p": [off, n, leaves]}, offset


def _placement_text(p):
    if p.is_shard():
        return ["S", p.dim]
    if p.is_replicate():
        return ["R"]
    if p.is_partial():
        return ["P", str(getattr(p, "reduce_op", "sum"))]
    raise TypeError(f"phalanx: a DTensor placement {p!r} cannot be saved")


def _dtensor_entry(dt, tensors, offset):
    """This rank's shard of a DTensor, with what rebuilding it needs:
    {"dt": [local tensor, placements, global shape, global stride, mesh shape]}."""
    local, offset = _tensor_entry(dt.to_local(), tensors, offset)
    return {"dt": [local, [_placement_text(p) for p in dt.placements], list(dt.shape),
                   list(dt.stride()), list(dt.device_mesh.shape)]}, offset


class LocalShard:
    """A DTensor's shard as saved, when decode() is given no device mesh:
    the local tensor, its placements, the global shape and stride, the mesh shape."""

    def __init__(self, tensor, placements, shape, stride, mesh_shape):
        self.tensor, self.placements = tensor, placements
        self.shape, self.stride, self.mesh_shape = shape, stride, mesh_shape


def _placement(text):
    from torch.distributed.tensor import Partial, Replicate, Shard
    if text[0] == "S":
        return Shard(text[1])
    if text[0] == "R":
        return Replicate()
    if text[0] == "P":
        return Partial(text[1])
    raise FormatError(f"phalanx: unknown DTensor placement {text!r}")


def _plain_tensor(obj):
    """A tensor whose bytes are all there is: not a DTensor or another wrapper."""
    return isinstance(obj, torch.Tensor) and \
        (type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter)


def _index(obj, tensors, offset):
    """The JSON index of obj; tensors collects (tensor, offset); returns (index, offset)."""
    if _plain_tensor(obj):
        return _tensor_entry(obj, tensors, offset)
    if _DTensor is not None and isinstance(obj, _DTensor):
        return _dtensor_entry(obj, tensors, offset)
    if isinstance(obj, torch.Tensor):
        raise TypeError(f"phalanx: a {type(obj).__name__} cannot be saved: save its local "
                        "data as a plain tensor")
    if type(obj) in (dict, OrderedDict) and \
            all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in obj):
        items = []
        for k, v in obj.items():
            sub, offset = _index(v, tensors, offset)
            items.append([k, sub])
        return {"d": items}, offset
    if type(obj) in (list, tuple):
        subs = []
        for v in obj:
            sub, offset = _index(v, tensors, offset)
            subs.append(sub)
        return ({"u": subs} if isinstance(obj, tuple) else {"l": subs}), offset
    if obj is None or type(obj) in (bool, int, str) or \
            (type(obj) is float and obj == obj and obj not in (float("inf"), float("-inf"))):
        return {"v": obj}, offset
    return _pickled(obj, tensors, offset)


def encode_index(state):
    """(header + index bytes, data offset, [(tensor, offset)], total bytes)."""
    tensors = []
    index, size = _index(state, tensors, 0)
    text = json.dumps(index, separators=(",", ":"), allow_nan=True).encode()
    data_off = _align(HEAD.size + len(text))
    head = HEAD.pack(MAGIC, VERSION, len(text), data_off) + text
    return head, data_off, tensors, data_off + size


def _write(view, head, data_off, tensors, total):
    """The shard into view (a writable buffer of total bytes)."""
    view[:len(head)] = head
    dst = torch.frombuffer(view, dtype=torch.uint8) if total else None
    devices = set()
    for t, off in tensors:
        n = t.numel() * t.element_size()
        if n == 0:
            continue
        out = dst[data_off + off:data_off + off + n].view(t.dtype).view(t.shape)
        # Device tensors: every copy queued at once, one wait per device for all.
        if t.is_cuda:
            devices.add(t.device)
        out.copy_(t.detach(), non_blocking=t.is_cuda)
    for d in devices:
        torch.cuda.synchronize(d)


_pinning = None  # the device the agent's buffers were pinned for


def _pin_for_cuda(phx, tensors):
    """Page-locks the agent's staging buffers for CUDA (phx_set_pinning(3)) the
    first time a state holds CUDA tensors, so their copies run at the DMA's
    speed. Registered portable, under the device the training uses now: a
    later save from another thread (whose current device is 0) creates no
    context on another GPU."""
    global _pinning
    if _pinning is not None or not any(t.is_cuda for t, _ in tensors):
        return
    rt, device = torch.cuda.cudart(), torch.cuda.current_device()
    portable = 1  # cudaHostRegisterPortable

    def pin(addr, nbytes):
        with torch.cuda.device(device):
            return rt.cudaHostRegister(addr, nbytes, portable) == rt.cudaError.success

    def unpin(addr):
        with torch.cuda.device(device):
            rt.cudaHostUnregister(addr)

    phx.set_pinning(pin, unpin)
    _pinning = device


def encode(state):
    """The shard of state as bytes, as save() writes it (for tests and tools)."""
    head, data_off, tensors, total = encode_index(state)
    buf = bytearray(total)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _write(memoryview(buf), head, data_off, tensors, total)
    return bytes(buf)


class Saved:
    """What save() returns: true when the state went to the agent, false when
    the save was skipped (the agent busy); wait() until it is durable."""

    def __init__(self, phx, step):
        self.phx, self.step = phx, step

    def __bool__(self):
        return self.step is not None

    def wait(self, timeout=None):
        """True once the state as of this step is durable on every node (see
        Phalanx.save_wait); False after timeout seconds, or for a skipped save."""
        return bool(self) and self.phx.save_wait(self.step, timeout)


def _holds_shards(obj):
    """True when obj holds a DTensor sharded along some mesh dimension."""
    if _DTensor is not None and isinstance(obj, _DTensor):
        return any(p.is_shard() for p in obj.placements)
    if isinstance(obj, dict):
        return any(_holds_shards(v) for v in obj.values())
    if type(obj) in (list, tuple):
        return any(_holds_shards(v) for v in obj)
    return False


def save(phx, step, state, digest=None, busy="skip", timeout=None, sharded=None):
    """Saves state (nested dicts/lists of tensors and plain values, anything
    else pickled without its tensors) as step; returns a Saved.

    sharded: whether the state is this data-parallel rank's part only
    (FSDP, ZeRO) rather than the same on every dp rank (DDP); None (the
    default) says True when the state holds a sharded DTensor. A restore
    after --elastic changed dp takes a replicated state from any dp rank of
    the same pipeline stage and tensor slice, and refuses a sharded one.

    busy: when the agent is still persisting earlier saves into every
    staging buffer (EBUSY), "skip" (the default) skips this save: train on
    and save later; "wait" waits (at most timeout seconds, then skips) for a
    buffer, keeping the training loop stalled meanwhile.
    digest: a hashlib object updated with the shard's bytes before the commit.
    """
    if busy not in ("skip", "wait"):
        raise ValueError(f"phalanx: busy={busy!r}: use \"skip\" or \"wait\"")
    head, data_off, tensors, total = encode_index(state)
    _pin_for_cuda(phx, tensors)
    try:
        view = phx.begin(step, total, wait=busy == "wait", timeout=timeout,
                         sharded=_holds_shards(state) if sharded is None else sharded)
    except PhalanxError as e:
        if e.status == EBUSY:
            return Saved(phx, None)
        raise
    try:
        _write(view, head, data_off, tensors, total)
        if digest is not None:
            digest.update(view)
    except BaseException:
        phx.abort()
        raise
    finally:
        view.release()
    phx.commit()
    return Saved(phx, step)


class _Reader:
    """What decoding one shard needs: its data region and the caller's choices."""

    def __init__(self, data, data_off, copy, allow_pickle, mesh):
        self.data, self.data_off = data, data_off
        self.copy, self.allow_pickle, self.mesh = copy, allow_pickle, mesh

    def span(self, off, nbytes):
        if not isinstance(off, int) or not isinstance(nbytes, int) or off < 0 or \
                nbytes < 0 or self.data_off + off + nbytes > len(self.data):
            raise FormatError("phalanx: state entry outside the shard")
        return self.data[self.data_off + off:self.data_off + off + nbytes]


def _leaf(node, rd):
    """A tensor ("t") or numpy array ("n") entry."""
    if not isinstance(node, dict) or len(node) != 1:
        raise FormatError("phalanx: malformed state index entry")
    (kind, val), = node.items()
    dtype, shape, off, nbytes = val
    raw = rd.span(off, nbytes)
    if kind == "t":
        if dtype not in _DTYPES:
            raise FormatError(f"phalanx: dtype {dtype!r} is not one this PyTorch has")
        t = raw.view(_DTYPES[dtype]).view(shape)
        return t.clone() if rd.copy else t
    if kind != "n":
        raise FormatError(f"phalanx: {kind!r} is not a tensor or array entry")
    if numpy is None:
        raise FormatError("phalanx: the state holds numpy arrays; install numpy")
    return numpy.frombuffer(raw.numpy().tobytes(), dtype=numpy.dtype(dtype)).reshape(shape)


def _unpickle(val, rd):
    off, nbytes, leaves = val
    if not rd.allow_pickle:
        raise FormatError("phalanx: the state holds pickled values and allow_pickle is off")
    raw = rd.span(off, nbytes)

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            if not isinstance(pid, int) or not 0 <= pid < len(leaves):
                raise FormatError("phalanx: a pickled value names a leaf the shard lacks")
            return _leaf(leaves[pid], rd)

    return Unpickler(io.BytesIO(raw.numpy().tobytes())).load()


def _dtensor(val, rd):
    local, placements, shape, stride, mesh_shape = val
    t = _leaf(local, rd)
    if rd.mesh is None:
        return LocalShard(t, placements, shape, stride, mesh_shape)
    if _DTensor is None:
        raise FormatError("phalanx: the state holds DTensors; this PyTorch has none")
    if list(rd.mesh.shape) != list(mesh_shape):
        raise FormatError(f"phalanx: a DTensor saved on a mesh of shape {mesh_shape} cannot be "
                          f"rebuilt on one of shape {list(rd.mesh.shape)}; reshard through DCP")
    return _DTensor.from_local(t, rd.mesh, [_placement(p) for p in placements],
                               run_check=False, shape=torch.Size(shape), stride=tuple(stride))


def _build(node, rd):
    if not isinstance(node, dict) or len(node) != 1:
        raise FormatError("phalanx: malformed state index entry")
    (kind, val), = node.items()
    if kind in ("t", "n"):
        return _leaf(node, rd)
    if kind == "d":
        return {k: _build(v, rd) for k, v in val}
    if kind == "l":
        return [_build(v, rd) for v in val]
    if kind == "u":
        return tuple(_build(v, rd) for v in val)
    if kind == "v":
        return val
    if kind == "p":
        return _unpickle(val, rd)
    if kind == "dt":
        return _dtensor(val, rd)
    raise FormatError(f"phalanx: unknown state index entry {kind!r}")


def decode(buf, copy=True, allow_pickle=True, device_mesh=None):
    """The state saved in buf (bytes-like). copy=False returns views into buf
    (tensors only); allow_pickle=False refuses a state holding pickled values;
    DTensors are rebuilt on device_mesh (of the shape they were saved on), or
    come back as LocalShard without one."""
    view = memoryview(buf).cast("B")
    if view.nbytes < HEAD.size:
        raise FormatError("phalanx: shard too short for a state header")
    magic, version, ilen, data_off = HEAD.unpack_from(view, 0)
    if magic != MAGIC or version not in (1, VERSION) or HEAD.size + ilen > data_off or \
            data_off > view.nbytes:
        raise FormatError(f"phalanx: not a version 1 or {VERSION} Phalanx state shard")
    index = json.loads(bytes(view[HEAD.size:HEAD.size + ilen]))
    with warnings.catch_warnings():
        # The restored view is read-only; every tensor is cloned out of it.
        warnings.simplefilter("ignore", UserWarning)
        data = torch.frombuffer(view, dtype=torch.uint8)
    try:
        return _build(index, _Reader(data, data_off, copy, allow_pickle, device_mesh))
    except (TypeError, ValueError, RuntimeError) as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"phalanx: malformed state index: {e}") from e


def restore(phx, device_mesh=None):
    """(step, state) of the newest committed generation, or None; DTensors
    are rebuilt on device_mesh (see decode)."""
    got = phx.restore()
    if got is None:
        return None
    step, view = got
    return step, decode(view, copy=True, device_mesh=device_mesh)

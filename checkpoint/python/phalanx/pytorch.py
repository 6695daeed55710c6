# SPDX-License-Identifier: Apache-2.0
"""Model and optimizer state dicts through Phalanx, without pickling tensors.

A shard is: b"PHXSTATE", a little-endian u32 format version (1), a u32
index length, a u64 offset of the tensor data, the index (UTF-8 JSON),
then each tensor's raw bytes at a 64-byte aligned offset. The index is
the state's tree with each tensor replaced by {"t": [dtype, shape,
offset, nbytes]}; dicts keep their key types ({"d": [[key, value], ...]}),
tuples stay tuples ({"u": [...]}). Plain JSON values (numbers, strings,
booleans, None) are stored as they are; anything else is refused rather
than pickled.

    import phalanx, phalanx.pytorch as pp
    phx = phalanx.Phalanx()
    got = pp.restore(phx)                       # None or (step, state)
    if got: model.load_state_dict(got[1]["model"]); ...
    if phx.should_save(step):
        pp.save(phx, step, {"model": model.state_dict(), "opt": opt.state_dict()})
"""
import json
import struct
import warnings

import torch

from . import EBUSY, PhalanxError

MAGIC = b"PHXSTATE"
VERSION = 1
HEAD = struct.Struct("<8sIIQ")
ALIGN = 64

_DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
    "complex64": torch.complex64, "complex128": torch.complex128,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


class FormatError(ValueError):
    """A buffer that is not a Phalanx state shard."""


def _align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _index(obj, tensors, offset):
    """The JSON index of obj; tensors collects (tensor, offset); returns (index, offset)."""
    if isinstance(obj, torch.Tensor):
        if obj.dtype not in _NAMES:
            raise TypeError(f"phalanx: tensors of dtype {obj.dtype} cannot be saved")
        nbytes = obj.numel() * obj.element_size()
        tensors.append((obj, offset))
        entry = {"t": [_NAMES[obj.dtype], list(obj.shape), offset, nbytes]}
        return entry, _align(offset + nbytes)
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"phalanx: dict key {k!r} is neither str nor int")
            sub, offset = _index(v, tensors, offset)
            items.append([k, sub])
        return {"d": items}, offset
    if isinstance(obj, (list, tuple)):
        subs = []
        for v in obj:
            sub, offset = _index(v, tensors, offset)
            subs.append(sub)
        return ({"u": subs} if isinstance(obj, tuple) else {"l": subs}), offset
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}, offset
    raise TypeError(f"phalanx: cannot save a {type(obj).__name__} without pickling; "
                    "convert it to tensors or plain values")


def encode_index(state):
    """(header + index bytes, data offset, [(tensor, offset)], total bytes)."""
    tensors = []
    index, size = _index(state, tensors, 0)
    text = json.dumps(index, separators=(",", ":"), allow_nan=True).encode()
    data_off = _align(HEAD.size + len(text))
    head = HEAD.pack(MAGIC, VERSION, len(text), data_off) + text
    return head, data_off, tensors, data_off + size


def save(phx, step, state, digest=None):
    """Saves state (nested dicts/lists of tensors and plain values) as step.

    digest: a hashlib object updated with the shard's bytes before the commit.
    True once saved; False when the agent is still persisting earlier saves
    into every buffer (EBUSY): this step is skipped, train on and save later.
    """
    head, data_off, tensors, total = encode_index(state)
    try:
        view = phx.begin(step, total)
    except PhalanxError as e:
        if e.status == EBUSY:
            return False
        raise
    try:
        view[:len(head)] = head
        dst = torch.frombuffer(view, dtype=torch.uint8) if total else None
        for t, off in tensors:
            n = t.numel() * t.element_size()
            if n == 0:
                continue
            out = dst[data_off + off:data_off + off + n].view(t.dtype).view(t.shape)
            out.copy_(t.detach())
        del dst
        if digest is not None:
            digest.update(view)
    finally:
        view.release()
    phx.commit()
    return True


def _build(node, data, data_off, copy):
    if not isinstance(node, dict) or len(node) != 1:
        raise FormatError("phalanx: malformed state index entry")
    (kind, val), = node.items()
    if kind == "t":
        dtype, shape, off, nbytes = val
        if dtype not in _DTYPES or off < 0 or data_off + off + nbytes > len(data):
            raise FormatError("phalanx: tensor entry outside the shard")
        t = data[data_off + off:data_off + off + nbytes].view(_DTYPES[dtype]).view(shape)
        return t.clone() if copy else t
    if kind == "d":
        return {k: _build(v, data, data_off, copy) for k, v in val}
    if kind == "l":
        return [_build(v, data, data_off, copy) for v in val]
    if kind == "u":
        return tuple(_build(v, data, data_off, copy) for v in val)
    if kind == "v":
        return val
    raise FormatError(f"phalanx: unknown state index entry {kind!r}")


def decode(buf, copy=True):
    """The state saved in buf (bytes-like). copy=False returns views into buf."""
    view = memoryview(buf).cast("B")
    if view.nbytes < HEAD.size:
        raise FormatError("phalanx: shard too short for a state header")
    magic, version, ilen, data_off = HEAD.unpack_from(view, 0)
    if magic != MAGIC or version != VERSION or HEAD.size + ilen > data_off or \
            data_off > view.nbytes:
        raise FormatError("phalanx: not a version 1 Phalanx state shard")
    index = json.loads(bytes(view[HEAD.size:HEAD.size + ilen]))
    with warnings.catch_warnings():
        # The restored view is read-only; every tensor is cloned out of it.
        warnings.simplefilter("ignore", UserWarning)
        data = torch.frombuffer(view, dtype=torch.uint8)
    return _build(index, data, data_off, copy)


def restore(phx):
    """(step, state) of the newest committed generation, or None."""
    got = phx.restore()
    if got is None:
        return None
    step, view = got
    return step, decode(view, copy=True)

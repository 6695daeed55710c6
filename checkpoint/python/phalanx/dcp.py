# SPDX-License-Identifier: Apache-2.0
"""torch.distributed.checkpoint (DCP) through Phalanx.

    import torch.distributed.checkpoint as dcp
    import phalanx.dcp as pdcp

    dcp.save(state, storage_writer=pdcp.StorageWriter(step))
    dcp.async_save(state, storage_writer=pdcp.StorageWriter(step))
    dcp.load(state, storage_reader=pdcp.StorageReader())          # same ranks
    dcp.load(state, storage_reader=pdcp.StorageReader(shared_dir)) # any ranks

Each rank's items of a DCP save go, as raw bytes, into that rank's shard of
the step, in the agent's memory: one copy, then the agent persists it to
its tiers, sends the partner copy, checks digests and publishes the
generation once every rank has committed, exactly as for phalanx.pytorch.
The coordinator's shard also holds DCP's global metadata, so it commits in
finish(), after the others. dcp.async_save stages through the writer (an
AsyncStager): stage() copies every tensor into the shard in the agent's
memory before async_save returns, the save's only copy; the save then
takes them where they are and commits the shard at its final size.

A shard (format "PHXDCP", version 1): a header (b"PHXDCP\\0\\0", u32
version, u32 0, u64 metadata offset, u64 metadata length; 0 and 0 but on
the coordinator), then each item's bytes at a 64-byte aligned offset, then
the pickled Metadata. Metadata.storage_data maps each item's index to
("phx", rank, offset, bytes, dtype or None for bytes, shape).

Loading reads the newest generation back. StorageReader() (no directory)
restores through the agent, so a relaunched rank gets its own shard from
wherever the agent finds it (memory, the node-local tier, a partner's
copy), and the ranks send each other the items their plans need (DCP
stores replicated state in one rank's shard); that serves a load onto the
same ranks. Given a
directory tier (checkpoint.shared_dir, or a local_dir every rank can
read), every rank reads what its plan needs from any rank's shard file:
DCP's planner then reshards to another world size or layout.
"""
import ctypes
import functools
import io
import json
import mmap
import os
import pickle
import struct
import sys
import warnings

import torch
import torch.distributed as dist
try:
    from torch.distributed.checkpoint.planner import LoadItemType
    from torch.distributed.checkpoint.storage import StorageReader as _StorageReader
    from torch.distributed.checkpoint.storage import StorageWriter as _StorageWriter
    from torch.distributed.checkpoint.storage import WriteResult
except ImportError:
    try:  # PyTorch 1.13: DCP's first version, under _shard
        from torch.distributed._shard.checkpoint.planner import LoadItemType
        from torch.distributed._shard.checkpoint.storage import StorageReader as _StorageReader
        from torch.distributed._shard.checkpoint.storage import StorageWriter as _StorageWriter
        from torch.distributed._shard.checkpoint.storage import WriteResult
    except (ImportError, ValueError) as e:
        # 1.13's under Python 3.11 stops at a dataclass default 3.11 refuses.
        raise ImportError(f"phalanx: phalanx.dcp needs torch.distributed.checkpoint, which "
                          f"PyTorch {torch.__version__} here cannot import ({e}); use "
                          f"PyTorch 2.x, or phalanx.pytorch's save and restore") from e
from torch.futures import Future

from . import ELAYOUT, ENOAGENT, ENOENT, ESTATE, Phalanx, PhalanxError
# The shard layout's alignment and dtype names are phalanx.pytorch's, and
# its device copy into the agent's (pinned) staging memory.
from .pytorch import _DTYPES, _DTensor, _NAMES, _align, _pin_for_cuda, _write

__all__ = ["StorageWriter", "StorageReader", "FormatError"]

MAGIC = b"PHXDCP\0\0"
VERSION = 1
HEAD = struct.Struct("<8sIIQQ")
TAG = "phx"


class FormatError(ValueError):
    """A shard or generation that is not a Phalanx DCP checkpoint."""


def _logged(method):
    """Says why a storage call failed on this rank's standard error, then
    raises: DCP hands the exception to every rank by pickling it, and on
    Python 3.13 that fails on its traceback ("cannot pickle code objects"),
    leaving only that message."""
    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as e:
            text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            if not text.startswith("phalanx: "):
                text = f"phalanx: {method.__name__}: {type(e).__name__}: {text}"
            print(text, file=sys.stderr, flush=True)
            raise
    return call


def _dtype_name(dtype):
    if dtype not in _NAMES:
        raise TypeError(f"phalanx: tensors of dtype {dtype} cannot be saved")
    return _NAMES[dtype]


def _dtype(name):
    if not isinstance(name, str) or name not in _DTYPES:
        raise FormatError(f"phalanx: dtype {name!r} is not one this PyTorch has")
    return _DTYPES[name]


def _rank():
    """This process's rank as the agent keys its shards."""
    try:
        return int(os.environ["RANK"])
    except (KeyError, ValueError):
        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _rank_in_group():
    return dist.get_rank() if _distributed() else 0


def _world():
    return dist.get_world_size() if _distributed() else 1


def _done(value):
    fut = Future()
    fut.set_result(value)
    return fut


class _Item:
    """One write item's data, where it goes in the shard, and its result;
    staged: its bytes are at offset already."""

    def __init__(self, item, data, offset, staged=False):
        self.item, self.offset, self.staged = item, offset, staged
        if isinstance(data, io.BytesIO):
            self.data, self.dtype, self.shape = data.getbuffer(), None, None
            self.nbytes = self.data.nbytes
        else:
            t = data.detach()
            self.data, self.dtype, self.shape = t, _dtype_name(t.dtype), list(t.shape)
            self.nbytes = t.numel() * t.element_size()

    def where(self, rank):
        return (TAG, rank, self.offset, self.nbytes, self.dtype, self.shape)

    def copy_into(self, view):
        if not self.nbytes or self.staged:
            return
        dst = view[self.offset:self.offset + self.nbytes]
        if self.dtype is None:
            dst[:] = self.data
            return
        out = torch.frombuffer(dst, dtype=torch.uint8).view(self.data.dtype)
        out.view(self.data.shape).copy_(self.data)


class _Unstageable(Exception):
    """A leaf stage() does not copy itself (a ShardedTensor, a tensor subclass)."""


# Room stage() keeps after the tensors: for each leaf DCP pickles (torch.save
# adds its archive around the pickle) and, on the coordinator, for DCP's
# metadata, whose entries are each item's index, chunk and location.
PICKLE_ROOM, META_ROOM, META_ITEM_ROOM = 8 << 10, 64 << 10, 1 << 10


class _Staged:
    """A save that stage() copied into the agent's staging memory: every
    tensor's bytes at its offset in the shard, room after them for the
    items DCP pickles and, on the coordinator, its metadata. write_data
    takes the tensors where they are; the shard's size is known in the end
    (phx_save_commit_size)."""

    def __init__(self, view, end):
        self.view, self.end = view, end
        self.bytes = torch.frombuffer(view, dtype=torch.uint8)
        self.base = self.bytes.data_ptr()

    def offset_of(self, data):
        """Where a staged tensor's bytes are, or None for any other data."""
        if not isinstance(data, torch.Tensor) or not data.is_contiguous() or \
                data.device.type != "cpu":
            return None
        off = data.data_ptr() - self.base
        n = data.numel() * data.element_size()
        return off if n and 0 <= off and off + n <= self.end else None

    def place(self, plan, planner, head):
        """The plan's items, the staged tensors it writes moved down over the
        ones it does not (DCP writes replicated state on one rank), then the
        others after them; returns (items, the end of the last)."""
        cursor, moved = head, {}
        datas = [(wi, planner.resolve_data(wi)) for wi in plan.items]
        where = [(self.offset_of(d), i) for i, (_, d) in enumerate(datas)]
        by_offset = sorted((off, i) for off, i in where if off is not None)
        placed = {}
        for off, i in by_offset:
            wi, data = datas[i]
            if off not in moved:
                n = data.numel() * data.element_size()
                moved[off] = cursor
                if cursor != off:
                    ctypes.memmove(self.base + cursor, self.base + off, n)
                cursor = _align(cursor + n)
            placed[i] = _Item(wi, data, moved[off], staged=True)
        for i, (wi, data) in enumerate(datas):
            if i not in placed:
                placed[i] = _Item(wi, data, cursor)
                cursor = _align(cursor + placed[i].nbytes)
        # Past the room kept (pickled items larger than foreseen): _commit copies.
        return [placed[i] for i in range(len(datas))], cursor


def _stage_tree(obj, put, other=lambda leaf: None):
    """obj with every tensor replaced by put(tensor), a copy staged; other
    sees each leaf that is not a tensor."""
    if _DTensor is not None and isinstance(obj, _DTensor):
        return _DTensor(put(obj._local_tensor), obj._spec, requires_grad=False)
    if isinstance(obj, torch.Tensor):
        if type(obj) not in (torch.Tensor, torch.nn.Parameter):
            raise _Unstageable(type(obj).__name__)
        return put(obj)
    if isinstance(obj, dict):
        return {k: _stage_tree(v, put, other) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_stage_tree(v, put, other) for v in obj)
    other(obj)
    return obj


def _pickle_room(leaf):
    """Room for what DCP pickles of a leaf that is not a tensor."""
    try:
        return 2 * len(pickle.dumps(leaf, protocol=4)) + PICKLE_ROOM
    except Exception:  # DCP's own pickling will say why
        return PICKLE_ROOM


class StorageWriter(_StorageWriter):
    """Writes a DCP save as the step's generation of this job's checkpoints.

    step: the training step the save is of (also taken from dcp.save's
    checkpoint_id when that is an int). snapshot: dcp.async_save copies CPU
    tensors into the agent's memory before it returns, so training may
    change them at once (True, the default); False leaves them where they
    are until the save's future is done, as FileSystemWriter does, and
    copies them then (device tensors are copied before it returns either
    way). busy: when every staging buffer of
    the agent still holds an earlier save, "wait" (the default) waits for one,
    at most timeout seconds (None: as long as it takes), then fails the save
    on every rank; "skip" fails it at once. A DCP save is collective, so a
    rank cannot skip alone as phalanx.pytorch.save does.
    """

    def __init__(self, step=None, phx=None, busy="wait", timeout=None, snapshot=True):
        super().__init__()
        if busy not in ("skip", "wait"):
            raise ValueError(f"phalanx: busy={busy!r}: use \"wait\" or \"skip\"")
        self.step, self.phx = step, phx or Phalanx()
        self.busy, self.timeout, self.snapshot = busy, timeout, snapshot
        self.is_coordinator = False
        self.pending = self.staged = None

    # PyTorch 2.x names; 1.13's DCP calls init().
    def reset(self, checkpoint_id=None):
        # async_save resets before stage() and again in the save it runs.
        if checkpoint_id is not None:
            step = self._step_of(checkpoint_id)
            if self.staged is not None and step != self.step:
                self._drop_staged()
            self.step = step
        self.pending = None

    # dcp.async_save's AsyncStager (PyTorch 2.3 and later).
    _synchronize_after_execute = True

    @property
    def should_synchronize_after_execute(self):
        return self._synchronize_after_execute

    @_logged
    def stage(self, state_dict):
        """Copies every tensor of state_dict (CPU or device, a DTensor's
        local part) into this rank's shard in the agent's memory: the only
        copy of an async_save, and its stall. Returns the state dict over
        those copies, which training may no longer change; the save that
        dcp.async_save runs next writes them where they are."""
        if self.staged is not None:
            self._drop_staged()
        self.set_up_storage_writer(False)
        seen, end, room = {}, _align(HEAD.size), 0  # seen: id -> (tensor, its offset)

        def place(t):
            nonlocal end
            if id(t) not in seen:
                seen[id(t)] = (t, end)
                end = _align(end + t.numel() * t.element_size())
            return t

        def pickled(leaf):
            nonlocal room
            room += _pickle_room(leaf)

        try:
            _stage_tree(state_dict, place, pickled)
        except _Unstageable:  # as DCP stages without us: to CPU, copied in write_data
            from torch.distributed._state_dict_utils import _offload_state_dict_to_cpu
            return _offload_state_dict_to_cpu(state_dict, type_check=False)
        if _rank_in_group() == 0:  # DCP's coordinator, whose shard holds the metadata
            room += META_ROOM + META_ITEM_ROOM * max(len(seen), 1) * _world()

        def copied(t):  # else a CPU tensor left in place, written from there
            return self.snapshot or t.device.type != "cpu"

        now = [(t, off) for t, off in seen.values() if copied(t)]
        _pin_for_cuda(self.phx, now)
        view = self._begin(end + room)
        try:
            _write(view, b"", 0, now, end)
            self.staged = _Staged(view, end)
        except BaseException:
            self.phx.abort()
            raise

        def put(t):
            if not copied(t):
                return t
            if not t.numel():
                return torch.empty_like(t, device="cpu")
            off, n = seen[id(t)][1], t.numel() * t.element_size()
            return self.staged.bytes[off:off + n].view(t.dtype).view(t.shape)

        return _stage_tree(state_dict, put)

    def _begin(self, nbytes):
        """This rank's shard of the step in the agent's memory (DCP keeps one
        copy of replicated items: every rank's shard is its own part)."""
        try:
            return self.phx.begin(self.step, nbytes, wait=self.busy == "wait",
                                  timeout=self.timeout, sharded=True)
        except PhalanxError as e:
            if e.status != ESTATE:
                raise
            raise PhalanxError(-ESTATE, "a save of this process is still open: the previous "
                               "dcp.async_save has not finished (wait for its future before "
                               "the next) or failed before it wrote (Phalanx().abort() drops "
                               "it)") from e

    def synchronize_staging(self):
        pass

    def _drop_staged(self):
        self.staged = None
        self.phx.abort()

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return isinstance(checkpoint_id, int) and not isinstance(checkpoint_id, bool) and \
            checkpoint_id >= 0

    @staticmethod
    def _step_of(checkpoint_id):
        if not StorageWriter.validate_checkpoint_id(checkpoint_id):
            raise ValueError(f"phalanx: checkpoint_id {checkpoint_id!r} is not a step "
                             "number; pass the training step (an int >= 0)")
        return checkpoint_id

    @_logged
    def set_up_storage_writer(self, is_coordinator):
        if self.step is None:
            raise ValueError("phalanx: StorageWriter has no step; pass StorageWriter(step) "
                             "or dcp.save(..., checkpoint_id=step)")
        if not self.phx.available():
            raise PhalanxError(-ENOAGENT, "phalanx.dcp.StorageWriter needs a phalanx-launch "
                               "agent; run the job with phalanx-launch or save with "
                               "FileSystemWriter")
        self.is_coordinator = is_coordinator

    def init(self, is_coordinator):
        self.set_up_storage_writer(is_coordinator)

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def storage_meta(self):
        return None

    @_logged
    def write_data(self, plan, planner):
        rank = _rank()
        if self.staged is not None:
            items, offset = self.staged.place(plan, planner, _align(HEAD.size))
        else:
            items, offset = [], _align(HEAD.size)
            for wi in plan.items:
                it = _Item(wi, planner.resolve_data(wi), offset)
                items.append(it)
                offset = _align(offset + it.nbytes)
        results = [WriteResult(index=it.item.index, size_in_bytes=it.nbytes,
                               storage_data=it.where(rank)) for it in items]
        if self.is_coordinator:
            # The metadata goes into this shard; it exists only in finish().
            self.pending = (items, offset)
        else:
            self._commit(items, offset, b"")
        return _done(results)

    @_logged
    def finish(self, metadata, results):
        metadata.storage_data = {r.index: r.storage_data for rs in results for r in rs}
        items, offset = self.pending or ([], _align(HEAD.size))
        self.pending = None
        self._commit(items, offset, pickle.dumps(metadata, protocol=4))

    def _commit(self, items, offset, meta):
        total = offset + len(meta)
        staged, self.staged, kept = self.staged, None, None
        if staged is not None and total > len(staged.view):
            # Pickled items or metadata beyond the room stage() kept: one more copy.
            warnings.warn(f"phalanx: this rank's DCP shard ({total} bytes) outgrew the "
                          f"{len(staged.view)} bytes staged for it; it was copied once more")
            kept = bytes(staged.view[:min(offset, len(staged.view))])
            staged = None
            self.phx.abort()
        view = self._begin(total) if staged is None else staged.view
        try:
            if kept is not None:  # the staged items' bytes, where they were
                view[:len(kept)] = kept
            view[:HEAD.size] = HEAD.pack(MAGIC, VERSION, 0, offset if meta else 0, len(meta))
            for it in items:
                it.copy_into(view)
            view[offset:total] = meta
        except BaseException:
            self.phx.abort()
            raise
        finally:
            if staged is None:
                view.release()
        self.phx.commit(total if staged is not None else None)


def _header(buf, what):
    if len(buf) < HEAD.size:
        raise FormatError(f"phalanx: {what} is too short for a DCP shard header")
    magic, version, _, md_off, md_len = HEAD.unpack_from(buf, 0)
    if magic != MAGIC:
        raise FormatError(f"phalanx: {what} is not a DCP shard (phalanx.pytorch's shards "
                          "restore with phalanx.pytorch.restore)")
    if version != VERSION:
        raise FormatError(f"phalanx: {what} is DCP shard format {version}, not {VERSION}")
    return md_off, md_len


class _AgentShard:
    """This rank's shard as the agent restores it."""

    def __init__(self, phx):
        try:
            got = phx.restore()
        except PhalanxError as e:
            if e.status != ELAYOUT:
                raise
            raise PhalanxError(-ELAYOUT, "the agents restore each rank's own shard, and "
                               "this job's layout is not the one the newest checkpoint was "
                               "saved with (the launcher's log says how); to load it "
                               "resharded, give StorageReader the directory tier every rank "
                               "can read (checkpoint.shared_dir)") from e
        if got is None:
            raise PhalanxError(-ENOENT, "no committed generation to load; start from scratch "
                               "or check the job's checkpoint.* settings")
        self.step, self.view = got

    def read(self, offset, nbytes):
        if offset + nbytes > self.view.nbytes:
            raise FormatError("phalanx: a DCP item lies outside the restored shard")
        return self.view[offset:offset + nbytes]


class _FileShard:
    """One rank's shard file of a generation directory, mapped: a copy out
    of the page cache is a memcpy, not a read per item (several times
    faster where system calls are dear)."""

    def __init__(self, path, nbytes):
        self.path, self.nbytes = path, nbytes
        # Shards are regular files the job wrote; refuse anything else.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size != nbytes:
                raise FormatError(f"phalanx: {path} holds {size} bytes, its manifest says "
                                  f"{nbytes}; run phalanx ckpt verify")
            self.map = mmap.mmap(fd, nbytes, prot=mmap.PROT_READ) if nbytes else None
        finally:
            os.close(fd)
        if self.map is not None and hasattr(mmap, "MADV_SEQUENTIAL"):
            self.map.madvise(mmap.MADV_SEQUENTIAL)
        self.view = memoryview(self.map) if self.map is not None else memoryview(b"")

    def read(self, offset, nbytes, into=None):
        """nbytes at offset: copied into a writable buffer of that size, or
        a read-only view of the mapping (valid until close)."""
        if offset + nbytes > self.nbytes:
            raise FormatError(f"phalanx: a DCP item lies outside {self.path}")
        src = self.view[offset:offset + nbytes]
        if into is None:
            return src
        dst = memoryview(into).cast("B")
        dst[:] = src
        return dst

    def close(self):
        try:
            self.view.release()
            if self.map is not None:
                self.map.close()
        except BufferError:  # a view of it is still held: unmapped when that goes
            pass


def _distributed():
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _as_tensor(raw, nbytes):
    """raw's bytes as a uint8 tensor, without a copy."""
    if not nbytes:
        return torch.empty(0, dtype=torch.uint8)
    with warnings.catch_warnings():
        # A restored shard is read-only; its bytes are only copied from.
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(raw, dtype=torch.uint8)


def _generation_dir(path):
    """path itself when it holds a manifest, else the generation its latest names."""
    if os.path.exists(os.path.join(path, "manifest.json")):
        return path
    try:
        with open(os.path.join(path, "latest")) as f:
            name = f.read().strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"phalanx: {path} holds no published generation (no "
                                "manifest.json, no latest); give the tier directory of the "
                                "job (checkpoint.shared_dir with %u and %j expanded) or one "
                                "gen-* in it") from None
    if not name.startswith("gen-") or "/" in name:
        raise FormatError(f"phalanx: {path}/latest names {name!r}, not a generation")
    return os.path.join(path, name)


class StorageReader(_StorageReader):
    """Reads the newest generation (or the one in path) for dcp.load.

    path: a directory tier of the job (its checkpoint.shared_dir, or a
    generation directory in it): every rank may read every rank's shard, so
    the load may go to another world size or layout (DCP's planner
    reshards). None: through the agent, each rank restoring its own shard
    and sending the other ranks the items of it their plans need; a plan
    that needs a shard no rank restored fails on every rank with the reason.
    """

    def __init__(self, path=None, phx=None):
        super().__init__()
        self.path, self.phx = path, phx
        self.shards, self.metadata, self.step = {}, None, None

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
        self._close()

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return isinstance(checkpoint_id, (str, os.PathLike)) and \
            os.path.isdir(os.fspath(checkpoint_id))

    @_logged
    def read_metadata(self):
        self._close()
        if self.path is None:
            meta = self._metadata_from_agent()
        else:
            meta = self._metadata_from_dir()
        try:
            self.metadata = pickle.loads(meta)
        except Exception as e:
            raise FormatError(f"phalanx: the DCP metadata of step {self.step} does not "
                              f"unpickle ({e}); was it saved by another PyTorch?") from e
        return self.metadata

    def _metadata_from_agent(self):
        shard = _AgentShard(self.phx or Phalanx())
        self.step, mine = shard.step, _rank()
        self.shards[mine] = shard
        md_off, md_len = _header(shard.view, f"rank {mine}'s shard of step {self.step}")
        meta = bytes(shard.read(md_off, md_len)) if md_len else None
        self.holder = {mine: 0}
        if _distributed():
            # Only the coordinator's shard holds the metadata, and a rank's
            # plan may need items of any rank's shard (DCP stores replicated
            # state once). Every rank calls read_metadata, so a collective
            # here is matched everywhere.
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, (mine, shard.step, meta))
            if len({step for _, step, _ in everyone}) > 1:
                raise FormatError("phalanx: the ranks restored different steps " +
                                  ", ".join(f"{r}:{s}" for r, s, _ in everyone) +
                                  "; restart the job so that every rank restores one generation")
            self.holder = {r: i for i, (r, _, _) in enumerate(everyone)}
            meta = next((m for _, _, m in everyone if m), None)
        if meta is None:
            raise FormatError(f"phalanx: no rank's shard of step {self.step} holds DCP "
                              "metadata: was it saved with phalanx.dcp.StorageWriter?")
        return meta

    def _metadata_from_dir(self):
        gen = _generation_dir(self.path)
        with open(os.path.join(gen, "manifest.json")) as f:
            manifest = json.load(f)
        if manifest.get("format") != "phalanx-manifest":
            raise FormatError(f"phalanx: {gen}/manifest.json is not a Phalanx manifest")
        self.step, self.gen = manifest["step"], gen
        self.sizes = {s["rank"]: s["bytes"] for s in manifest["shards"]}
        for rank in sorted(self.sizes):
            shard = self._file(rank)
            md_off, md_len = _header(shard.read(0, HEAD.size), shard.path)
            if md_len:
                return bytes(shard.read(md_off, md_len))
        raise FormatError(f"phalanx: no shard in {gen} holds DCP metadata: was it saved "
                          "with phalanx.dcp.StorageWriter?")

    def _file(self, rank):
        if rank not in self.shards:
            if rank not in self.sizes:
                raise FormatError(f"phalanx: the manifest of {self.gen} has no rank {rank}")
            self.shards[rank] = _FileShard(os.path.join(self.gen, f"rank-{rank}.shard"),
                                           self.sizes[rank])
        return self.shards[rank]

    def set_up_storage_reader(self, metadata, is_coordinator):
        self.metadata = metadata

    def init(self, metadata, is_coordinator):
        self.set_up_storage_reader(metadata, is_coordinator)

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    @_logged
    def read_data(self, plan, planner):
        spans = [self._where(req) for req in plan.items]
        if self.path is None:
            got = self._exchange(spans)
        else:
            got = [self._read_file(req, planner, span) for req, span in zip(plan.items, spans)]
        for req, (_, _, nbytes, dtype, shape), raw in zip(plan.items, spans, got):
            if raw is None:  # read into its place already
                continue
            if req.type == LoadItemType.BYTE_IO:
                planner.load_bytes(req, io.BytesIO(bytes(raw)))
                continue
            src = _as_tensor(raw, nbytes).view(_dtype(dtype)).view(shape)
            for dim, (start, length) in enumerate(zip(req.storage_offsets, req.lengths)):
                src = src.narrow(dim, start, length)
            dst = planner.resolve_tensor(req).detach()
            if dst.size() != src.size():
                raise FormatError(f"phalanx: {req.storage_index.fqn}: stored {list(src.size())}"
                                  f", the plan wants {list(dst.size())}")
            dst.copy_(src)
            planner.commit_tensor(req, dst)
        return _done(None)

    def _read_file(self, req, planner, span):
        """The span's bytes from its shard file; None when they went straight
        into the tensor the plan loads (a whole stored item into contiguous
        memory: resharding along dim 0, as FSDP's is), without a copy more."""
        rank, offset, nbytes, dtype, shape = span
        if req.type != LoadItemType.BYTE_IO and nbytes and \
                not any(req.storage_offsets) and list(req.lengths) == list(shape):
            dst = planner.resolve_tensor(req).detach()
            into = None
            if dst.device.type == "cpu" and dst.is_contiguous() and dst.dim() and \
                    list(dst.size()) == list(shape) and dst.dtype == _dtype(dtype):
                try:
                    into = dst.view(torch.uint8).numpy()
                except (RuntimeError, TypeError):  # no numpy, a dtype it lacks
                    pass
            if into is not None and into.nbytes == nbytes:
                self._file(rank).read(offset, nbytes, into=into)
                planner.commit_tensor(req, dst)
                return None
        return self._file(rank).read(offset, nbytes)

    def _where(self, req):
        where = self.metadata.storage_data.get(req.storage_index)
        if not isinstance(where, tuple) or len(where) != 6 or where[0] != TAG:
            raise FormatError(f"phalanx: no Phalanx location for {req.storage_index}")
        return where[1:]

    def _exchange(self, spans):
        """Each span's bytes: from this rank's restored shard, or sent by the
        rank that restored the shard holding it. Every rank calls read_data,
        so every rank takes part, and all see the same requests: a shard no
        rank holds fails the load on every rank alike."""
        me = _rank_in_group()
        mine = next(r for r, i in self.holder.items() if i == me)
        wanted = {}
        for rank, offset, nbytes, _, _ in spans:
            if rank != mine:
                wanted.setdefault(rank, []).append((offset, nbytes))
        everyone = [wanted]
        if _distributed():
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, wanted)
        missing = sorted({r for w in everyone for r in w if r not in self.holder})
        if missing:
            raise FormatError(
                f"phalanx: this load needs the items of rank(s) {missing} of step {self.step}, "
                f"whose shards no rank of this job restored (the agents restore each rank's "
                f"own shard: {len(self.holder)} here); to load onto another world size or "
                f"layout, give StorageReader the directory tier every rank can read "
                f"(checkpoint.shared_dir)")
        ops, inbox = [], {}
        for q, w in enumerate(everyone):
            for rank, reqs in sorted(w.items()):
                src = self.holder[rank]
                if src == me:
                    blob = b"".join(bytes(self.shards[mine].read(o, n)) for o, n in reqs)
                    ops.append(dist.isend(_as_tensor(bytearray(blob), len(blob)), q))
                elif q == me:
                    inbox[rank] = torch.empty(sum(n for _, n in reqs), dtype=torch.uint8)
                    ops.append(dist.irecv(inbox[rank], src))
        for op in ops:
            op.wait()
        got, used = [], {r: 0 for r in inbox}
        for rank, offset, nbytes, _, _ in spans:
            if rank == mine:
                got.append(self.shards[mine].read(offset, nbytes))
                continue
            at = used[rank]
            got.append(memoryview(inbox[rank].numpy())[at:at + nbytes])
            used[rank] = at + nbytes
        return got

    def _close(self):
        for shard in self.shards.values():
            if isinstance(shard, _FileShard):
                shard.close()
        self.shards = {}

    def __del__(self):
        self._close()

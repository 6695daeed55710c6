# SPDX-License-Identifier: Apache-2.0
"""Phalanx's trainer API for Python, through ctypes (nothing to compile).

    import phalanx
    phx = phalanx.Phalanx()
    for step in range(start, steps):
        train_one_step()
        phx.heartbeat(step)
        if phx.should_save(step):
            phx.save_bytes(step, state_bytes)        # or phalanx.pytorch.save()

    got = phx.restore()     # None, or (step, read-only memoryview)

See phalanx(3). The memory a save writes into belongs to the node agent
(phalanx-launch), so the save costs the training loop one copy and
survives a crash of the worker.
"""
import ctypes
import ctypes.util
import os
import time

__all__ = ["Phalanx", "PhalanxError", "load_library"]

OK, EINVAL, ENOMEM, EIO, ENOENT, EAUTH, ESTATE, ENOAGENT, EBUSY, ETIMEDOUT, ELAYOUT = range(11)


class PhalanxError(OSError):
    """A phx_* call failed; .status is the PHX_* code (positive)."""

    def __init__(self, status, what):
        self.status = abs(status)
        super().__init__(self.status, f"phalanx: {what}: {_strerror(status)}")


_lib = None
# phx_set_pinning(3)'s hooks: int pin(void *, size_t, void *), void unpin(void *, void *).
PIN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
UNPIN_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def _candidates():
    env = os.environ.get("PHALANX_LIBRARY")
    if env:
        yield env
    try:
        from phalanx import _paths  # written at install time

        yield os.path.join(_paths.LIBDIR, "libphalanx.so.0")
    except ImportError:
        pass
    found = ctypes.util.find_library("phalanx")
    if found:
        yield found
    yield "libphalanx.so.0"


def load_library():
    """The loaded libphalanx: $PHALANX_LIBRARY, the installed one, or the loader's."""
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise OSError("phalanx: cannot load libphalanx (" + "; ".join(errors) +
                      "); set PHALANX_LIBRARY to its path")
    c_long_p = ctypes.POINTER(ctypes.c_long)
    sigs = {
        "phx_strerror": ([ctypes.c_int], ctypes.c_char_p),
        "phx_init": ([], ctypes.c_int),
        "phx_heartbeat": ([ctypes.c_long], ctypes.c_int),
        "phx_wait_begin": ([], ctypes.c_int),
        "phx_wait_end": ([], ctypes.c_int),
        "phx_should_save": ([ctypes.c_long], ctypes.c_int),
        "phx_save_begin": ([ctypes.c_long, ctypes.c_size_t,
                            ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int),
        "phx_save_begin_kind": ([ctypes.c_long, ctypes.c_size_t, ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int),
        "phx_save_commit": ([], ctypes.c_int),
        "phx_save_commit_size": ([ctypes.c_size_t], ctypes.c_int),
        "phx_save_abort": ([], None),
        "phx_set_pinning": ([PIN_FN, UNPIN_FN, ctypes.c_void_p], ctypes.c_int),
        "phx_save_wait": ([ctypes.c_long, ctypes.c_int], ctypes.c_int),
        "phx_restore": ([c_long_p, ctypes.POINTER(ctypes.c_void_p),
                         ctypes.POINTER(ctypes.c_size_t)], ctypes.c_int),
        "phx_finalize": ([], None),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res
    _lib = lib
    return lib


def _strerror(status):
    return load_library().phx_strerror(status).decode()


def _view(addr, nbytes, readonly):
    if nbytes == 0:
        return memoryview(b"")
    buf = (ctypes.c_char * nbytes).from_address(addr)
    view = memoryview(buf).cast("B")
    return view.toreadonly() if readonly else view


class _Waiting:
    def __init__(self, lib):
        self._lib = lib

    def __enter__(self):
        self._lib.phx_wait_begin()
        return self

    def __exit__(self, *exc):
        self._lib.phx_wait_end()
        return False


class Phalanx:
    """One process's connection to its node agent. Thread-safe like libphalanx."""

    def __init__(self):
        self._lib = load_library()

    def available(self):
        """True when a phalanx-launch agent supervises this process."""
        return self._lib.phx_init() == 0

    def heartbeat(self, step):
        rc = self._lib.phx_heartbeat(step)
        if rc and rc != -ENOAGENT:
            raise PhalanxError(rc, "phx_heartbeat")

    def waiting(self):
        """A context manager around a wait on another role of the job.

            with phx.waiting():
                samples = receive_from_rollouts()

        The time counts as the role's "waiting" in phalanx goodput
        (phx_wait_begin(3)); outside an agent's job it does nothing.
        """
        return _Waiting(self._lib)

    def should_save(self, step):
        """True every checkpoint.interval steps and once after a save request."""
        rc = self._lib.phx_should_save(step)
        if rc < 0:
            raise PhalanxError(rc, "phx_should_save")
        return rc == 1

    def begin(self, step, nbytes, wait=False, timeout=None, sharded=False):
        """A writable memoryview of nbytes in the agent's memory; then commit().

        When every staging buffer is still being persisted (EBUSY), wait=True
        retries until one is free, at most timeout seconds (None: no limit);
        PhalanxError(EBUSY) after that, or at once without wait.
        sharded=True says the bytes are this data-parallel rank's part only
        (FSDP, ZeRO), not the same on every dp rank (DDP): a restore after
        --elastic changed dp then refuses them instead of taking another
        dp rank's.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        ptr = ctypes.c_void_p()
        while True:
            rc = self._lib.phx_save_begin_kind(step, nbytes, 1 if sharded else 0,
                                               ctypes.byref(ptr))
            if rc != -EBUSY or not wait or \
                    (deadline is not None and time.monotonic() >= deadline):
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
        if rc:
            raise PhalanxError(rc, "phx_save_begin")
        return _view(ptr.value, nbytes, False)

    def set_pinning(self, pin, unpin):
        """Page-locks the agent's staging buffers through pin(addr, nbytes) -> bool
        and unpin(addr) (phx_set_pinning(3)); None and None turn it off. Each
        buffer is pinned once, when mapped, and unpinned before it is unmapped."""
        def pin_hook(addr, nbytes, arg):
            try:
                return 0 if pin(addr, nbytes) else 1
            except Exception:  # the buffer stays pageable
                return 1

        def unpin_hook(addr, arg):
            try:
                unpin(addr)
            except Exception:
                pass

        hooks = (PIN_FN(), UNPIN_FN()) if pin is None else \
            (PIN_FN(pin_hook), UNPIN_FN(unpin_hook))
        rc = self._lib.phx_set_pinning(hooks[0], hooks[1], None)
        if rc:
            raise PhalanxError(rc, "phx_set_pinning")
        # The library calls them for as long as they are set: keep them alive.
        type(self)._pin_hooks = hooks

    def commit(self, nbytes=None):
        """Hands the open save to the agent; nbytes: only the view's first
        nbytes are the shard (a size known once written), None all of it."""
        rc = self._lib.phx_save_commit() if nbytes is None else \
            self._lib.phx_save_commit_size(nbytes)
        if rc:
            raise PhalanxError(rc, "phx_save_commit")

    def abort(self):
        """Drops the open save, if any, without committing it."""
        self._lib.phx_save_abort()

    def save_bytes(self, step, data, sharded=False):
        """Saves a bytes-like object as this rank's shard of step (begin()'s sharded)."""
        src = memoryview(data).cast("B")
        dst = self.begin(step, src.nbytes, sharded=sharded)
        dst[:] = src
        del dst
        self.commit()

    def save_wait(self, step, timeout=None):
        """True once the state as of step is durable (phx_save_wait(3)); False
        when timeout seconds pass first; PhalanxError (EIO) when this node
        could not write that save anywhere."""
        ms = -1 if timeout is None else max(0, min(int(timeout * 1000), 2 ** 31 - 1))
        rc = self._lib.phx_save_wait(step, ms)
        if rc == -ETIMEDOUT:
            return False
        if rc:
            raise PhalanxError(rc, "phx_save_wait")
        return True

    def restore(self):
        """(step, read-only memoryview) of the newest committed generation, or None.

        The view is valid until the next commit(), restore() or finalize().
        PhalanxError with status ELAYOUT when the newest generation cannot be
        restored onto this job's layout (the launcher's log says why).
        """
        step = ctypes.c_long()
        ptr = ctypes.c_void_p()
        size = ctypes.c_size_t()
        rc = self._lib.phx_restore(ctypes.byref(step), ctypes.byref(ptr), ctypes.byref(size))
        if rc == -ENOENT:
            return None
        if rc:
            raise PhalanxError(rc, "phx_restore")
        return step.value, _view(ptr.value, size.value, True)

    def finalize(self):
        self._lib.phx_finalize()

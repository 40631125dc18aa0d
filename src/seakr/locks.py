"""Advisory locks (``flock``) on folders that one process at a time may write: an eval or study folder
(``.seakr.lock``) and an index being added to (``.seakr-writer.lock``). The operating system drops a lock
with its process, so a killed writer never leaves a folder locked. Where ``fcntl`` is missing (Windows) or
the file system has no advisory locks (some NFS and FUSE mounts) they step aside rather than fail."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def flock(fh, wait: bool) -> bool:
    """An exclusive advisory lock on ``fh``'s file, released when it is closed: True when held; False where
    there are none (no ``fcntl``, a file system without them), and the caller goes on unlocked. Held by another
    process: waited for, or with ``wait=False`` BlockingIOError."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        raise
    except OSError:  # some NFS and FUSE mounts
        return False
    return True


class FolderLock:
    """Held from ``__enter__`` to ``__exit__``; a second holder is refused at once with ``busy(pid)``, a
    ``ValueError`` naming the process that holds the folder (what the caller should do is its to say)."""

    def __init__(self, folder: str | os.PathLike, name: str, busy: Callable[[str], Exception]):
        self.folder, self.name, self.busy = Path(folder), name, busy
        self._fh = None

    def __enter__(self) -> "FolderLock":
        fh = open(self.folder / self.name, "a+", encoding="utf-8")
        try:
            held = flock(fh, wait=False)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            fh.close()
            raise self.busy(holder) from None
        if not held:
            fh.close()
            return self
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc) -> None:
        if self._fh is not None:
            self._fh.close()  # closing the file releases the lock
            self._fh = None


def holder(folder: str | os.PathLike, name: str) -> str | None:
    """The pid that holds ``folder``'s lock ``name`` now, or None when no live process does."""
    if not (Path(folder) / name).exists():
        return None
    try:
        with FolderLock(folder, name, _Held):
            return None
    except _Held as e:
        return str(e)
    except OSError:  # a folder this process cannot write: it cannot tell, and says nobody
        return None


class _Held(Exception):
    pass

"""What tantivy's failures say: a Rust panic or a refused write becomes one line naming the index and what to do,
and the text Rust's panic hook writes to file descriptor 2 is held back so that line is all a user sees."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from ..common.console import first_line
from ..common.writing import refused_write
from .base import SearchError

#: tantivy's word when a segment write fails in its worker thread: the OS error stays in the thread
_WORKER_DIED = "index writer was killed"


def io_failure(e: BaseException) -> bool:
    """A write the file system refused, as Python or tantivy ("... (os error 28)") reports it; a corpus
    file that cannot be read, a corpus error or a bad passage is not one and keeps its own message."""
    return refused_write(e) is not None or _WORKER_DIED in str(e)


def write_failure(path: Path, e: BaseException) -> str:
    """What a refused index write says: tantivy's text and, since its worker thread hides the cause ("An index
    writer was killed ... (io::Error most likely)"), the disk's room."""
    if _WORKER_DIED not in str(e):
        return first_line(e)
    free = shutil.disk_usage(next(p for p in (path, *path.parents) if p.exists())).free
    return (f"tantivy's writer thread stopped on a refused write: a full disk, a quota or a file-size limit; "
            f"{free / 1e6:,.1f} MB free there")


@contextmanager
def guard(path, what: str):
    """tantivy signals damaged files with a Rust panic (``PanicException``, a ``BaseException``) or
    ValueError/OSError variants: turn any of them into a one-line :class:`SearchError`. Rust's panic hook
    writes its own text to file descriptor 2 before Python sees the exception; that text is held back and
    dropped when the call panicked (replayed when it did not), so the one line is all a user sees."""
    with _held_stderr() as held:
        try:
            yield
        except (KeyboardInterrupt, SystemExit, GeneratorExit, SearchError):
            raise
        except BaseException as e:  # noqa: BLE001 - PanicException derives from BaseException
            held.drop = True
            msg = first_line(e)
            verify = "run `seakr index info --verify`"
            raise SearchError(f"{path}: {what} failed, the index looks damaged ({msg}); {verify}") from None


_HOLD_LOCK = threading.Lock()  # descriptor 2 is one per process: one holder at a time
_HOLD_FILE = None


@contextmanager
def _held_stderr():
    """File descriptor 2 sent to a scratch file for the duration; what it caught is written to the real
    descriptor afterwards unless ``drop`` was set. Cheap (two dup2 calls on a file opened once); other
    threads' stderr lines of that moment come out a little later, not lost."""
    global _HOLD_FILE

    state = SimpleNamespace(drop=False)
    with _HOLD_LOCK:
        try:
            saved = os.dup(2)
        except OSError:  # no descriptor 2 (a detached process): nothing to hold back
            yield state
            return
        if _HOLD_FILE is None:
            _HOLD_FILE = tempfile.TemporaryFile()
            atexit.register(_HOLD_FILE.close)  # else "ResourceWarning: unclosed file" at every exit under -X dev
        _HOLD_FILE.seek(0)
        _HOLD_FILE.truncate()
        os.dup2(_HOLD_FILE.fileno(), 2)
        try:
            yield state
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if not state.drop and _HOLD_FILE.tell():
                _HOLD_FILE.seek(0)
                os.write(2, _HOLD_FILE.read())

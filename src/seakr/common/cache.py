"""seakr's cache: where converted models, pooled indexes, digests and calibrations live (``SEAKR_CACHE``, else the
XDG cache), the folders made in it, and the lock a process holds while it builds one thing there."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..locks import flock
from .checks import encodable


def cache_root() -> Path:
    """Where converted models, pooled indexes and calibrations live (``SEAKR_CACHE``, else the XDG cache). A
    path through a file is refused naming the variable."""
    env = os.environ.get("SEAKR_CACHE")
    if env is not None and env and not env.strip():  # a folder named " " in whatever folder the command ran from
        raise ValueError(f"SEAKR_CACHE={env!r}: blank; point it at a folder, or unset it for the default")
    # "~/x" from an env file or a quoted assignment, where no shell expanded it: the home's folder (as HF_HOME
    # reads), not a folder named "~" wherever the command ran
    xdg = os.path.expanduser(os.environ.get("XDG_CACHE_HOME") or "")
    if not os.path.isabs(xdg):  # unset, or relative, which the XDG spec says to ignore: a relative one made a cache,
        xdg = os.path.expanduser("~/.cache")  # and converted every model again, in each folder a command ran from
    root = Path(os.path.expanduser(env) if env else os.path.join(xdg, "seakr"))
    if not encodable(str(root)):  # safetensors and tantivy take UTF-8 paths: it failed mid-conversion, naming nothing
        raise ValueError(f"{_chosen_by(root)}: a path that is not UTF-8 text, which the model converter and the index "
                         "engine cannot take; point SEAKR_CACHE at another folder")
    p = root
    while not p.exists() and p != p.parent:  # the nearest part that exists must be a folder
        p = p.parent
    if not p.is_dir():
        raise ValueError(f"{_chosen_by(root)}: {p} is not a directory (seakr keeps converted models and pooled indexes "
                         "there); point SEAKR_CACHE at a folder")
    return root


def _chosen_by(root: Path) -> str:
    """The cache named as the user chose it: the variable where it is set, else the default folder."""
    env = os.environ.get("SEAKR_CACHE")
    return f"SEAKR_CACHE={env}" if env else f"the cache folder {root}"


def cache_dir(*parts: str) -> Path:
    """A folder inside the cache, made if need be; a cache seakr cannot write (a read-only mount, another user's
    folder, /proc) is named with the variable that chose it."""
    root = cache_root()
    d = root.joinpath(*parts)
    try:
        d.mkdir(parents=True, exist_ok=True)
        if not os.access(d, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as e:
        raise ValueError(f"{_chosen_by(root)}: cannot write {d} ({e.strerror or e}); seakr keeps converted models, "
                         "pooled indexes and calibrations there: point SEAKR_CACHE at a folder you can write") from None
    return d


def cache_lock(name: str):
    """An inter-process lock on one thing the cache builds (a model's conversion, a pooled index): two
    processes started together (shards, Ray tasks) build it once, the second then reads the first's."""
    return file_lock(cache_dir("locks") / f"{name}.lock")


@contextlib.contextmanager
def file_lock(path: Path):
    """An inter-process lock held while the block runs (an open file, locked; closing it releases the lock)."""
    with open(path, "w", encoding="utf-8") as fh:
        flock(fh, wait=True)  # where there are no advisory locks (Windows, some mounts): unlocked
        yield  # closing the file releases the lock

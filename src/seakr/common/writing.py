"""Writing files and folders whole or not at all, with one line naming the place a write was refused
(disk full, no permission, a name too long)."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path
import tempfile


def write_atomic(path, content: str | bytes) -> None:
    """Write a file whole or not at all: the content (text as UTF-8) goes to a hidden file beside it, then
    replaces it, so a write cut off (disk full, a file-size limit, kill -9) leaves the earlier content. A
    link is followed (its target is replaced, the link stays); a device or pipe (/dev/stdout) is written
    through."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    target = os.path.realpath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a directory, expected a file name")
    # stat the name given, not the link's target: /dev/stdout into a pipe resolves to "/proc/PID/fd/pipe:[N]",
    # which names nothing, and the write went to a hidden file in /proc ("[Errno 2] No such file or directory")
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        with open(path, "wb") as f:
            f.write(data)
        return
    tmp = os.path.join(os.path.dirname(target),
                       f".{os.path.basename(target)}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        f = open(tmp, "wb")
    except OSError as e:
        raise file_error(path, e) from None
    try:
        with f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(target):
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))  # a 0600 file stays 0600
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_output_file(path: str, flag: str, error: type[Exception] = ValueError) -> None:
    """Fail before any slow work when ``path`` cannot be written."""
    if not path.strip():
        raise error(f"{flag}: an empty path; name the file")
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise error(f"{flag} {path}: is a directory, expected a file name")
    if not parent.is_dir():
        raise error(f"{flag} {path}: no such directory {parent}")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise error(f"{flag} {path}: not writable")
    # a file is written beside its name, then moved over it (a device or a pipe is written through)
    why = None if p.exists() and not p.is_file() else place_refused(str(parent), file=True)
    if why:
        raise error(f"{flag} {path}: cannot write there ({why})")


#: A write the file system refused, and how to say it: no space, the quota spent, a read-only file system.
REFUSED_WRITES = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is spent",
                  errno.EROFS: "the file system is read-only",
                  errno.EFBIG: "a file reached the size limit set for this process (ulimit -f)"}


def nearest_existing(path: str) -> str:
    """``path`` or the closest folder above it that exists (where making it would begin)."""
    p = os.path.abspath(path)
    while not os.path.lexists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    return p


def folder_refused(where: str, file: bool = False) -> str | None:
    """Why the folder ``where`` takes no new folder (or ``file``), None where it does, learnt by making one and
    removing it: permission bits do not say all (root passes every access check, yet /proc, /sys and a
    read-only mount refuse)."""
    try:
        if file:
            fd, name = tempfile.mkstemp(prefix=".seakr-try-", dir=where)
            os.close(fd)
            os.unlink(name)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".seakr-try-", dir=where))
    except OSError as e:
        return e.strerror or str(e)
    return None


#: errors of making a file or folder that are not the place's fault: the disk lacks room, or the system cannot
#: follow the path (a name too long, a link loop); the commands word each on its own line
_PASSED_ON = (errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG, errno.ELOOP)


def folder_error(path, e: OSError, what: str = "the folder") -> OSError | ValueError:
    """What to raise for the folder ``path`` that could not be made (``e``): one line naming it and why, as a
    ValueError; ``e`` itself where the disk lacks room or the path is one the system cannot follow (a name too
    long, a link loop), which the commands name on their own line."""
    if e.errno in _PASSED_ON:
        return e
    where = nearest_existing(str(path))
    return ValueError(f"{path}: cannot create {what} "
                      f"({no_place(where) or f'{where} refuses new folders: {e.strerror or e}'})")


def no_place(where: str) -> str | None:
    """Why the nearest existing path ``where`` cannot hold anything new: not a folder, or a link to nothing."""
    if os.path.islink(where) and not os.path.exists(where):
        return f"{where} is a symbolic link to nothing ({os.readlink(where)})"
    return None if os.path.isdir(where) else f"{where} is not a directory"


def place_refused(where: str, file: bool = False) -> str | None:
    """Why ``where`` (the nearest existing path) takes no new folder (or ``file``), tried as :func:`folder_refused`
    tries it, worded as every pre-check words it; None where it does."""
    if (why := no_place(where)) is not None:
        return why
    refused = folder_refused(where, file)
    return refused and f"{where} refuses new {'files' if file else 'folders'}: {refused}"


def file_error(path, e: OSError) -> OSError | ValueError:
    """As :func:`folder_error`, for the file ``path`` whose hidden twin (:func:`write_atomic`) could not be made
    beside it, named by the file asked for, not the twin."""
    if e.errno in _PASSED_ON:
        return e
    parent = os.path.dirname(os.path.realpath(path))
    where = nearest_existing(parent)
    why = no_place(where) or (f"no folder {parent}" if where != parent
                              else f"{parent} refuses new files: {e.strerror or e}")
    return ValueError(f"{path}: cannot write the file ({why})")


def make_folder(path, what: str = "the folder") -> Path:
    """``mkdir -p path``, a refusal as :func:`folder_error` words it."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise folder_error(path, e, what) from None
    return Path(path)


def refused_write(e: BaseException) -> str | None:
    """What a write the file system refused says (a full disk, a quota, a read-only mount, a size limit), as
    Python raises it or as a Rust library words it ("... (os error 28)"); None for any other error."""
    if isinstance(e, OSError) and e.errno in REFUSED_WRITES:
        return REFUSED_WRITES[e.errno]
    return next((why for n, why in REFUSED_WRITES.items() if f"(os error {n})" in str(e)), None)


def missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, innermost first."""
    made = []
    while not folder.exists() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    return made


def remove_empty(folders: list[Path]) -> None:
    """Remove the folders (innermost first) while they are empty: what a failed build made and left unused."""
    for f in folders:
        try:
            f.rmdir()
        except OSError:
            return

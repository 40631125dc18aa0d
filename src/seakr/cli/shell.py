"""The process around a command: a SIGTERM or Ctrl-C said in one line, standard output that is closed, full or a
terminal that cannot show a character, Python's warnings as one-line notes, and an operating system's refusal
(no space, a name too long, out of memory) said as one line naming the path."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys

from ..common.console import first_line, warn
from ..common.writing import REFUSED_WRITES
import warnings
import signal


class Stopped(KeyboardInterrupt):
    """SIGTERM (a scheduler preempting a job, ``kill``, ``timeout``) taken as Ctrl-C is: the row files close and
    the run's lock is released on the way out, and one line says what was kept."""


@contextlib.contextmanager
def stop_on_sigterm(wanted: bool):
    """SIGTERM raises :class:`Stopped` while a command runs; the handler before it is put back after (main()
    is called in-process by tests and by users' scripts)."""
    def stop(signum, frame):
        raise Stopped()

    try:
        before = signal.signal(signal.SIGTERM, stop) if wanted else None
    except ValueError:  # main() called from another thread: the caller's signals are its own
        before = None
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)


def interrupted(args, e: KeyboardInterrupt) -> str:
    """The line a stopped command ends with: where a run's finished questions are, and how to go on."""
    how = "stopped (SIGTERM)" if isinstance(e, Stopped) else "interrupted"
    out = getattr(args, "out", None)
    if hasattr(args, "resume") and isinstance(out, str) and os.path.isdir(out):
        return f"{how}; the questions finished are kept in {out}: the same command with --resume goes on from them"
    return how


def printable_output() -> None:
    """Print what a console's encoding cannot spell (a Windows code page, ``PYTHONIOENCODING=ascii``) with
    backslash escapes, as Python's own stderr does, so an answer never fails the command after its work. A
    standard stream closed at start (``2>&-``) gets /dev/null: the work runs, the exit status tells how it went,
    and no file opened later takes its descriptor."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:  # fd 0 was closed too, and took it
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a text file (a test's capture, a StringIO)
            pass


def stdout_to_null() -> None:
    """After stdout has failed: let the interpreter's last flush find somewhere to write (else a second error)."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class OutputRefused(OSError):
    """A write to stdout the system refused (a full disk under ``> file``, a descriptor opened for reading)."""


class NamedOutput:
    """stdout, whose refused writes say they were stdout's (``> /dev/full``), not a run's rows. A reader gone
    away stays a BrokenPipeError (exit 141, quietly)."""

    def __init__(self, stream):
        self._stream = stream

    def _call(self, name: str, *args):
        try:
            return getattr(self._stream, name)(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputRefused(e.errno, e.strerror) from None

    def write(self, text: str) -> int:
        return self._call("write", text)

    def flush(self) -> None:
        self._call("flush")

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def warnings_as_notes() -> None:
    """seakr's own warnings (an emulated precision) printed as the command's other notes are: one
    ``seakr: warning:`` line, not Python's file:line form with a source line under it. Others keep theirs."""
    python_show = warnings.showwarning
    if getattr(python_show, "seakr_notes", False):  # main() called again in one process (tests, a notebook)
        return

    def show(msg, category, filename, lineno, file=None, line=None):
        if category.__module__.startswith("seakr."):
            warn(str(msg), once=True)
        else:
            python_show(msg, category, filename, lineno, file, line)
    show.seakr_notes = True
    warnings.showwarning = show


#: paths the system cannot follow, said wherever a command first touches them
_BAD_PATHS = {errno.ENAMETOOLONG: "a name longer than this file system takes (255 bytes a name, 4096 a path on "
                                  "Linux); choose a shorter one",
              errno.ELOOP: "a symbolic link that points back at itself; remove it or choose another path",
              # a run's own file made a folder (results.jsonl, config.json): "[Errno 21] Is a directory: '...'"
              errno.EISDIR: "is a directory, expected a file; move it away or choose another path",
              errno.ENOTDIR: "a path through a file as if it were a folder; choose another path"}


def os_said(e: OSError) -> str | OSError:
    """A refused path as our lines name one, ``PATH: why``; the error as it is where it names no path."""
    if (said := path_refused(e)) is not None:
        return said
    return f"{e.filename}: {e.strerror[:1].lower()}{e.strerror[1:]}" if e.filename and e.strerror else e


def path_refused(e: OSError) -> str | None:
    """One line for a path the system refuses (a file name of 300 characters as --out, a link loop), naming
    it; None for any other OSError."""
    why = _BAD_PATHS.get(e.errno)
    return f"{e.filename}: {why}" if why and e.filename else None


def disk_refused(e: OSError) -> str | None:
    """One line for a write the file system refused (a full disk, a read-only one, a file-size limit), wherever the
    write was (a row log's close included); rows already written are on disk, so ``--resume`` goes on from them.
    None for any other OSError (it keeps its traceback)."""
    why = REFUSED_WRITES.get(e.errno)
    if why is None:
        return None
    return (f"{why}{f' (writing {e.filename})' if e.filename else ''}; what was written before it is kept "
            "(a run goes on with --resume once there is room)")


#: commands that run no model: their memory is the data they read, not k or a batch
_NO_MODEL = ("index", "search", "merge", "compare", "export", "report", "probe")


def out_of_memory(e: BaseException, command: str | None = None) -> str | None:
    """One line for an allocation the machine cannot give (k = 10**11 samples), naming the knobs that size it,
    or, for a command that runs no model, what it read; None for any other error (a fault in seakr keeps its
    traceback)."""
    text = first_line(e, limit=1000)
    if not (isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in text or "out of memory" in text.lower()):
        return None
    m = re.search(r"allocate (\d+) bytes", text) or re.search(r"allocate ([0-9.]+ ?[KMGT]i?B)", text)
    wanted = m and (f"{int(m.group(1)) / 1e9:,.1f} GB" if m.group(1).isdigit() else m.group(1))
    said = f"asked for {wanted}" if wanted else ""
    if said and (free := re.search(r"[0-9.]+ GB are free", text)):  # the model's own refusal says what it had
        said += f"; {free.group(0)}"
    if command in _NO_MODEL:
        return (f"out of memory{f' ({said})' if said else ''}: the files `seakr {command}` read did not fit; "
                "split them, or run it where there is more memory")
    return (f"out of memory{f' ({said})' if said else ''}: lower k, max_new_tokens, n_candidates or --concurrency, "
            "or load the model in a smaller precision")

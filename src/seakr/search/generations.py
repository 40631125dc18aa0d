"""How an index folder holds its data: immutable generations and one small manifest that points at the current one.

The way Lucene's ``segments_N`` or LevelDB's ``CURRENT`` work: a change (``--add``, ``--overwrite``) never touches
the files the index is read from. It writes a new generation folder (``gen-000002``: the current one's segment files
hard-linked, tantivy's two metadata files copied, the new passages written beside them), records the new folder's
files with their sha256 in a new manifest, and switches to it by one atomic rename (written, fsynced, renamed, the
folder fsynced). A writer killed at any point leaves the previous manifest, which names a generation that is whole.

Each generation folder carries a mark (:data:`MARK`: the index it belongs to, the pid that wrote it). A folder is
removed only when it has our mark, the manifest does not point at it and its writer is gone: the next writer, or
``seakr index info --repair``, clears what a killed one left. Nothing else in an index folder is ever deleted or
read: a user's notes, a ``.DS_Store``, another tool's files are ignored. An index of the first layout (its files at
the top of the folder, ``seakr-tantivy/1``) opens as before; a change moves it to generations, and removes the old
files only where the old manifest records them with a matching digest.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated, Sequence

from pydantic import Field

from ..common.jsontext import loads
from ..common.schema import Count, Said, SchemaError, schema
from ..common.runs import MANIFEST
from .base import SearchError

#: Checksums are sums modulo 2**256 (order-independent).
_MOD = 1 << 256
#: The mark a generation folder of ours carries.
MARK = ".seakr-generation.json"
#: tantivy's own metadata files, rewritten by each commit (copied into a new generation, never linked).
REWRITTEN = ("meta.json", ".managed.json")
_GEN = re.compile(r"gen-(\d{6,})")


def read_manifest(path: Path) -> dict:
    """An index's manifest, or one line naming it: not UTF-8, not JSON, or JSON of another shape."""
    mpath = path / MANIFEST
    try:
        m = loads(mpath.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SearchError(f"{mpath}: corrupt manifest (not UTF-8 text)") from None
    except json.JSONDecodeError as e:
        raise SearchError(f"{mpath}: corrupt manifest ({e.msg})") from None
    if not isinstance(m, dict) or not isinstance(m.get("files", {}), dict):
        raise SearchError(f"{mpath}: corrupt manifest (expected a JSON object with the index's files)")
    try:
        ManifestFields(**{k: m.get(k) for k in ManifestFields.__pydantic_fields__})
    except SchemaError as e:
        raise SearchError(f"{mpath}: corrupt manifest ({e})") from None
    return m


@schema("field", extra="ignore")
class ManifestFields:
    """What an add updates in place: checked when the manifest is read, before any passage is written, so a field
    of another shape cannot leave segments the manifest does not list (null: absent)."""

    checksum: Annotated[str, Field(pattern="^[0-9a-f]{64}$"), Said("64 hex digits", "")]
    doc_count: Count
    duplicates_skipped: Count | None = None
    empty_skipped: Count | None = None
    sources: list[str] | None = None


def generation_name(n: int) -> str:
    return f"gen-{n:06d}"


def generation_number(name: str | None) -> int:
    m = _GEN.fullmatch(name or "")
    return int(m.group(1)) if m else 0


def data_folder(folder: Path, manifest: dict) -> Path:
    """Where the index's files are: its current generation, or the folder itself (the first layout)."""
    gen = manifest.get("generation")
    return folder / gen if isinstance(gen, str) and _GEN.fullmatch(gen) else folder


def file_digests(path: Path, names=None) -> dict[str, str]:
    """sha256 of the files ``names`` of ``path`` (default: every file but the manifest, locks and our mark)."""
    if names is None:
        names = [f.name for f in sorted(path.iterdir()) if f.is_file() and f.name not in (MANIFEST, MARK)
                 and not f.name.endswith(".lock") and not f.name.startswith(MANIFEST)]
    out = {}
    for name in sorted(names):
        h = hashlib.sha256()
        with open(path / name, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        out[name] = h.hexdigest()
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # a platform that cannot open a folder: the rename is what it has
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_manifest(folder: Path, manifest: dict) -> None:
    """The manifest replaced atomically: written beside it, fsynced, renamed over it, the folder fsynced."""
    tmp = folder / f"{MANIFEST}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(manifest, indent=2))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / MANIFEST)
    _fsync_dir(folder)


def next_generation(folder: Path, manifest: dict | None) -> Path:
    """The folder the next generation takes: after the current one and after every generation folder there."""
    n = max([generation_number((manifest or {}).get("generation"))]
            + [generation_number(p.name) for p in folder.glob("gen-*")]) + 1
    return folder / generation_name(n)


def mark(gen: Path, uid: str) -> None:
    """Mark ``gen`` as a generation of the index ``uid``, written by this process."""
    (gen / MARK).write_text(json.dumps({"index": uid, "pid": os.getpid(),
                                        "created": time.strftime("%Y-%m-%dT%H:%M:%S")}), encoding="utf-8")


def new_generation(folder: Path, manifest: dict | None, uid: str, base: Path | None = None,
                   names=()) -> Path:
    """A new generation folder after the current one, marked as ours; ``names`` of ``base`` (the current data)
    linked into it (copied where a link cannot be made), tantivy's metadata files copied."""
    gen = next_generation(folder, manifest)
    gen.mkdir()
    mark(gen, uid)
    for name in names:
        src, dst = base / name, gen / name
        if name in REWRITTEN:
            shutil.copy2(src, dst)
            continue
        try:
            os.link(src, dst)
        except OSError:  # a file system without hard links: the generation holds its own copy
            shutil.copy2(src, dst)
    return gen


def _mark(gen: Path) -> dict | None:
    try:
        m = json.loads((gen / MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None


def stale_generations(folder: Path, manifest: dict) -> list[Path]:
    """Generation folders of this index (our mark, its id) that the manifest does not point at and whose writer
    is gone (or is this process, done with it)."""
    current, uid, out = manifest.get("generation"), manifest.get("uid"), []
    for gen in sorted(folder.glob("gen-*")):
        mark = _mark(gen) if gen.is_dir() and not gen.is_symlink() else None
        if mark is None or gen.name == current or mark.get("index") != uid:
            continue
        pid = mark.get("pid")
        if isinstance(pid, int) and pid != os.getpid() and _pid_alive(pid):
            continue  # a writer at work (or its pid reused: the next sweep takes it)
        out.append(gen)
    return out


def remove_tree(path: Path, tries: int = 5) -> None:
    """Remove a folder tantivy has had open, and make sure it is gone: its threads (a reader's meta-file watcher, a
    failed writer's workers) can put a file into it while it is emptied. Each try removes what the last one left."""
    for i in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
        time.sleep(0.05 * (i + 1))


def sweep(folder: Path, manifest: dict) -> list[Path]:
    """Remove the stale generations (:func:`stale_generations`); returns them."""
    gone = stale_generations(folder, manifest)
    for gen in gone:
        remove_tree(gen)
    return gone


def retire(old_data: Path, recorded: dict, new_data: Path, new_files: dict) -> list[str]:
    """After a switch: remove the files of the old data folder (a generation, or a first-layout index's top) that
    the old manifest records, each only where it is still the file recorded: the same file as the new generation's
    link with the same digest, or one whose digest matches. A generation folder left with nothing of anyone's in
    it (its mark, tantivy's lock files) goes too; a file that is not ours keeps it, and it is never read again."""
    gone = []
    for name, digest in recorded.items():
        f, linked = old_data / name, new_data / name
        if not f.is_file() or f.is_symlink():
            continue
        same = linked.is_file() and new_files.get(name) == digest and os.path.samefile(f, linked)
        if same or file_digests(old_data, [name]).get(name) == digest:
            f.unlink(missing_ok=True)
            gone.append(name)
    if old_data != new_data.parent and _mark(old_data) is not None:
        rest = [p for p in old_data.iterdir() if p.name != MARK and not (p.is_file() and p.name.endswith(".lock"))]
        if rest:  # another's files: the folder is theirs now, unmarked, never swept
            (old_data / MARK).unlink(missing_ok=True)
        else:
            remove_tree(old_data)
    return gone


_SHADOWS: list[str] = []


def readable_copy(data: Path) -> Path:
    """A folder tantivy can open where ``data`` cannot be written (a read-only mount): links to each of its files
    in a scratch folder, which takes the lock files tantivy makes when it opens an index; removed at exit."""
    shadow = tempfile.mkdtemp(prefix="seakr-ro-index-")
    if not _SHADOWS:
        atexit.register(lambda: [shutil.rmtree(s, ignore_errors=True) for s in _SHADOWS])
    _SHADOWS.append(shadow)
    for f in data.iterdir():
        if f.is_file() and not f.name.endswith(".lock"):
            os.symlink(f.resolve(), Path(shadow) / f.name)
    return Path(shadow)


def writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def remove_orphans(out: Path) -> list[Path]:
    """Temporary folders of first builds of ``out`` whose process is gone (killed mid-build)."""
    gone = []
    for d in out.parent.glob(f".{out.name}.*-*"):
        kind, _, pid = d.name[len(out.name) + 2:].rpartition("-")
        if kind in ("building", "old") and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            remove_tree(d)
            gone.append(d)
    return gone


def added(m: dict, stats: dict, sources: Sequence[str]) -> dict:
    """The manifest ``m`` with an add's counts, checksum and sources."""
    m = dict(m)
    m["doc_count"] += stats["added"]
    m["duplicates_skipped"] = (m.get("duplicates_skipped") or 0) + stats["duplicates"]
    if "long_passages" in m:  # an index built before these were recorded keeps them unknown
        m["long_passages"] += stats["long"]
    if isinstance(m.get("longest_passage"), dict):
        m["longest_passage"] = max(m["longest_passage"], stats["longest"], key=lambda x: x["chars"])
    m["checksum"] = format((int(m["checksum"], 16) + stats["checksum"]) % _MOD, "064x")
    m["sources"] = list(m.get("sources") or []) + list(sources)
    m["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return m

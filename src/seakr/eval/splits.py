"""Which files one dataset path names: a file, a folder holding one split, or a quoted glob of a split's shards.

The hub and ``datasets`` keep a split as numbered shards (``validation-00000-of-00004.parquet``, TriviaQA's
validation has four; ``save_to_disk`` writes ``data-00000-of-00001.arrow`` into a folder beside its metadata).
A split is read whole or refused: read in part it would be reported as if whole.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ..common.console import warn
from ..common.files import data_file_names, is_pattern, pattern_files
from ..common.files import sha256_file
#: ``<split>-<i>-of-<n><ext>``: how the hub and ``datasets`` number a split's shards
SHARD = re.compile(r"^(?P<split>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})(?P<ext>\..+)$")


def split_files(path: str, error: type[Exception] = ValueError) -> list[str]:
    """The files ``path`` names, in shard order: itself; a folder's data files when they are one split; the
    files a glob matches. One line for a folder of several splits (naming a glob for each), an empty one, a
    glob matching nothing, or a split with a shard missing."""
    if is_pattern(path):
        files = pattern_files(path, error)
    elif os.path.isdir(path):
        files = _folder_split(path, error)
    else:
        _warn_one_shard(path)
        return [path]
    _check_complete(path, files, error)
    return files


def _folder_split(folder: str, error) -> list[str]:
    names = data_file_names(folder)
    if not names:
        subs = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)) and not d.startswith("."))
        held = f"; it holds the folders {', '.join(subs[:4])}{', ...' if len(subs) > 4 else ''}: name one" \
            if subs else ""
        raise error(f"{folder}: a folder without data files{held}")
    splits: dict[str, list[str]] = {}
    for name in names:
        m = SHARD.match(name)
        splits.setdefault(f"{m['split']}-*{m['ext']}" if m else name, []).append(name)
    if len(splits) > 1:
        said = ", ".join(f"'{os.path.join(folder, s)}'" for s in list(splits)[:4])
        raise error(f"{folder}: a folder of {len(splits)} splits or files; name one (quoted, to read every shard): "
                    f"{said}{', ...' if len(splits) > 4 else ''}")
    return [os.path.join(folder, n) for n in names]


def _check_complete(path: str, files: list[str], error) -> None:
    """Every shard of a numbered split is there once: ``-00000-of-00004`` .. ``-00003-of-00004``."""
    shards = [SHARD.match(os.path.basename(f)) for f in files]
    if len(files) < 2 or not all(shards):
        return
    groups = {(m["split"], m["n"], m["ext"]) for m in shards}
    if len(groups) > 1:
        return  # a glob over unrelated files: each is whole; the loader tells their layouts apart
    (split, n, ext), have = groups.pop(), {int(m["i"]) for m in shards}
    lost = [i for i in range(int(n)) if i not in have]
    if lost:
        raise error(f"{path}: shard {split}-{lost[0]:05d}-of-{n}{ext} is missing ({len(have)} of {int(n)} here); "
                    "a split read in part would be reported as whole")


def _warn_one_shard(path: str) -> None:
    m = SHARD.match(os.path.basename(path))
    if m and int(m["n"]) > 1:
        pattern = os.path.join(os.path.dirname(path), f"{m['split']}-*{m['ext']}")
        warn(f"{path}: shard {int(m['i']) + 1} of {int(m['n'])} of the split '{m['split']}'; "
                    f"its questions alone are read (name the split as '{pattern}', quoted, to read it whole)",
             once=True)


def split_digest(path: str) -> str:
    """sha256 of what ``path`` names: a file's own digest (what runs recorded before splits were read); several
    files, the digest of their digests in order."""
    files = split_files(path)
    if len(files) == 1:
        return sha256_file(Path(files[0]))
    return hashlib.sha256("\n".join(sha256_file(Path(f)) for f in files).encode()).hexdigest()

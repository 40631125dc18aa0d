"""Advisory locks where the platform has them, and stepping aside where it has none (Windows has no fcntl)."""

import subprocess
import sys

import pytest

from seakr.locks import FolderLock, flock


def test_a_second_holder_is_refused_and_a_closed_file_frees_the_lock(tmp_path):
    busy = lambda pid: ValueError(f"held by {pid}")  # noqa: E731
    with FolderLock(tmp_path, ".lock", busy):
        with pytest.raises(ValueError, match=r"held by \d+"):
            FolderLock(tmp_path, ".lock", busy).__enter__()
    with FolderLock(tmp_path, ".lock", busy):
        pass
    with open(tmp_path / "x", "w") as f:
        assert flock(f, wait=False) is True


def test_without_fcntl_the_package_imports_and_its_locks_step_aside(tmp_path):
    """registry.py imported fcntl at its top: without it (Windows) ``import seakr.models`` failed, and with it
    every command."""
    code = f"""
import sys
sys.modules["fcntl"] = None  # as on Windows
import seakr.cli, seakr.methods
from seakr.locks import FolderLock, flock
from seakr.common.cache import file_lock
with FolderLock({str(tmp_path)!r}, ".lock", ValueError), FolderLock({str(tmp_path)!r}, ".lock", ValueError):
    pass  # no locks: both go on
with file_lock(__import__("pathlib").Path({str(tmp_path / "c.lock")!r})):
    pass
print(flock(open({str(tmp_path / "y")!r}, "w"), wait=True))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]

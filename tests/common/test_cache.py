"""seakr's cache folder: where it is (SEAKR_CACHE, else the XDG cache), and a cache it cannot use named with the
variable that chose it, before any work."""

import os
import re

import pytest

from helpers import fixture_path, run_cli


def test_a_cache_path_through_a_file_names_the_variable(tmp_path, monkeypatch):
    """SEAKR_CACHE naming a file was "[Errno 20] Not a directory: '.../locks'" at the first conversion or pooled
    index, naming neither the variable nor the file."""
    from seakr.common import cache

    (tmp_path / "f").write_text("x")
    for value in (tmp_path / "f", tmp_path / "f" / "sub"):
        monkeypatch.setenv("SEAKR_CACHE", str(value))
        with pytest.raises(ValueError, match=f"SEAKR_CACHE={value}: {tmp_path / 'f'} is not a directory"):
            cache.cache_root()
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "new" / "cache"))  # not there yet: made when first written
    assert cache.cache_root() == tmp_path / "new" / "cache"
    monkeypatch.setenv("SEAKR_CACHE", " ")  # it made a folder named " " wherever the command ran
    with pytest.raises(ValueError, match="SEAKR_CACHE=' ': blank; point it at a folder, or unset it for the default"):
        cache.cache_root()
    monkeypatch.setenv("SEAKR_CACHE", "")  # set empty: unset, as shells write it
    assert cache.cache_root().name == "seakr"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SEAKR_CACHE", "~/cache")  # from an env file: no shell expanded it; it was ./~/cache
    assert cache.cache_root() == tmp_path / "home" / "cache"


def test_a_relative_xdg_cache_home_is_ignored_as_the_spec_says(tmp_path, monkeypatch):
    """XDG_CACHE_HOME=relative/dir made a cache, and converted every model again, under each folder a command
    ran from; the XDG spec says a relative value is invalid and to be ignored."""
    from seakr.common import cache

    monkeypatch.delenv("SEAKR_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for value in ("relative/dir", ".", ""):
        monkeypatch.setenv("XDG_CACHE_HOME", value)
        assert cache.cache_root() == tmp_path / "home" / ".cache" / "seakr"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "seakr"


def test_a_cache_seakr_cannot_write_is_named_before_any_work(tmp_path, monkeypatch):
    """A cache on a read-only mount or under /proc was "[Errno 2] No such file or directory: '/proc/x'" at the
    first conversion, naming no variable; `calibrate` found out only when writing its threshold, after the sweep."""
    from seakr.common import cache

    (tmp_path / "locks").write_text("not a folder")
    cases = [(tmp_path, f"SEAKR_CACHE={tmp_path}: cannot write {tmp_path / 'locks'}")]
    if os.path.isdir("/proc/self"):  # Linux: nothing can be made under /proc
        cases.append(("/proc/seakr-cache", "SEAKR_CACHE=/proc/seakr-cache: cannot write /proc/seakr-cache/locks"))
    for value, said in cases:
        monkeypatch.setenv("SEAKR_CACHE", str(value))
        with pytest.raises(ValueError, match=re.escape(said) + ".*point SEAKR_CACHE at a folder you can write"):
            with cache.cache_lock("m"):
                pass
    (tmp_path / "calibration").write_text("not a folder")
    r = run_cli("calibrate", "--data", fixture_path("nq_mini.oracle.jsonl"), "--model", "smollm2-135m", "--out",
                str(tmp_path / "out"), env={"SEAKR_CACHE": str(tmp_path)})
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"seakr: error: SEAKR_CACHE={tmp_path}: cannot write {tmp_path / 'calibration'} (File exists); seakr keeps "
        "converted models, pooled indexes and calibrations there: point SEAKR_CACHE at a folder you can write"]

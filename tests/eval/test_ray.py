"""``seakr eval --ray``: a local Ray head on loopback, 2 shard tasks (one thread each), the same rows
as one unsharded run; a Ray worker killed mid-shard is replaced, and its task resumes without losing rows."""

import json
import os
import signal
import subprocess
import time

import pytest

from helpers import COT_ARGS as ARGS, SEAKR_CLI

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'seakr[ray]')")
psutil = pytest.importorskip("psutil")

ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "HF_HUB_OFFLINE": "1"}


def rows(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def shard_process(rows_file):
    """The Ray worker running a shard: the process that holds its results file open for appending."""
    want = str(rows_file.resolve())
    for p in psutil.process_iter():
        try:
            if any(f.path == want for f in p.open_files()):
                return p
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
    return None


def test_ray_shards_survive_a_killed_worker_and_match_one_run(tmp_path, whole_cot_run):
    out = tmp_path / "ray"
    driver = subprocess.Popen([*SEAKR_CLI, *ARGS, "--ray", "--shards", "2", "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    first = out / "shard-0" / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (first.exists() and first.read_text().count("\n") >= 1):
        time.sleep(0.2)
    killed = shard_process(first)
    assert killed is not None, "shard 0 finished or never started"
    before = rows(first)
    killed.send_signal(signal.SIGKILL)
    stdout, stderr = driver.communicate(timeout=600)
    assert driver.returncode == 0, stderr[-3000:]
    after = {r["id"]: r for r in rows(first)}
    assert all(after[r["id"]]["seconds"] == r["seconds"] for r in before)  # kept, not recomputed
    key = lambda r: (r["id"], r["order"], r["prediction"], r["f1"])  # noqa: E731
    merged = rows(out / "merged" / "results.jsonl")
    assert [key(r) for r in merged] == [key(r) for r in rows(whole_cot_run / "results.jsonl")]
    assert "| cot | 4 |" in stdout

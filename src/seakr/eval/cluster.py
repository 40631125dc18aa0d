"""Evaluation fanned out over a Ray cluster: one shard per task, each a ``seakr eval --shard I/N
--resume`` process with its own model, then :func:`~seakr.eval.runner.merge_runs`.

Why a process per shard inside the task, instead of the model inside the Ray worker: the shard's rows
are fsync'd as they finish, so when a worker (or its node) dies Ray retries the task and the new
process resumes where the old one stopped: finished questions are never lost or recomputed. Install
with ``pip install 'seakr[ray]'``; ``address`` is a Ray cluster (``ray://host:10001`` or ``auto``) or
None for a local one on loopback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from .runner import merge_runs


def _ray():
    try:
        import ray
    except ImportError:
        raise ValueError("--ray needs the package ray: pip install 'seakr[ray]'") from None
    return ray


def run_shards(argv: Sequence[str], n_shards: int, out_dir: str, *, address: str | None = None, num_cpus: float = 1,
               num_gpus: float = 0, max_retries: int = 3, env: dict | None = None) -> dict:
    """Run ``seakr eval <argv> --shard i/n --out out_dir/shard-i --resume`` for every i as Ray tasks
    (``num_cpus``/``num_gpus`` each, retried up to ``max_retries`` times), then merge into
    ``out_dir/merged``. Returns the merged summary."""
    ray = _ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves the machine
    local = address in (None, "", "local")
    ray.init(address=None if local else address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
             **({"_node_ip_address": "127.0.0.1", "num_cpus": max(1, int(n_shards * num_cpus))} if local else {}))
    child_env = {**os.environ, **(env or {})}

    @ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=max_retries, retry_exceptions=True)
    def shard_task(i: int) -> int:
        cmd = [sys.executable, "-m", "seakr.cli", "eval", *argv, "--shard", f"{i}/{n_shards}",
               "--out", str(Path(out_dir) / f"shard-{i}"), "--resume"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=child_env)
        if r.returncode:
            tail = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"shard {i}/{n_shards} exited with {r.returncode}: {tail}")
        return i

    try:
        ray.get([shard_task.remote(i) for i in range(n_shards)])
    finally:
        if local:
            ray.shutdown()
    shutil.rmtree(Path(out_dir) / "merged", ignore_errors=True)  # derived from the shards: rebuilt every time
    return merge_runs(Path(out_dir) / "merged", [str(Path(out_dir) / f"shard-{i}") for i in range(n_shards)])

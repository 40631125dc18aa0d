"""Evaluation fanned out over a Ray cluster: one shard of an :class:`~seakr.eval.plan.EvalPlan` per
task, each calling :func:`~seakr.eval.plan.run_plan` with its own model, then
:func:`~seakr.eval.merge.merge_runs`.

A shard's rows are fsync'd as they finish and every shard resumes, so when a worker (or its node) dies
Ray runs the task again in a fresh worker, which continues where the dead one stopped: finished
questions are never lost or recomputed. Install with ``pip install 'seakr[ray]'``; ``address`` is a Ray
cluster (``ray://host:10001`` or ``auto``) or None for a local one on loopback.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

from .plan import EvalPlan, run_plan
from .specs import PlanError
from .merge import merge_runs
import socket
from ..models.machine import available_cpus


def _ray():
    try:
        import ray
    except ImportError:
        raise PlanError("--ray needs the package ray: pip install 'seakr[ray]'") from None
    return ray


def _check_counts(n_shards, num_cpus, num_gpus) -> None:
    """The Python API's counts, as the flags check them (a NaN or negative share reached Ray's own error)."""
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    for name, v, ok, want in (("shards", n_shards, number(n_shards) and isinstance(n_shards, int) and n_shards >= 1,
                               "a whole number >= 1"),
                              ("cpus-per-shard", num_cpus, number(num_cpus) and num_cpus > 0, "a number > 0"),
                              ("gpus-per-shard", num_gpus, number(num_gpus) and num_gpus >= 0, "a number >= 0")):
        if not ok:
            raise PlanError(f"eval --ray: --{name} {v!r}: expected {want}")


def check_address(address: str, timeout: float = 5.0) -> None:
    """A cluster address (``host:port`` or ``ray://host:port``) answers before Ray is asked to join it: with a
    mistyped host or a stopped head, ``ray.init`` retried without end, logging a timeout every 40 s. ``auto``
    (the cluster ``RAY_ADDRESS`` or ``ray start`` names) is left to Ray."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise PlanError(f"--ray {address}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        why = "no such host" if isinstance(e, socket.gaierror) else e.strerror or type(e).__name__
        raise PlanError(f"--ray {address}: no Ray cluster answers there ({why}); start one with `ray start --head` "
                        "or give its address (--ray alone runs a local one)") from None


def worker_env() -> dict[str, str]:
    """What the shards' processes are given of this one's environment. A relative ``SEAKR_CACHE`` is made
    absolute: a worker starts in another folder, where it named another cache, and converted the model again."""
    env = {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "SEAKR_CACHE") if k in os.environ}
    if env.get("SEAKR_CACHE", "").strip():
        env["SEAKR_CACHE"] = os.path.abspath(env["SEAKR_CACHE"])
    return env


def run_shard(plan: EvalPlan, i: int, n: int) -> int:
    """One shard of ``plan`` in this process (what each Ray task runs)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run_plan(plan.for_shard(i, n), progress=False, say=lambda _msg: None)
    return i


def run_shards(plan: EvalPlan, n_shards: int, *, address: str | None = None, num_cpus: float = 1,
               num_gpus: float = 0, max_retries: int = 3) -> dict:
    """Run ``plan`` as ``n_shards`` Ray tasks (``num_cpus``/``num_gpus`` each, retried up to ``max_retries``
    times), each into ``plan.out/shard-i``, then merge them into ``plan.out/merged``. One method run at a
    time; returns the merged summary."""
    if len(plan.runs) != 1:
        raise PlanError("eval --ray: runs one method over --shards shards; a grid of several runs does not apply")
    _check_counts(n_shards, num_cpus, num_gpus)
    if plan.concurrency > 1 or plan.shard:
        raise PlanError("eval --ray: --shard and --concurrency do not apply (each task is one shard)")
    local = address in (None, "", "local")
    if not local:
        check_address(address)
    plan.check(here=local)  # a remote cluster's workers bound --threads by their own CPUs when they load
    selection = plan.select()
    if n_shards > len(selection.examples):  # each shard's worker loads the model: one without questions only costs
        raise PlanError(f"eval --ray: --shards {n_shards}, but the plan selects {len(selection.examples)} questions; "
                        f"at most {len(selection.examples)} shards")
    plan.ensure_index(selection)  # bad data fails here, not in every worker; one index build, not n racing

    if plan.model.threads is None:  # each task computes on its share of the node, not on every core
        # a local cluster's tasks load here, where threads beyond the CPUs are refused (and would only contend)
        plan.model.threads = max(1, min(int(num_cpus), available_cpus()) if local else int(num_cpus))
    # a local cluster offers the CPUs this machine has (at least one task's): Ray runs that many shards at once
    # and queues the rest; offering n_shards x num_cpus started every shard's model at once (1,000 shards on 2
    # CPUs: a thousand workers loading torch)
    local_cpus = max(num_cpus, min(n_shards * num_cpus, available_cpus()))
    ray = _ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves the machine
    env = worker_env()
    try:
        ray.init(address=None if local else address, include_dashboard=False, log_to_driver=False,
                 ignore_reinit_error=True, runtime_env={"env_vars": env} if env else None,
                 **({"_node_ip_address": "127.0.0.1", "num_cpus": max(1, math.ceil(local_cpus))} if local else {}))
    except ConnectionError as e:  # `auto` with no cluster running, or a head that went away since the check
        raise PlanError(f"--ray {address or 'local'}: {str(e).splitlines()[0]}") from None
    task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=max_retries, retry_exceptions=False)(run_shard)
    try:
        ray.get([task.remote(plan, i, n_shards) for i in range(n_shards)])
    finally:
        if local:
            ray.shutdown()
    out = Path(plan.out)
    shutil.rmtree(out / "merged", ignore_errors=True)  # derived from the shards: rebuilt every time
    return merge_runs(out / "merged", [str(out / f"shard-{i}") for i in range(n_shards)])

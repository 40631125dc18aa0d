"""A TOML run grid (``seakr eval --config``): its keys read into the settings of an :class:`~seakr.eval.plan.EvalPlan`
and its ``[[run]]`` entries into :class:`~seakr.eval.specs.RunSpec`, each refused by file and key."""

from __future__ import annotations

import math
import os
from typing import Any

from ..common.console import did_you_mean, unknown_key
from ..common.files import read_text
from ..common.jsontext import too_many_digits
from .datasets import LAYOUTS
from .specs import ModelSpec, PLAN_LEAST, PlanError, RunSpec, SettingError, check_run, check_run_name


# ---------------------------------------------------------------------- TOML run grids
#: What a TOML run grid may hold: top-level keys with their types, and each [[run]]'s keys.
GRID_KEYS = {"data": str, "out": str, "index": str, "layout": str, "filler": list, "limit": int, "every": int, "seed": int,
             "prompt_set": str, "delta": (int, float), "concurrency": int, "model": str, "precision": str, "device": str,
             "threads": int, "layer": int, "state_source": str, "run": list}


#: The grid's keys that count something, and the least each may be (the plan's own, and the model's).
GRID_LEAST = {**PLAN_LEAST, "threads": 1, "layer": 0}


RUN_KEYS = ("name", "method", "options")


def _unknown_key(where: str, key: str, allowed) -> PlanError:
    return PlanError(unknown_key(where, key, allowed))


def _grid_top(path: str, conf: dict) -> None:
    """The grid's top-level keys: the plan's settings, the same names as the flags (``prompt_set`` for
    ``--prompt-set``), each checked by type and range here so a mistake names the file."""
    kinds = {list: "a list of [[run]] tables", (int, float): "a number"}
    for key, val in conf.items():
        if key not in GRID_KEYS:
            raise _unknown_key(path, key, GRID_KEYS)
        kind = GRID_KEYS[key]
        if not isinstance(val, kind) or isinstance(val, bool):
            want = "a list of file names" if key == "filler" else kinds.get(kind, getattr(kind, "__name__", kind))
            raise PlanError(f"{path}: key {key!r} must be {want}, not {type(val).__name__}")
    if not all(isinstance(f, str) for f in conf.get("filler", [])):
        raise PlanError(f"{path}: key 'filler' must be a list of file names")
    for key, least in GRID_LEAST.items():
        if key in conf and conf[key] < least:
            raise PlanError(f"{path}: key {key!r} must be {'a positive number' if least else '>= 0'}, not {conf[key]}")
    if "seed" in conf and not 0 <= conf["seed"] < 2 ** 32:
        raise PlanError(f"{path}: key 'seed' must be in 0..2**32-1, not {conf['seed']}")
    from ..models.machine import STATE_SOURCES

    if "state_source" in conf and conf["state_source"] not in STATE_SOURCES:
        raise PlanError(f"{path}: key 'state_source' must be {' or '.join(STATE_SOURCES)}, not {conf['state_source']!r}")
    if "layout" in conf and conf["layout"] not in LAYOUTS:
        raise PlanError(f"{path}: key 'layout' must be one of {', '.join(LAYOUTS)}, not {conf['layout']!r}"
                        + did_you_mean(conf["layout"], LAYOUTS))
    if isinstance(conf.get("delta"), float) and math.isnan(conf["delta"]):
        raise PlanError(f"{path}: key 'delta' must be a number, not nan")
    _grid_model(path, conf)


#: The grid's keys that say which model and how it computes (:class:`ModelSpec`'s fields).
MODEL_KEYS = ("model", "precision", "device", "threads", "layer", "state_source")


def _grid_model(path: str, conf: dict) -> None:
    """The grid's model keys checked as the flags are, the refusal naming the file and the key: it named a flag the
    grid does not have ("--precision 'int4': expected ..."). Threads are checked against this machine's CPUs
    later, where it is known whether the run stays here (a Ray launch's workers have their own)."""
    keys = {k: conf[k] for k in MODEL_KEYS if k in conf}
    if not keys:
        return
    try:
        ModelSpec(**keys).check(here=False)
    except SettingError as e:
        raise PlanError(f"{path}: key {e.name!r}: {e.text.lstrip(': ')}") from None
    except PlanError as e:
        raise PlanError(f"{path}: {e}") from None


def _grid_run(where: str, r: Any, names: set) -> RunSpec:
    if not isinstance(r, dict):
        raise PlanError(f"{where}: expected a table with method (and name, options)")
    for key in r:
        if key not in RUN_KEYS:
            raise _unknown_key(where, key, RUN_KEYS)
    if "method" not in r:
        raise PlanError(f"{where}: missing field 'method'")
    if not isinstance(r["method"], str):  # first: a run's name defaults to its method
        check_run(where, r["method"], {})
    name, options = r.get("name", r["method"]), r.get("options", {})
    check_run_name(where, name, names)
    if not isinstance(options, dict):
        raise PlanError(f"{where}: options must be a table such as {{ estimator = \"energy\" }}")
    check_run(f"{where} ({name})", r["method"], options)
    return RunSpec(r["method"], dict(options), name)


def check_grid_paths(path: str, conf: dict) -> None:
    """Refuse a relative file name of grid ``path`` (``conf``: the keys a run takes from it) that is missing
    from the working folder but lies beside the config file: paths in a grid are read from the working folder
    (as the flags' are), and the refusal was "popqa.tsv: no such file" while the file sat next to the config."""
    folder = os.path.dirname(os.path.abspath(path))
    for key in ("data", "index", "filler", "prompt_set", "model"):
        for v in conf.get(key, []) if key == "filler" else [conf.get(key)]:
            if (isinstance(v, str) and v and not os.path.isabs(v) and not os.path.exists(v)
                    and os.path.exists(os.path.join(folder, v))):
                raise PlanError(f"{path}: key {key!r} names {v!r}, which is beside this file but not in the working "
                                f"folder ({os.getcwd()}); paths in a config are read from the working folder: write "
                                f"{os.path.relpath(os.path.join(folder, v))!r} or run from {folder}")


def read_grid(path: str) -> tuple[dict, list[RunSpec]]:
    """A TOML run grid: its top-level settings (:data:`GRID_KEYS`: the eval flags' names) and its ``[[run]]``
    entries. Every key, type, range and run name is checked here, before any model loads."""
    import tomllib

    try:
        conf = tomllib.loads(read_text(path, PlanError))
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{path}: {e}") from None
    except RecursionError:  # `a = [[[[...` thousands deep: a traceback from inside the parser
        raise PlanError(f"{path}: nested too deeply to read (arrays or tables inside one another past the "
                        "parser's limit)") from None
    except ValueError as e:  # Python's bound on int(str): "use sys.set_int_max_str_digits()", naming no file
        if (why := too_many_digits(e)) is None:
            raise  # the file's own refusal (missing, not UTF-8), already named
        raise PlanError(f"{path}: {why}") from None
    _grid_top(path, conf)
    if "run" in conf and not conf["run"]:  # it ran the flags' method (SeaKR by default) as if no key were there
        raise PlanError(f"{path}: 'run' lists no runs; add a [[run]] table with a method, or leave the key out")
    names: set = set()
    runs = [_grid_run(f"{path}: [[run]] #{i + 1}", r, names) for i, r in enumerate(conf.get("run", []))]
    return {k: v for k, v in conf.items() if k != "run"}, runs

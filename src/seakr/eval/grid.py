"""A TOML run grid (``seakr eval --config``): its keys read into the settings of an :class:`~seakr.eval.plan.EvalPlan`
and its ``[[run]]`` entries into :class:`~seakr.eval.specs.RunSpec`, each refused by file and key."""

from __future__ import annotations

import os
from typing import Any, Literal


from ..common.schema import Positive, SchemaError, Seed, Threshold, schema, unknown_keys
from ..common.files import read_text
from ..common.jsontext import too_many_digits
from .datasets import LAYOUTS
from .specs import PlanError, RunSpec, run_spec
import tomllib


# ---------------------------------------------------------------------- TOML run grids
Count = Positive


@schema("key", unknown_keys)
class Grid:
    """A grid's top-level keys: the plan's settings, named as the flags are (``prompt_set`` for ``--prompt-set``)."""

    data: str | None = None
    out: str | None = None
    index: str | None = None
    layout: Literal[LAYOUTS] | None = None
    filler: list[str] | None = None
    limit: Count | None = None
    every: Count | None = None
    seed: Seed | None = None
    prompt_set: str | None = None
    delta: Threshold | None = None
    concurrency: Count | None = None
    model: Any = None  # the model keys: ModelSpec's fields, held to its schema by the plan
    precision: Any = None
    device: Any = None
    threads: Any = None
    layer: Any = None
    state_source: Any = None
    run: list[dict[str, Any]] | None = None  # [[run]] tables, each a RunSpec's fields


def _grid_top(path: str, conf: dict) -> Grid:
    try:
        return Grid(**conf)
    except SchemaError as e:
        raise PlanError(f"{path}: {e}") from None


def _grid_run(where: str, r: dict) -> RunSpec:
    """One ``[[run]]`` table as a :class:`RunSpec`, refused by ``where`` and the run's name (its method's where it
    has none)."""
    if "method" not in r:  # not the default method's options checked, as if one were named
        raise PlanError(f"{where}: missing key 'method'")
    name = r.get("name", r["method"])
    return run_spec(f"{where} ({name})" if isinstance(name, str) else where, **r)


def check_grid_paths(path: str, conf: dict) -> None:
    """Refuse a relative file name of grid ``path`` (``conf``: the keys a run takes from it) that is missing
    from the working folder but lies beside the config file: paths in a grid are read from the working folder
    (as the flags' are), and the line says so and how to write the path."""
    folder = os.path.dirname(os.path.abspath(path))
    for key in ("data", "index", "filler", "prompt_set", "model"):
        for v in conf.get(key, []) if key == "filler" else [conf.get(key)]:
            if (isinstance(v, str) and v and not os.path.isabs(v) and not os.path.exists(v)
                    and os.path.exists(os.path.join(folder, v))):
                raise PlanError(f"{path}: key {key!r} names {v!r}, which is beside this file but not in the working "
                                f"folder ({os.getcwd()}); paths in a config are read from the working folder: write "
                                f"{os.path.relpath(os.path.join(folder, v))!r} or run from {folder}")


def read_grid(path: str) -> tuple[dict, list[RunSpec], list[str]]:
    """A TOML run grid: its top-level settings (:class:`Grid`: the eval flags' names), its ``[[run]]`` entries and
    how a refusal names each of them (``FILE: [[run]] #2 (name)``). Keys, types and ranges are checked here; what
    the plan checks of its settings and runs, the plan's check says naming the file and key."""
    try:
        conf = tomllib.loads(read_text(path, PlanError))
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{path}: {e}") from None
    except RecursionError:  # `a = [[[[...` thousands deep: the parser recurses past Python's limit
        raise PlanError(f"{path}: nested too deeply to read (arrays or tables inside one another past the "
                        "parser's limit)") from None
    except ValueError as e:  # Python's bound on int(str): "use sys.set_int_max_str_digits()", naming no file
        if (why := too_many_digits(e)) is None:
            raise  # the file's own refusal (missing, not UTF-8), already named
        raise PlanError(f"{path}: {why}") from None
    grid = _grid_top(path, conf)
    if "run" in conf and not conf["run"]:  # not the flags' method, as if no key were there
        raise PlanError(f"{path}: 'run' lists no runs; add a [[run]] table with a method, or leave the key out")
    runs = [_grid_run(f"{path}: [[run]] #{i + 1}", r) for i, r in enumerate(conf.get("run", []))]
    labels = [f"{path}: [[run]] #{i + 1} ({r.name})" for i, r in enumerate(runs)]
    return {k: getattr(grid, k) for k in conf if k != "run"}, runs, labels

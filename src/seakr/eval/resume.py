"""Whether a run may resume, or join another as its shard: the differences between two recorded configurations,
said in one line, and what counts as the same questions, data and method."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..common.jsontext import spelled, strict_json
from ..methods import METHODS
from .splits import split_digest
from .specs import parse_shard


def differences(a, b, prefix: str = "", partial: bool = False) -> list[tuple[str, object, object]]:
    """Every field where two JSON-like values differ: (dotted name, a's value, b's value; None where absent).
    ``partial``: ``b`` says only what is known of it, so only its fields that ``a`` has too are compared (a
    plan's record before the model loads against the record a run wrote)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in b if k in a] if partial else list(a) + [k for k in b if k not in a]
        out = []
        for k in keys:
            out += (differences(a.get(k), b.get(k), f"{prefix}{k}.", partial) if k in a and k in b
                    else [(f"{prefix}{k}", a.get(k), b.get(k))])
        return out
    return [] if a == b else [(prefix.rstrip(".") or "value", a, b)]


def method_differences(old: dict, new: dict, partial: bool = False) -> list[tuple[str, object, object]]:
    """Where two run configs' methods differ (options added since ``old`` was recorded at their old values; a
    ``partial`` ``new`` names only the options it knows, so none are added to it)."""
    if partial and new.get("method") is None:  # a record that knows nothing of the method yet
        return []
    now = new.get("method") if partial else _with_added_options(new.get("method"))
    return differences(_comparable(_with_added_options(old.get("method"))), _comparable(now), partial=partial)


def said_differences(diff: list, first: str, second: str, most: int = 4) -> str:
    """Every field that differs with both values, for one line (a changed model changes several fields, and
    each is named)."""
    said = "; ".join(f"method.{k}: {strict_json(a, spell=True)} {first}, {strict_json(b, spell=True)} {second}"
                     for k, a, b in diff[:most])
    return said + (f"; {len(diff) - most} more" if len(diff) > most else "")


def _with_added_options(method: dict | None) -> dict | None:
    """A recorded method description with the options added since it was recorded, at the values that
    reproduce it (``Config.ADDED``)."""
    if not isinstance(method, dict) or not isinstance(method.get("config"),
                                                      dict) or method.get("method") not in METHODS:
        return method
    added = getattr(METHODS[method["method"]].Config, "ADDED", {})
    return {**method, "config": {**added, **method["config"]}}


#: What a study records of how it asks, beside the method: a resume must ask the same way (where both
#: record it; a study from before a record was added is resumed as it is).
STUDY_KEYS = ("setting", "form", "states", "probe", "wording", "probe_model")


def check_same_run(old: dict, config: dict, where: Path, partial: bool = False) -> None:
    """The one resume rule: ``config`` (a run's record, or with ``partial`` the part of it known before the model
    loads) must answer the same questions with the same method and asking as the ``old`` record. The plan calls
    it before the model loads, the row log once the run's whole record is known."""
    config = json.loads(json.dumps(config))  # as config.json spells it
    check_same_questions(old, config, where)  # first: another data file changes the family's options too
    check_same_method(method_differences(old, config, partial), where)
    check_same_asking(old, config, where)


def check_shard_of(first: dict, cfg: dict, where, first_where) -> None:
    """``cfg`` is another shard of the run ``first`` was recorded by (``seakr merge``): the same method and data,
    the same split into shards, the same questions cut (limit, every)."""
    if diff := method_differences(first, cfg):
        raise ValueError(f"{where}: a different run than {first_where} ({said_differences(diff, 'there', 'here')})")
    if other_data(first, cfg):
        raise ValueError(f"{where}: a different run than {first_where} (another data file)")
    if shard_of(cfg)[1] != shard_of(first)[1]:
        raise ValueError(f"{where}: " + (f"shard {cfg['shard']}" if cfg.get("shard") else "a whole run (no --shard)")
                         + f" is of another split than {first.get('shard') or 'a whole run (no --shard)'}")
    for key in ("limit", "every"):
        if cfg.get(key) != first.get(key):
            raise ValueError(f"{where}: {key} {cfg.get(key)} but {first_where} has {key} {first.get(key)}: not shards "
                             "of "
                             "one run")


def check_same_method(diff: list, where) -> None:
    """A resume over a run recorded with another method config (``diff``: :func:`method_differences`, or the
    plan's part of it before the model loads) is refused, naming every field that differs."""
    if diff:
        raise ValueError(f"{where}: --resume with a different method config than the one recorded in config.json "
                         f"({said_differences(diff, 'recorded', 'now')})")


def check_same_questions(old: dict, new: dict, where) -> None:
    """The data file and which of its questions a run owns (shard, every), where both record them: a resume
    must answer the same ones. RowLog checks it, and the plan before the model loads."""
    if other_data(old, new):
        raise ValueError(f"{where}: --resume with different data ({new.get('data')}) than the run "
                         f"recorded in config.json ({old.get('data')})")
    if "shard" in old and "shard" in new and shard_of(old) != shard_of(new):
        shard = [f"shard {s}" if s else "no shard (the whole run)" for s in (new["shard"], old["shard"])]
        raise ValueError(f"{where}: --resume with {shard[0]} but the run recorded {shard[1]}")
    every = (old.get("every") or 1, new.get("every") or 1)  # a run without it took every question
    if "data" in old and "data" in new and every[0] != every[1]:
        raise ValueError(f"{where}: --resume with every {every[1]} but the run recorded every {every[0]} (another "
                         "selection of the questions); resume it as it was, or choose another --out")


def check_same_asking(old: dict, new: dict, where) -> None:
    """How a study asks (:data:`STUDY_KEYS`), where both record it: a study resumed in another form or setting
    would hold rows of two. The command checks form and setting before the model loads, RowLog all."""
    for key in STUDY_KEYS:
        if key in old and key in new and old[key] != new[key]:
            raise ValueError(f"{where}: --resume with {key} {json.dumps(new[key])[:80]} but the study recorded "
                             f"{key} {json.dumps(old[key])[:80]}; resume it as it was asked, or choose another --out")


def other_data(old: dict, new: dict) -> bool:
    """Whether two run configs name different data files (by content; by file name for runs recorded
    before the checksum was)."""
    if old.get("data_sha256") and new.get("data_sha256"):
        return old["data_sha256"] != new["data_sha256"]
    if old.get("data") and new.get("data"):
        return os.path.basename(old["data"]) != os.path.basename(new["data"])
    return False


def data_identity(path: str) -> dict:
    """What a run records of its data file, so ``--resume`` can refuse another one."""
    return {"data": os.path.abspath(path), "data_sha256": split_digest(path)}


def _comparable(cfg):
    """Config equality for --resume, ignoring fields that cannot change an answer: where things ran
    (threads), and the threshold a run resolved from the packaged table when it retrieves at every step
    anyway (``retrieval="always"`` never reads delta; a packaged delta that changed since the run began,
    e.g. a new multi-hop key, must not lock its rows out of a resume)."""
    if isinstance(cfg, float) and not math.isfinite(cfg):  # as config.json spells it ("-inf"), or older ones did
        return spelled(cfg)
    if not isinstance(cfg, dict):
        return cfg
    skip = {"threads"}
    if (cfg.get("config") or {}).get("retrieval") == "always" and (cfg["config"].get("delta") is None):
        skip |= {"delta", "delta_source"}
    if cfg.get("checksum") and ("path" in cfg or "url" in cfg):  # an index is its content, wherever it lies
        skip |= {"path"}
    out = {k: _comparable(v) for k, v in cfg.items() if k not in skip}
    for k in ("delta_source", "gate_p_source"):  # a calibration file under another SEAKR_CACHE: the same file
        if isinstance(out.get(k), str) and os.sep in out[k]:
            out[k] = os.path.basename(out[k])
    return out


def shard_of(cfg: dict) -> tuple[int, int]:
    """A run's shard as numbers, (0, 1) for a whole run: runs before the plan wrote I/N recorded "00/02" as given."""
    return parse_shard(cfg["shard"]) if cfg.get("shard") else (0, 1)

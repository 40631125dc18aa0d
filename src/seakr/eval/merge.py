"""Joining the shards of a run into one, and exporting a run's predictions in a dataset's own format."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from ..common.console import did_you_mean, warn
from ..common.jsontext import strict_json
from ..common.runs import ROW_FILES, SCORES
from ..common.writing import make_folder, write_atomic
from .folders import check_folder_is, check_not_foreign, named_paths, run_dirs, run_lock
from .resume import check_shard_of, shard_of
from .rowlog import read_run_config, run_rows
from .specs import check_output_dir
from .summary import summarize, summary_markdown


def merge_runs(out_dir: str | os.PathLike, dirs: Sequence[str]) -> dict:
    """Join shard directories of one run into ``out_dir`` (results, config, summary).

    Refuses shards of different runs (method config, data, shard count) and overlapping questions;
    says which shards are missing."""
    named_paths("merge", out_dir)
    dirs = run_dirs("merge", dirs)
    out = Path(out_dir)
    _check_unheld(out)  # first, as a run's folder checks are: nothing is tried in a folder refused here
    check_not_foreign(out)
    check_output_dir(str(out))  # said before the shards are read
    for d in dirs:  # the merged run became a run inside a shard: `report` and `compare` of the shard found both
        if Path(os.path.realpath(d)) in Path(os.path.realpath(out)).parents:
            raise ValueError(f"{out}: inside the shard {d}; merge into a folder outside the shards")
    cfgs, rows, seen = [], [], {}
    for d in dirs:
        p = Path(d)
        cfg = read_run_config(p)
        if cfg.get("study"):  # its rows are not answers: it "merged" into an empty run that claimed to be a study
            raise ValueError(f"{d}: a {cfg['study']} study, not a shard of an eval run")
        if cfgs:
            check_shard_of(cfgs[0], cfg, d, dirs[0])
        for r in run_rows(p, warn):
            if r.id in seen:
                raise ValueError(f"{d}: question {r.id} is also in {seen[r.id]}: overlapping shards")
            seen[r.id] = d
            rows.append(r)
        cfgs.append(cfg)
    if not cfgs:
        raise ValueError("merge: no shard directories given")
    n = shard_of(cfgs[0])[1]
    have = {shard_of(c)[0] for c in cfgs}
    missing = sorted(set(range(n)) - have)
    if missing:
        warn(f"merge: shards {', '.join(f'{i}/{n}' for i in missing)} missing; the merged run is partial")
    make_folder(out)
    with run_lock(out):  # two merges into one new folder at once each wrote their rows over the other's
        _check_unheld(out)  # again, now that no other merge can be writing here
        return _write_merged(out, dirs, cfgs, rows, missing)

def _check_unheld(out: Path) -> None:
    held = [n for n in (*ROW_FILES, "config.json") if (out / n).exists()]
    if held:  # score rows alone (a run resumed elsewhere) or a study's were overwritten: results.jsonl was all it asked
        raise ValueError(f"{out}: holds {', '.join(held)} already; merge into a new directory")


def _write_merged(out: Path, dirs: Sequence[str], cfgs: list[dict], rows: list, missing: list[int]) -> dict:
    rows.sort(key=lambda r: r.order)
    with open(out / "results.jsonl", "w", encoding="utf-8") as f, open(out / SCORES, "w", encoding="utf-8") as g:
        for r in rows:
            if r.trace is not None:  # a full row; shards resumed from score rows alone have only those
                f.write(json.dumps(r.to_dict()) + "\n")
            g.write(json.dumps(r.to_score_dict()) + "\n")
    merged = {k: v for k, v in cfgs[0].items() if k != "shard"}
    merged.update({"merged_from": [str(d) for d in dirs], "missing_shards": missing})
    if all(isinstance(c.get("examples"), int) for c in cfgs):  # the first shard's count was kept as the whole's
        merged["examples"] = sum(c["examples"] for c in cfgs)
    write_atomic(out / "config.json", strict_json(merged, spell=True, indent=2))
    s = summarize(rows, merged.get("name", out.name))
    write_atomic(out / "summary.json", strict_json(s, indent=2))
    write_atomic(out / "summary.md", summary_markdown([s]))
    return s


def run_labels(dirs: Sequence[str], names: list[str]) -> list[str]:
    """Each run's label in a comparison: its name, or where two runs share one (two "cot" runs from two
    folders), its folder as given; a folder given twice is numbered."""
    out = [d if names.count(n) > 1 else n for d, n in zip(dirs, names)]
    return [f"{x} #{out[:i].count(x) + 1}" if out.count(x) > 1 else x for i, x in enumerate(out)]


def _runs_inside(p: Path, what: str) -> str:
    """``; it holds the runs a, b: compare those``: the runs a grid's folder holds, for a command given the grid."""
    inner = sorted(q.name for q in p.iterdir() if (q / "config.json").is_file()) if p.is_dir() else []
    return f"; it holds the runs {', '.join(inner[:6])}: {what}" if inner else ""


#: What ``seakr export`` writes a run's predictions as: JSON lines of id and prediction; ``{id: prediction}``, the
#: file SQuAD's, TriviaQA's and NQ-open's scripts read; HotpotQA's ``{"answer": ..., "sp": ...}`` (no supporting
#: facts are predicted: every ``sp`` list is empty, and its script scores them 0)
EXPORT_FORMATS = ("jsonl", "squad", "hotpotqa", "2wiki")


def export_predictions(run_dir: str | os.PathLike, fmt: str = "jsonl") -> str:
    """A run's predictions, in its questions' order, as a leaderboard or an official script reads them."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"export: format {fmt!r}{did_you_mean(fmt, EXPORT_FORMATS)}; choose from "
                         f"{', '.join(EXPORT_FORMATS)}")
    named_paths("export", run_dir)
    check_folder_is(run_dir)
    p = Path(run_dir)
    cfg = read_run_config(p, required=False)
    if cfg.get("study"):
        raise ValueError(f"{run_dir}: a {cfg['study']} study, not an eval run: it holds no predictions to export")
    rows = sorted(run_rows(p), key=lambda r: r.order)
    if not rows:
        raise ValueError(f"{run_dir}: no answered question here (an eval run's folder holds results.jsonl or "
                         f"scores.jsonl){_runs_inside(p, 'export one')}")
    if fmt == "jsonl":
        return "".join(json.dumps({"id": r.id, "prediction": r.prediction}, ensure_ascii=False) + "\n" for r in rows)
    answers = {r.id: r.prediction for r in rows}
    body = answers if fmt == "squad" else {"answer": answers, "sp": {r.id: [] for r in rows}}
    if fmt == "2wiki":  # 2WikiMultihopQA's script reads the evidence triples beside HotpotQA's two keys
        body["evidence"] = {r.id: [] for r in rows}
    return json.dumps(body, ensure_ascii=False, indent=1) + "\n"

"""The plan of ``seakr fit`` (:mod:`seakr.eval.fit`), checked before any model loads: its settings (one schema,
:class:`FitPlan`), the model stages over each train file's two halves, and the dev questions it refuses.

Half A and half B are the even and odd questions of each file's first ``limit`` (shards 0/2 and 1/2 of a plan), so
the gate level is chosen on questions no file was fitted on. Each stage is an :class:`~seakr.eval.plan.EvalPlan` of
its own, checked as ``seakr eval`` checks one, writing to ``OUT/runs/STAGE-I-NAME``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from ..common.files import read_text
from ..common.schema import Folder, PathText, Positive, PositiveReal, Seed, schema
from .plan import EvalPlan, Selection, as_model_spec
from .folders import check_not_foreign, rows_held
from .rowlog import read_results
from ..common.runs import ROW_FILES, is_run_folder
from .specs import ModelSpec, PlanError, check_there, run_spec
from .studies import STUDY_OPTIONS, STUDY_READS, SHORT_UNREAD
from ..probes.probe import Folds

#: The chain the final maps and the gate level are fitted on: every step retrieves, and both final answers are
#: kept with their U (the paper's rules; the fitted rules are what this run makes).
CHAIN_OPTIONS = {"gate": "step", "reasoning": "self-aware", "rerank": "self-aware", "retrieval": "always"}
#: The options a fit passes to every stage: how the model samples and asks (a fitted file records them, and a
#: run that samples otherwise refuses it).
FIT_OPTIONS = STUDY_READS["detect"]
ESTIMATOR = "eigen"
GATES = ("probe", "check")
#: Chain questions a half needs at least: half A's answers fit the final-form maps, half B's choose the gate level;
#: on fewer, a map or a level follows a handful of answers (the packaged ones were fitted on 50).
MIN_CHAIN = 20
#: Each model stage: its train files' half and whether it runs the chain (else the knowledge check).
STAGES = (("check", 0, False), ("check2", 1, False), ("chain", 0, True), ("chain2", 1, True))


def _listed(v):
    return [v] if isinstance(v, (str, os.PathLike)) else v


@schema("fit:", error=PlanError)
class FitPlan:
    """What ``seakr fit`` fits and on which questions (constructor-as-config)."""

    train: Annotated[list[PathText], BeforeValidator(_listed), Field(min_length=1)]
    out: Folder
    model: Annotated[ModelSpec, BeforeValidator(as_model_spec)] = field(default_factory=ModelSpec)
    limit: Positive = 400  # the first questions of each file (after every), split into halves A and B
    every: Positive | None = None
    index: PathText | None = None  # the chain's corpus; None: each file's paragraphs pooled (+ filler)
    filler: Annotated[list[PathText], BeforeValidator(_listed)] = field(default_factory=list)
    taps: Literal["own", "all"] = "own"  # the probe's states: the model's own tap, or every layer's (slower)
    folds: Annotated[Folds, Field(le=20)] = 5
    options: dict[str, Any] = field(default_factory=dict)  # sampling and wording (FIT_OPTIONS), for every stage
    seed: Seed = 42
    budget_minutes: PositiveReal | None = None
    dev_ids: Annotated[list[PathText], BeforeValidator(_listed)] = field(default_factory=list)
    resume: bool = False

    @model_validator(mode="after")
    def _options_read(self):
        if unread := sorted(set(self.options) - FIT_OPTIONS):
            raise ValueError(f"option {', '.join(unread)}: a fit passes only how the model samples and asks to its "
                             f"stages ({', '.join(sorted(FIT_OPTIONS))})")
        return self

    def stage_plan(self, stage: str, i: int, half: int, chain: bool) -> EvalPlan:
        """The plan of one model stage over half ``half`` of train file ``i``, writing to its own folder."""
        f = self.train[i]
        opts = {**(CHAIN_OPTIONS if chain else STUDY_OPTIONS), **self.options}
        if not chain:
            opts = {k: v for k, v in opts.items() if k not in SHORT_UNREAD}
        return EvalPlan(data=f, out=str(self.folder(stage, i)), runs=[run_spec("fit", "seakr", opts)], limit=self.limit,
                        every=self.every, shard=f"{half}/2", index=self.index if chain else None,
                        filler=self.filler if chain and not self.index else [], seed=self.seed, resume=True,
                        model=self.model, rows="results.jsonl" if chain else "detect_rows.jsonl")

    def folder(self, stage: str, i: int) -> Path:
        stem = Path(self.train[i]).name.split(".")[0][:40] or "data"
        return Path(self.out) / "runs" / f"{stage}-{i}-{stem}"


@dataclass
class Stage:
    """One model stage over one file's half: its plan and its questions."""

    name: str  # check | chain | check2 | chain2
    plan: EvalPlan
    sel: Selection

    @property
    def out(self) -> str:
        return self.plan.out


def dev_ids(files) -> dict[str, str]:
    """Every id (or question) of the dev id lists, with the list that names it (one a line)."""
    found: dict[str, str] = {}
    for f in files:
        for line in read_text(f, PlanError).splitlines():
            if line.strip():
                found.setdefault(line.strip(), os.fspath(f))
    return found


def _refuse_dev(stage: Stage, listed: dict[str, str]) -> None:
    for ex in stage.sel.examples:
        hit = listed.get(ex.id) or listed.get(ex.question.strip())
        if hit:
            raise PlanError(f"{stage.plan.data}: question {ex.id!r} is a dev question (listed in {hit}); fit on "
                            "train files only, never on the questions you report")


def plan_stages(fp: FitPlan, lm=None) -> dict[str, list[Stage]]:
    """Every model stage, checked before any model loads (``lm``: one given loaded, whose name a resume compares):
    each file and half (selected, refused if a dev id list names a question, compared with its rows on a resume),
    and which files the chain can search (their paragraphs pooled, or the given index)."""
    check_fit_home(fp)
    for name, files in (("train", fp.train), ("dev_ids", fp.dev_ids)):
        for f in files:
            check_there(name, f, "fit: ")
    listed = dev_ids(fp.dev_ids or [f for f in os.environ.get("SEAKR_DEV_IDS", "").split(os.pathsep) if f])
    stages: dict[str, list[Stage]] = {"check": [], "chain": [], "check2": [], "chain2": []}
    for i in range(len(fp.train)):
        for name, half, chain in STAGES:
            plan = fp.stage_plan(name, i, half, chain).check()
            sel = plan.select()
            if chain and not fp.index and not any(ex.contexts for ex in sel.full):
                continue  # a question-answer table: the check's questions only
            stage = Stage(name, plan, sel)
            _refuse_dev(stage, listed)
            plan.check_folders(sel, lm)
            stages[name].append(stage)
    if not stages["chain"]:
        raise PlanError("fit: no train file carries paragraphs for the chain (the final maps and the gate level "
                        "are fitted on its answers); add one that does (HotpotQA, 2Wiki, MuSiQue), or give --index")
    _enough_chains(stages)
    return stages


def check_fit_home(fp: FitPlan) -> None:
    """``fp.out`` is new, or a folder a run could write to that holds no fit (:func:`check_not_foreign`: not an
    index, not another program's files), or this fit's own: one begun (its stage folders in ``runs/``) resumes only
    with ``--resume`` and the same train files, so a fit's files are never mixed with another kind's or another
    fit's."""
    out = Path(fp.out)
    if is_run_folder(out):
        held = next((ROW_FILES[n] for n in rows_held(out)), "a seakr run or study")
        raise PlanError(f"fit: {out}: the folder of {held}; a fit writes to a folder of its own: choose another --out")
    try:
        check_not_foreign(out)
    except ValueError as e:
        raise PlanError(f"fit: {e}") from None
    began = sorted(p.name for p in (out / "runs").iterdir() if p.is_dir()) if (out / "runs").is_dir() else []
    if (began or (out / "fit-report.json").is_file()) and not fp.resume:
        raise PlanError(f"fit: {out} holds an earlier fit; pass --resume to continue it, or choose a new --out")
    planned = {fp.folder(stage, i).name for stage, _, _ in STAGES for i in range(len(fp.train))}
    if other := [n for n in began if n not in planned]:
        raise PlanError(f"fit: {out}: --resume with other train files, or in another order, than the fit began with "
                        f"(it holds runs/{other[0]}); resume it with them, or choose another --out")


def _enough_chains(stages: dict[str, list[Stage]]) -> None:
    """Each half's chain questions reach :data:`MIN_CHAIN`, before hours of checks are spent on a fit whose maps
    and gate level would rest on a few answers."""
    for name, half in (("chain", "A"), ("chain2", "B")):
        n = sum(len(s.sel.examples) for s in stages[name])
        if n < MIN_CHAIN:
            files = ", ".join(f"{Path(s.plan.data).name}: {len(s.sel.examples)}" for s in stages[name])
            raise PlanError(f"fit: the chain has {n} question(s) in half {half} ({files}), and its final maps and "
                            f"gate level need at least {MIN_CHAIN} a half: select more questions with paragraphs "
                            "(a higher --limit or a lower --every, or another such file), or give --index")


def describe(fp: FitPlan, stages: dict[str, list[Stage]]) -> str:
    """What the fit will run, before it runs it."""
    lines = [f"fit: {len(fp.train)} train file(s), the first {fp.limit} questions of each in halves A and B -> "
             f"{fp.out}"]
    for name, what in (("check", "the knowledge check, half A"), ("chain", "the chain retrieving every step, half A"),
                       ("check2", "the check with the new probe, half B"), ("chain2", "the chain, half B")):
        n = sum(len(s.sel.examples) for s in stages[name])
        lines.append(f"  {name:<7} {n:>5} questions  {what}")
    lines.append("  then: the probe, 3 calibration maps, 2 gate levels, fit-report.md")
    return "\n".join(lines)


def stage_seconds(folder: str | Path) -> list[float]:
    """The seconds of each row a stage holds (a detect study's or an eval run's), read as a resume reads them (a
    line torn by a kill is skipped); none before its first."""
    for name in ("detect_rows.jsonl", "scores.jsonl"):
        f = Path(folder) / name
        if f.is_file():
            return [r["seconds"] for r in read_results(f) if isinstance(r.get("seconds"), (int, float))]
    return []

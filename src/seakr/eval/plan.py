"""An evaluation, planned: which data, which questions, which index, which methods with which options,
where the rows go. ``seakr eval``, its TOML run grids, the Ray launcher and Python users all build an
:class:`EvalPlan` and call :func:`run_plan`, so every door resolves the same defaults in one place.

    from .plan import EvalPlan, run_plan
    from .specs import RunSpec
    plan = EvalPlan(data="dev.jsonl", out="runs/x", runs=[RunSpec("seakr"), RunSpec("ircot")], limit=50)
    summaries = run_plan(plan)

Everything a plan can get wrong (an unknown method or option, a bad range, an output path that is a
file, a malformed grid) fails in :meth:`EvalPlan.check`, before the model loads."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Sequence

from pydantic import AfterValidator, BeforeValidator, model_validator

from ..search.base import is_url, redact, seakr_own
from ..search.corpora import corpus_files, detect_format
from ..common.console import warn
from ..common.files import check_rereadable, is_pattern, missing, pattern_files, user_path
from ..common.schema import PathText, Positive, Said, Seed, Threshold, schema
from .datasets import LAYOUTS, load_dataset, warn_unlabelled
from .example import Example
from .specs import (ModelSpec, PlanError, RunSpec, SettingError, check_output_dir, check_settings, check_there,
                    check_unique, check_window, method_options, parse_shard, select_examples, shard_spelled)
from ..common.runs import ROW_FILES, SCORES
from .rowlog import RowLog, recorded_with, row_kind
from ..methods import METHODS, build_method
from ..methods.base import warn_unread_tap
from ..progress import progress_bar
from ..search import open_engine
from .runner import run_eval
from .summary import summary_of_rows
from .resume import data_identity
from ..models.batching import BatchingModel
from ..models.machine import precision_name
from ..search.generations import read_manifest
from ..models import DEFAULT_MODEL, model_path
from ..prompts import family_for
from .corpus import check_poolable, pooled_index
from .folders import check_rows_home


@dataclass
class Selection:
    """The questions a plan answers, with what the run needs to know about them."""

    examples: list[Example]  # after --every, --limit and --shard
    full: list[Example]  # the whole file: its paragraphs are the pooled index
    family: str  # prompt family (hotpotqa | 2wikimultihopqa | simpleqa)
    order_of: dict  # id -> place in the unsharded selection (shards keep the run's order)


def _data(v):
    """Questions are a file's path: a run records where they came from, to resume."""
    if isinstance(v, (list, tuple, dict)) or hasattr(v, "columns"):  # as an index may be given
        raise ValueError(f"a file's path, not a {type(v).__name__} of questions: a run records where its "
                         'questions came from, to resume; write them as JSON lines, one {"id", "question", "answer"} '
                         "a line")
    return v


def _named(v: str) -> str:
    if not v.strip():  # read as "not given": the pooled index, the default set
        raise ValueError("is empty; name it, or leave it out for its default")
    return v


def _filler(v):
    """One file given alone is a list of one; each quoted glob (a grid's ``"wiki/*.jsonl"``: no shell expands it)
    the files it matches (one matching none stays, for :meth:`EvalPlan.check` to name)."""
    v = [] if v is None else [v] if isinstance(v, (str, os.PathLike)) else v
    return _filler_files([user_path(f) for f in v]) if isinstance(v, (list, tuple)) else v


def _runs(v):
    """A run given as its method's name, or alone, not in a list."""
    v = [v] if isinstance(v, (str, RunSpec)) else v
    return [RunSpec(r) if isinstance(r, str) else r for r in v] if isinstance(v, (list, tuple)) else v


def as_model_spec(v):
    """A model given by its name or path (or none: the default) as a :class:`ModelSpec`; a spec as it is."""
    if v is not None and not isinstance(v, (str, os.PathLike)):
        return v
    try:
        return ModelSpec(user_path(v))
    except SettingError as e:  # the spec's own model field: the plan's model field names it once
        raise ValueError(e.text.removeprefix(": ")) from None


Named = Annotated[PathText, AfterValidator(_named)]
Count = Positive


def _setting(field: str, text: str) -> SettingError:
    return SettingError(field.removeprefix("eval: "), text, lead="eval: ")


@schema("eval:", error=PlanError, field_error=_setting)
class EvalPlan:
    """Data, questions, index, model and the method runs of one evaluation (constructor-as-config). The Python
    API's shorthands: paths as ``pathlib.Path``, a run as its method's name, the model as its name
    (``EvalPlan(data=Path("dev.jsonl"), out="runs/x", runs=["seakr", "ircot"], model="smollm2-135m")``)."""

    data: Annotated[PathText, BeforeValidator(_data)] | None = None
    out: PathText | None = None
    runs: Annotated[list[Annotated[RunSpec, Said("a RunSpec (or a method's name)", "RunSpecs (or methods' names)")]],
                    BeforeValidator(_runs)] = field(default_factory=lambda: [RunSpec("seakr")])
    layout: Literal[LAYOUTS] = "auto"
    index: Named | None = None  # None: pool the dataset's paragraphs (+ filler) into a cached index
    filler: Annotated[list[Named], BeforeValidator(_filler)] = field(default_factory=list)
    limit: Count | None = None
    every: Count | None = None
    shard: Annotated[str, AfterValidator(shard_spelled)] | None = None  # "I/N"
    seed: Seed = 42
    prompt_set: Named | None = None  # None: the dataset's family
    delta: Threshold | None = None  # SeaKR's threshold for every run that does not set its own
    resume: bool = False
    concurrency: Count = 1
    grid: bool = False  # each run writes to out/NAME (always so for several runs)
    # the file of its rows: an eval run's, or a study's own kind
    rows: Literal[tuple(n for n in ROW_FILES if n != SCORES)] = "results.jsonl"
    model: Annotated[ModelSpec, BeforeValidator(as_model_spec), Said("a ModelSpec or a model's name", "")] = field(
        default_factory=ModelSpec)

    @model_validator(mode="after")
    def _has_runs(self):
        if not self.runs:
            raise ValueError("eval: the plan has no runs")
        return self

    @model_validator(mode="after")
    def _filler_joins_the_pooled_index(self):
        """Filler joins the pooled index of the dataset's paragraphs, so beside a given index it could never be read."""
        if self.filler and self.index:
            raise ValueError(f"eval: filler adds passages to the pooled index of the dataset's paragraphs, and index "
                             f"{redact(self.index)} is given: add them to that index (seakr index build FILES --out "
                             f"{redact(self.index)} --add), or leave index out")
        return self

    def check(self, here: bool = True, run_labels: Sequence[str] = ()) -> "EvalPlan":
        """Every mistake that can be found without the model or the data's content; returns self. ``here``:
        the model loads on this machine (:meth:`ModelSpec.check`); ``run_labels``: how a refusal names each run
        (a grid's ``FILE: [[run]] #2 (name)``; default ``run 'name'``)."""
        absent = [name for name in ("data", "out") if not getattr(self, name)]
        if absent:  # the command line says its flags (plan_from_args); a Python caller reads the fields
            raise PlanError(f"eval: {' and '.join(absent)} {'are' if len(absent) > 1 else 'is'} required: "
                            "EvalPlan(data='questions.jsonl', out='runs/name', ...)")
        check_there("data", self.data, "eval: ")
        self._check_filler()
        names: set = set()
        context = self.model.context() if isinstance(self.model, ModelSpec) else None  # None: the model check says why
        for i, r in enumerate(self.runs):  # each run was held to its schema as it was made
            where = run_labels[i] if i < len(run_labels) else f"run {r.name!r}"
            check_unique(where, r.name, names)
            check_window(where, r, context)
        # a setting no run reads is said once, not refused: one loop of the same flags over several methods runs
        methods = ", ".join(sorted({r.method for r in self.runs}))
        if self.delta is not None and not any(r.method == "seakr" for r in self.runs):
            warn(f"eval: delta is not read: it is SeaKR's threshold, and no run of the plan is SeaKR ({methods})",
                 once=True)

        if (self.index or self.filler) and not any(METHODS[r.method].retrieves for r in self.runs):
            warn(f"eval: {'index' if self.index else 'filler'} is not read: it is searched only by methods that "
                 f"retrieve, and no run of the plan does ({methods})", once=True)
        check_settings(None, self.prompt_set)  # the seed: its field
        self.model.check(here)
        try:  # first: another program's folder is refused before anything is tried in it
            check_rows_home([self.out, *map(self.out_for, self.runs)], self.rows)
        except ValueError as e:
            raise PlanError(str(e)) from None
        check_output_dir(self.out)
        if self.index:  # a missing or damaged index folder, or a URL of another shape, fails here, not after the load
            open_engine(self.index)  # (a cluster's client connects at its first request; a corpus file is indexed)
        return self

    def _check_filler(self) -> None:
        """Each filler file must exist, be readable twice (its checksum names the pooled index, then its passages
        are read) and be a corpus whose format the pooling can tell (not a run's rows or an index's own file)."""
        for f in self.filler:  # a file or a folder of them, as `index build` reads (read_corpus)
            if not os.path.exists(f):
                raise _setting("filler", f": {f}: {'no file matches this pattern' if is_pattern(f) else missing(f)}")
            check_rereadable(f, "a filler corpus is read twice (its checksum names the pooled index, then its "
                             "passages)", lambda text: _setting("filler", ": " + text))
            for each in [f, *(corpus_files(f) if os.path.isdir(f) else [])]:  # a folder, then each file in it
                if own := seakr_own(each):  # a run's rows or an index's own file: seakr's records, not passages
                    built = "; give the corpus files it was built from (`seakr index info` lists them)"
                    raise _setting("filler", f": {each}: {own[1]}, not a corpus" + (built if own[0] == "index" else ""))
                try:
                    if os.path.isfile(each):
                        detect_format(each, None)
                except ValueError as e:
                    raise _setting("filler", f": {e}") from None

    def claim(self, sel: Selection, lm=None, known: Callable[[dict], dict] | None = None) -> list[RowLog]:
        """Each run's row log, claimed before the model loads (:class:`~seakr.eval.rowlog.RowLog`: the folder locked
        and checked, its rows read), and on ``--resume`` the part of each run's record known now held to the
        recorded one: what the caller knows of how it asks (``known``: the recorded config -> that part; a study's
        form and taps), then what the plan says (:meth:`known_record`). The logs begin once the model has settled
        the rest; the caller closes them."""
        logs: list[RowLog] = []
        try:
            for r in self.runs:
                logs.append(RowLog(self.out_for(r), self.rows, resume=self.resume, **row_kind(self.rows)))
                if known is not None and logs[-1].recorded:
                    logs[-1].check_known(known(logs[-1].recorded))
                logs[-1].check_known(self.known_record(r, sel, lm))
        except BaseException as e:
            for log in logs:
                log.close()
            if isinstance(e, ValueError) and not isinstance(e, PlanError):
                raise PlanError(str(e)) from None
            raise
        return logs

    def check_folders(self, sel: Selection, lm=None) -> None:
        """Every run's folder claimed and let go (:meth:`claim`): for a caller that runs the plan's runs later,
        one at a time (a fit's stages), so each folder is refused before any model loads."""
        for log in self.claim(sel, lm):
            log.close()

    def known_record(self, r: RunSpec, sel: Selection, lm=None) -> dict:
        """A run's ``config.json`` as far as the plan says it without the model's weights: the questions, the
        method with every option set to a value (typed as the method reads it; ``auto`` and unset ones settle
        with the model), the model (``lm``'s where one is given loaded; else the plan's name and any explicit
        precision, layer and state source) and the index by its checksum."""
        opts = self.options_for(r, sel.family)
        typed = dataclasses.asdict(METHODS[r.method].Config.from_dict(opts))
        m = self.model
        model = {"model": self.model_name() if lm is None else (lm.info() or {}).get("model")}
        if lm is None:  # a model given loaded computes as it was loaded, whatever the plan's flags say
            model |= {"precision": precision_name(m.precision) if m.precision != "auto" else None,
                      "state_layer": m.layer, "state_source": m.state_source}
        method = {"method": r.method, "config": {k: typed[k] for k, v in opts.items() if v is not None and v != "auto"},
                  "model": {k: v for k, v in model.items() if v is not None}}
        if self.index and not is_url(self.index):
            try:
                checksum = read_manifest(Path(self.index)).get("checksum")
            except (OSError, ValueError):  # not an index (yet): the open says what it is, as ever
                checksum = None
            method |= {"engine": {"checksum": checksum}} if checksum else {}
        return {**self.questions_record(), "method": method}

    def questions_record(self) -> dict:
        """What a run records of its questions beside its method (the data file, limit, shard, every): what a
        ``--resume`` must match."""
        return {**data_identity(self.data), "limit": self.limit, "shard": self.shard,
                **({"every": self.every} if self.every else {})}

    def model_name(self) -> str:
        """The model as a run records it (``config.json``'s ``method.model.model``): a registry name resolved."""
        return model_path(self.model.model or DEFAULT_MODEL)

    def out_for(self, run: RunSpec) -> str:
        return os.path.join(self.out, run.name) if self.grid or len(self.runs) > 1 else self.out

    def options_for(self, run: RunSpec, family: str) -> dict:
        return method_options(run.method, run.options, family, prompt_set=self.prompt_set, delta=self.delta,
                              seed=self.seed)

    def select(self) -> Selection:
        """Load the data file and pick this plan's questions."""
        full = load_dataset(self.data, self.layout)
        if not full:
            raise PlanError(f"{self.data}: no questions in this file")
        chosen = select_examples(full, self.limit, self.every)
        order_of = {ex.id: i for i, ex in enumerate(chosen)}
        if self.shard:
            i, n = parse_shard(self.shard)
            chosen = chosen[i::n]
        # the file's family, not the shard's first question's: a shard without questions has none to name it, and
        # every shard's config must agree where `merge` compares them
        return Selection(chosen, full, family_for(full[0].dataset), order_of)

    def ensure_index(self, sel: Selection, progress: bool = True) -> str:
        """The plan's index: the one given, else the dataset's paragraphs (+ filler) pooled once and cached
        (over the whole file, not only the selection: the other questions' distractors stay in). A plan whose
        methods never search (CoT) needs none: None, and its data need carry no paragraphs."""
        if self.index or not any(METHODS[r.method].retrieves for r in self.runs):
            return self.index

        check_poolable(self.data, sel.full)
        with progress_bar("pooling the dataset's paragraphs into an index", enabled=progress) as adv:
            self.index = pooled_index(self.data, sel.full, self.filler, progress=adv)
        return self.index

    def for_shard(self, i: int, n: int) -> "EvalPlan":
        """This plan's shard ``i`` of ``n``, writing to ``out/shard-i`` and resuming whatever is there."""
        return dataclasses.replace(self, shard=f"{i}/{n}", out=os.path.join(self.out, f"shard-{i}"), resume=True,
                                   runs=list(self.runs))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def run_plan(plan: EvalPlan, lm=None, *, progress: bool = True, say: Callable[[str], Any] = _say,
             checked: bool = False) -> list[dict]:
    """Run every method of ``plan`` over its questions (one loaded model shared by the runs); returns
    their summaries. ``say`` receives the effective config of each run before it starts. ``checked``: the door
    has just run :meth:`EvalPlan.check` (``seakr eval``), which is not done twice. Every run's folder is claimed
    before the model loads (:meth:`EvalPlan.claim`), so nothing about the folders is refused after it."""
    if not checked:
        plan.check()
    sel = plan.select()
    with ExitStack() as held:
        logs = [held.enter_context(log) for log in plan.claim(sel, lm)]
        if lm is None and plan.resume and (done := _answered_already(plan, sel, logs)) is not None:
            say(f"nothing left to answer: every run holds a row for each of its {len(sel.examples)} question(s); "
                "summaries from the rows, the model not loaded")
            for run, (_, method) in zip(plan.runs, done):
                say(f"config[{run.name}]: " + json.dumps(method))  # as the run recorded it
            return [summary_of_rows(plan.out_for(r), rows, r.name, sel.examples)
                    for r, (rows, _) in zip(plan.runs, done)]
        return _run_claimed(plan, sel, logs, lm, progress, say)


def _run_claimed(plan: EvalPlan, sel: Selection, logs: list[RowLog], lm, progress: bool, say) -> list[dict]:
    """The runs of ``plan`` into the row logs it claimed: the index, the model, then each method in turn."""
    index = plan.ensure_index(sel, progress)
    warn_unlabelled(plan.data, sel.examples)  # after every refusal of the input: those stay one line
    say(f"index: {redact(index) if index else 'none (no run searches)'}")
    lm = lm or plan.model.load()
    if plan.concurrency > 1:
        lm = BatchingModel(lm)
    extra = plan.questions_record()
    engine = open_engine(index) if index else None  # once for every run: opening checks each index file's digest
    sums = []
    for run, log in zip(plan.runs, logs):
        m = build_method(run.method, lm, engine, **plan.options_for(run, sel.family))
        warn_unread_tap(m, plan.model.tap_given())
        say(f"config[{run.name}]: " + json.dumps(m.describe()))
        with progress_bar(run.name, total=len(sel.examples), enabled=progress) as adv:
            sums.append(run_eval(m, sel.examples, plan.out_for(run), resume=plan.resume, name=run.name, progress=adv,
                                 concurrency=plan.concurrency, extra_config=extra, order_of=sel.order_of, log=log))
    return sums


def _answered_already(plan: EvalPlan, sel: Selection, logs: list[RowLog]) -> list[tuple[list[dict], dict]] | None:
    """Each run's rows and recorded method where a resumed plan has nothing left to answer, else None. Its
    method, options and questions were held to each run's record as the plan claimed its folder; a run recorded
    with another model goes the usual way (the model loads, and the resume says what differs)."""
    done = []
    for log in logs:
        cfg = recorded_with(log.recorded, plan.model_name())
        rows = log.finished(sel.examples) if cfg is not None else None
        if rows is None:
            return None
        done.append((rows, cfg["method"]))
    return done


def _filler_files(filler: list) -> list:
    """Filler with each quoted glob (``"wiki/*.jsonl"`` in a grid: no shell expands it) as the files it matches;
    one that matches none stays, for :meth:`EvalPlan.check` to name."""
    out = []
    for f in filler:
        try:
            out += pattern_files(f) if isinstance(f, str) and is_pattern(f) else [f]
        except ValueError:
            out.append(f)
    return out


__all__ = ["EvalPlan", "Selection", "run_plan"]

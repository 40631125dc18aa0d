"""An evaluation, planned: which data, which questions, which index, which methods with which options,
where the rows go. ``seakr eval``, its TOML run grids, the Ray launcher and Python users all build an
:class:`EvalPlan` and call :func:`run_plan`, so every door resolves the same defaults in one place.

    from seakr.eval.plan import EvalPlan, RunSpec, run_plan
    plan = EvalPlan(data="dev.jsonl", out="runs/x", runs=[RunSpec("seakr"), RunSpec("ircot")], limit=50)
    summaries = run_plan(plan)

Everything a plan can get wrong (an unknown method or option, a bad range, an output path that is a
file, a malformed grid) fails in :meth:`EvalPlan.check`, before the model loads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..search.base import redact, seakr_own
from ..textio import (check_rereadable, did_you_mean, is_pattern, missing, native, nearest_existing, no_place,
                      pattern_files, place_refused, said, unknown_key, user_path)
from .datasets import LAYOUTS, Example


class PlanError(ValueError):
    """A plan that cannot run: one line naming the file, the run and the field."""


class SettingError(PlanError):
    """A setting of the plan refused: which one (``field``, as the Python API spells it: ``model.precision``,
    ``shard``) and what is wrong with its value (``text``). Each door names it as its users write it:
    :meth:`spelled` with ``--precision`` on the command line, ``key 'precision':`` in a TOML grid; a Python
    caller reads the field. (One checker served all three and named flags a Python caller does not have.)"""

    def __init__(self, field: str, text: str):
        self.field, self.text = field, text
        super().__init__(self.spelled(field))

    @property
    def name(self) -> str:
        """The setting's own name, as the flags and a grid's keys are spelled (``model.state_source``: state_source)."""
        return self.field.rsplit(".", 1)[-1]

    def spelled(self, name: str) -> str:
        return name + ("" if self.text.startswith(":") else " ") + self.text

    def as_flag(self) -> str:
        return self.spelled("--" + self.name.replace("_", "-"))


def setting(field: str, check: Callable, *args, **kw):
    """``check(*args, **kw)`` whose refusal begins with the name it was given (``field``'s own): raised again as
    a :class:`SettingError` of ``field``, so each door can name the setting its own way."""
    name = field.rsplit(".", 1)[-1]
    try:
        return check(*args, **kw)
    except (TypeError, ValueError) as e:
        text = str(e)
        if isinstance(e, SettingError) or not re.match(rf"{re.escape(name)}[ :]", text):
            raise
        raise SettingError(field, text[len(name):].lstrip(" ")) from None


#: The plan's settings that count something, and the least each may be (the flags' and the grid's rule).
PLAN_LEAST = {"limit": 1, "every": 1, "concurrency": 1}


@dataclass
class ModelSpec:
    """Which model, how it computes and where its states are read (the ``--model/--precision/--device/--threads/
    --layer/--state-source`` flags)."""

    model: str | None = None  # registry name, .gguf file or HF folder; None: the default model
    precision: str = "auto"
    device: str = "cpu"
    threads: int | None = None
    layer: int | None = None  # 0-based state layer; None: L/2 - 1
    state_source: str = "mlp"  # the layer's feed-forward output (the paper's), or its residual stream ("residual")

    DEVICE = re.compile(r"(cpu|cuda|mps)(:\d+)?|auto")  # cpu:0 is cpu (device_name); cpu:1 told there is one

    def __post_init__(self):
        self.model = user_path(self.model)
        self.threads, self.layer = native(self.threads), native(self.layer)
        from ..models.machine import device_name

        self.device = device_name(self.device)

    def tap_given(self) -> list[str]:
        """The tap flags given (``--layer 3``, ``--state-source residual``): what a method that reads no hidden state
        is told it does not read (:func:`~seakr.methods.base.warn_unread_tap`)."""
        return [*([f"--layer {self.layer}"] if self.layer is not None else []),
                *([f"--state-source {self.state_source}"] if self.state_source != "mlp" else [])]

    def check(self, here: bool = True) -> None:
        """The mistakes that would otherwise surface after a minute of loading, each a :class:`SettingError` of
        ``model.FIELD``. ``here``: the model loads on this machine (not on a remote Ray cluster's workers, whose
        CPUs bound the threads there)."""
        from ..models import DEFAULT_MODEL, model_path
        from ..models.machine import (PRECISIONS, STATE_SOURCES, check_device, check_layer, check_threads, default_threads,
                                      precision_name)
        from ..models.registry import model_depth, model_kind

        if self.model is not None:  # [] or 0 was the default model, and so was "" (read as not given)
            setting("model", model_path, self.model)
        try:
            model_kind(self.model or DEFAULT_MODEL)
        except ValueError as e:
            raise PlanError(str(e)) from None
        if not isinstance(self.precision, str) or precision_name(self.precision) not in PRECISIONS:
            raise SettingError("model.precision", f"{self.precision!r}: expected {', '.join(PRECISIONS)} "
                                                  "(or fp32, bf16, fp16)")
        if self.threads is not None:  # beyond this machine's CPUs only contends; a remote cluster's bound its own
            setting("model.threads", check_threads, self.threads, "threads", bounded=here)
        elif here:  # SEAKR_THREADS, read as the setting is
            try:
                default_threads()
            except ValueError as e:
                raise PlanError(str(e)) from None
        if self.state_source not in STATE_SOURCES:
            raise SettingError("model.state_source", f"{self.state_source!r}: expected {' or '.join(STATE_SOURCES)}")
        if not isinstance(self.device, str) or not self.DEVICE.fullmatch(self.device):
            raise SettingError("model.device", f"{self.device!r}: expected cpu, cuda, cuda:N (N a GPU number), mps or auto")
        setting("model.device", check_device, self.device)  # one this machine lacks: now, not at the first load
        if self.layer is not None:  # against the depth where it is known without the weights (any local model)
            setting("model.layer", check_layer, self.layer, "layer", model_depth(model_path(self.model or DEFAULT_MODEL)))

    def context(self) -> int | None:
        """The model's context window in tokens where it is known without the weights (a packaged model, a local
        file or folder, a cached hub id); None otherwise, or for a model name that :meth:`check` refuses."""
        from ..models import DEFAULT_MODEL, model_path
        from ..models.registry import model_context

        try:
            return model_context(DEFAULT_MODEL if self.model is None else model_path(self.model))
        except (TypeError, ValueError):
            return None

    def load(self):
        from ..models import DEFAULT_MODEL, load_model

        return load_model(self.model or DEFAULT_MODEL, precision=self.precision, device=self.device,
                          threads=self.threads, state_layer=self.layer, state_source=self.state_source)


@dataclass
class RunSpec:
    """One method run of a plan: the method, its options, and its name (the folder its rows go to;
    default: the method's name)."""

    method: str = "seakr"
    options: dict = field(default_factory=dict)
    name: str | None = None

    def __post_init__(self):
        if self.name is None:  # only when not given: an empty or false name is refused with the plan, not replaced
            self.name = self.method
        self.options = {} if self.options is None else self.options


RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_run(where: str, method: str, options: dict, context: int | None = None) -> None:
    """A run's method and options, checked before any model loads: a typo in a grid's last run must not
    surface after the first runs have taken an hour. ``context``: the model's window in tokens, where
    :meth:`ModelSpec.context` knows it, which a generation must leave room in (the method checks again)."""
    from ..methods import METHODS

    if not isinstance(method, str) or method not in METHODS:  # a list or table was "unhashable type"
        raise PlanError(f"{where}: unknown method {method!r}{did_you_mean(method, METHODS)}; choose from "
                        f"{', '.join(METHODS)}")
    if not isinstance(options, dict):
        raise PlanError(f"{where}: options must be a dict of option names and values, not {type(options).__name__}")
    from ..methods.base import check_lengths

    try:
        check_lengths(METHODS[method].Config.from_dict(options), context)  # was after the load
    except (TypeError, ValueError) as e:
        raise PlanError(f"{where}: {e}") from None


def method_options(method: str, options: dict, family: str, *, prompt_set: str | None = None,
                   delta: float | None = None, seed: int = 42) -> dict:
    """A run's effective options on one dataset family: what the run sets wins; then the plan-wide
    prompt set and delta; then the family's defaults (its own demonstrations; SeaKR answers simple QA
    (NQ, TriviaQA, SQuAD) with one retrieval, the paper's simple mode)."""
    opts = dict(options)
    opts.setdefault("prompt_set", prompt_set or family)
    if method == "seakr" and family == "simpleqa":
        opts.setdefault("mode", "simple")
    if method == "seakr" and delta is not None:
        opts.setdefault("delta", delta)
    opts.setdefault("seed", seed)
    return opts


def select_examples(examples: Sequence[Example], limit: int | None = None, every: int | None = None) -> list[Example]:
    """Every N-th question (``every``; spreads a subset over a file ordered by topic, as SQuAD's
    articles are), then the first ``limit`` of those."""
    return list(examples[:: every or 1][: limit or None])


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N): this process runs questions I, I+N, I+2N, ... of the (limited) list. Digits only
    (``int`` also took " 0/+2" and Arabic-Indic digits, which runs then recorded as given)."""
    try:
        if not re.fullmatch(r"\s*[0-9]+\s*/\s*[0-9]+\s*", text):
            raise ValueError(text)
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise SettingError("shard", f"{text!r}: expected I/N, e.g. 0/4") from None
    if n < 1 or not 0 <= i < n:
        raise SettingError("shard", f"{text!r}: need 0 <= I < N")
    return i, n


def check_run_name(where: str, name, names: set) -> None:
    """A run's name becomes its folder: a plain file name, unique within the plan (added to ``names``),
    also ignoring case: on macOS and Windows "X" and "x" are one folder, and the two runs' rows would mix."""
    if not isinstance(name, str) or not RUN_NAME.fullmatch(name) or name in (".", ".."):
        raise PlanError(f"{where}: name {name!r} must be a file name of ASCII letters, digits, '.', '_' and '-' "
                        "(no '/', no accented letters)")
    from .runner import ROW_FILES

    # a run folder named like a run's own files ("results.jsonl") made `report` and `compare` of the grid's
    # folder read it as a file ("Is a directory")
    if name.casefold() in {n.casefold() for n in ("config.json", "summary.json", "summary.md", "states", *ROW_FILES)}:
        raise PlanError(f"{where}: name {name!r} is the name of a file a run keeps its record in; name the run "
                        "otherwise")
    same = next((n for n in names if n.casefold() == name.casefold()), None)
    if same == name:
        raise PlanError(f"{where}: a second run named {name!r} (each run writes to its own folder)")
    if same is not None:
        raise PlanError(f"{where}: run {name!r} differs from run {same!r} only in case, one folder on macOS and "
                        "Windows (each run writes to its own folder)")
    names.add(name)


def check_settings(seed: int | None, prompt_set: str | None) -> None:
    """The seed's range and a prompt-set file (a missing or malformed one: one line naming it)."""
    if seed is not None and not 0 <= seed < 2 ** 32:
        raise SettingError("seed", f"{said(seed)}: expected 0..{2 ** 32 - 1}")
    if prompt_set:
        from ..prompts import PromptSet

        PromptSet.load(prompt_set)


def check_output_dir(path: str, flag: str = "--out") -> None:
    if not path.strip():
        raise PlanError(f"{flag}: an empty path; name the folder")
    if os.path.islink(path) and not os.path.exists(path):
        raise PlanError(f"{flag} {path}: a symbolic link to nothing ({os.readlink(path)}); remove it or choose another")
    if os.path.exists(path) and not os.path.isdir(path):
        raise PlanError(f"{flag} {path}: exists and is not a directory")
    if not os.path.exists(path):  # made by the run's first write: a run refused later leaves no empty folder
        where = nearest_existing(path)
        if no_place(where) is None and not os.access(where, os.W_OK | os.X_OK):  # no place: _try_a_folder says why
            raise PlanError(f"{flag} {path}: cannot create the folder ({where} is not writable)")
        _try_a_folder(path, flag, where)
        return
    if not os.access(path, os.W_OK):
        raise PlanError(f"{flag} {path}: not writable")
    from .runner import check_free, check_not_foreign

    try:
        check_not_foreign(Path(path))  # another program's folder, a model, an index: now, not after the load
        check_free(path)
    except ValueError as e:
        raise PlanError(str(e)) from None
    _try_a_folder(path, flag, path)  # last: nothing is made, even for a moment, in a folder refused above


def _try_a_folder(path: str, flag: str, where: str) -> None:
    """``--out /proc/x`` passed the permission bits, loaded the model, then failed with "[Errno 2] No such file
    or directory: '/proc/x'"."""
    why = place_refused(where)
    if why:
        doing = "cannot write into the folder" if where == path else "cannot create the folder"
        raise PlanError(f"{flag} {path}: {doing} ({why})")


def check_resume_rows(path: str) -> None:
    """The rows a ``--resume`` continues, read now: a row seakr did not write (a hand edit, another tool's
    file) is named by file, line and field before the model loads, not after it (eval) or after the last
    question (a study's summary)."""
    from .runner import SCORES, check_row, read_results
    from .studies import STUDY_ROWS, study_row_check

    for name, check in {"results.jsonl": check_row, SCORES: check_row, **{n: study_row_check(n) for n in STUDY_ROWS}}.items():
        if os.path.isfile(os.path.join(path, name)):
            try:
                read_results(Path(path) / name, check=check)
            except ValueError as e:
                raise PlanError(str(e)) from None


@dataclass
class Selection:
    """The questions a plan answers, with what the run needs to know about them."""

    examples: list[Example]  # after --every, --limit and --shard
    full: list[Example]  # the whole file: its paragraphs are the pooled index
    family: str  # prompt family (hotpotqa | 2wikimultihopqa | simpleqa)
    order_of: dict  # id -> place in the unsharded selection (shards keep the run's order)


@dataclass
class EvalPlan:
    """Data, questions, index, model and the method runs of one evaluation (constructor-as-config)."""

    data: str | None = None
    out: str | None = None
    runs: list[RunSpec] = field(default_factory=lambda: [RunSpec("seakr")])
    layout: str = "auto"
    index: str | None = None  # None: pool the dataset's paragraphs (+ filler) into a cached index
    filler: list[str] = field(default_factory=list)
    limit: int | None = None
    every: int | None = None
    shard: str | None = None  # "I/N"
    seed: int = 42
    prompt_set: str | None = None  # None: the dataset's family
    delta: float | None = None  # SeaKR's threshold for every run that does not set its own
    resume: bool = False
    concurrency: int = 1
    grid: bool = False  # each run writes to out/NAME (always so for several runs)
    model: ModelSpec = field(default_factory=ModelSpec)

    def __post_init__(self):
        """The Python API's shorthands: paths as ``pathlib.Path``, a run as its method's name, the model as its
        name (``EvalPlan(data=Path("dev.jsonl"), out="runs/x", runs=["seakr", "ircot"], model="smollm2-135m")``)."""
        self.data, self.out, self.index, self.prompt_set = map(user_path, (self.data, self.out, self.index, self.prompt_set))
        for name in (*PLAN_LEAST, "seed", "delta"):  # np.int64(50) from a sweep: Python's 50
            setattr(self, name, native(getattr(self, name)))
        filler, runs = self.filler, self.runs  # one of each given alone, not in a list, is taken as a list of one
        filler = [] if filler is None else [filler] if isinstance(filler, (str, os.PathLike)) else filler
        self.filler = _filler_files([user_path(f) for f in filler]) if isinstance(filler, (list, tuple)) else filler  # else check() names it
        runs = [runs] if isinstance(runs, (str, RunSpec)) else runs
        self.runs = [RunSpec(r) if isinstance(r, str) else r for r in runs] if isinstance(runs, (list, tuple)) else runs
        if self.model is None or isinstance(self.model, (str, os.PathLike)):
            self.model = ModelSpec(user_path(self.model))

    def _check_fields(self) -> None:
        """Each field's type and emptiness, and the layout's name: the Python API's mistakes, named by field."""
        if isinstance(self.data, (list, tuple, dict)) or hasattr(self.data, "columns"):  # as an index may be given
            raise PlanError(f"eval: data is a file's path, not a {type(self.data).__name__} of questions: a run "
                            "records where its questions came from, to resume; write them as JSON lines, one "
                            '{"id", "question", "answer"} a line')
        missing = [name for name in ("data", "out") if not getattr(self, name)]
        if missing:  # the command line says its flags (plan_from_args); a Python caller reads the fields
            raise PlanError(f"eval: {' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} required: "
                            "EvalPlan(data='questions.jsonl', out='runs/name', ...)")
        for name in ("data", "out", "index", "layout", "shard", "prompt_set"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise PlanError(f"eval: {name} must be a path or text, not {type(getattr(self, name)).__name__}")
        if not isinstance(self.filler, list) or not all(isinstance(f, str) for f in self.filler):
            raise PlanError(f"eval: filler must be a corpus file's path or a list of them, not {self.filler!r}")
        for name in ("resume", "grid"):  # resume="no" resumed
            if not isinstance(getattr(self, name), bool):
                raise PlanError(f"eval: {name} must be True or False, not {getattr(self, name)!r}")
        for name, v in (("index", self.index), ("prompt_set", self.prompt_set), *(("filler", f) for f in self.filler)):
            if isinstance(v, str) and not v.strip():  # read as "not given": the pooled index, the default set
                raise PlanError(f"eval: {name} is empty; name it, or leave it out for its default")
        if self.layout not in LAYOUTS:
            raise PlanError(f"eval: unknown dataset layout {self.layout!r}{did_you_mean(self.layout, LAYOUTS)}; choose "
                            f"from {', '.join(LAYOUTS)}")

    def check(self, here: bool = True) -> "EvalPlan":
        """Every mistake that can be found without the model or the data's content; returns self. ``here``:
        the model loads on this machine (:meth:`ModelSpec.check`)."""
        self._check_fields()
        self._check_filler()
        self._check_numbers()
        if not isinstance(self.runs, list):
            raise PlanError(f"eval: runs must be a list of RunSpec or methods' names, not {self.runs!r}")
        if not self.runs:
            raise PlanError("eval: the plan has no runs")
        names: set = set()
        context = self.model.context() if isinstance(self.model, ModelSpec) else None  # None: the model check says why
        for r in self.runs:
            if not isinstance(r, RunSpec):
                raise PlanError(f"eval: runs hold RunSpec (or a method's name), not {type(r).__name__}")
            if not isinstance(r.method, str):  # first: a run's name defaults to its method
                check_run("run", r.method, r.options)
            check_run_name("run", r.name, names)
            check_run(f"run {r.name!r}", r.method, r.options, context)  # the window, where known without the weights
        if self.delta is not None and not any(r.method == "seakr" for r in self.runs):  # it was ignored silently
            raise PlanError(f"eval: delta is SeaKR's threshold, and no run of the plan is SeaKR "
                            f"({', '.join(sorted({r.method for r in self.runs}))})")
        from ..methods import METHODS

        if (self.index or self.filler) and not any(METHODS[r.method].retrieves for r in self.runs):  # taken, unread
            raise PlanError(f"eval: {'index' if self.index else 'filler'} is searched only by methods that retrieve, "
                            f"and no run of the plan does ({', '.join(sorted({r.method for r in self.runs}))}); "
                            "leave it out")
        if self.shard is not None:  # recorded as I/N: merge and --resume compare it ("00/02" was "another split")
            self.shard = "{}/{}".format(*parse_shard(self.shard))
        check_settings(self.seed, self.prompt_set)
        if not isinstance(self.model, ModelSpec):
            raise PlanError(f"eval: model must be a ModelSpec or a model's name, not {type(self.model).__name__}")
        self.model.check(here)
        setting("out", check_output_dir, self.out, "out")
        if self.resume:
            for r in self.runs:
                check_resume_rows(self.out_for(r))
        if self.index:  # a missing or damaged index folder, or a URL of another shape, fails here, not after the load
            from ..search import open_engine

            open_engine(self.index)  # (a cluster's client connects at its first request; a corpus file is indexed)
        return self

    def _check_filler(self) -> None:
        """Filler joins the pooled index of the dataset's paragraphs; beside a given index it was never read
        (``--filler /nonexistent --index IDX`` ran without a word), and a missing file failed only once the
        questions had been read."""
        if self.filler and self.index:
            raise PlanError(f"eval: filler adds passages to the pooled index of the dataset's paragraphs, and index "
                            f"{redact(self.index)} is given: add them to that index (seakr index build FILES --out "
                            f"{redact(self.index)} --add), or leave index out")
        for f in self.filler:  # a file or a folder of them, as `index build` reads (read_corpus)
            if not os.path.exists(f):
                raise PlanError(f"eval: filler {f}: {'no file matches this pattern' if is_pattern(f) else missing(f)}")
            check_rereadable(f, "a filler corpus is read twice (its checksum names the pooled index, then its "
                             "passages)", PlanError, f"eval: filler {f}")
            if own := seakr_own(f):  # a run's rows were "missing field 'text'", an index's file "cannot guess the format"
                raise PlanError(f"eval: filler {f}: {own[1]}, not a corpus" + (
                    "; give the corpus files it was built from (`seakr index info` lists them)" if own[0] == "index" else ""))

    def _check_numbers(self) -> None:
        """limit, every, concurrency, seed and delta as the command line's flags take them (the Python API
        passed 1.5 or "5" through to a slice or a thread pool)."""
        for name in (*PLAN_LEAST, "seed"):
            v = getattr(self, name)
            if v is None and name in ("limit", "every"):  # optional
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < PLAN_LEAST.get(name, v):  # the seed's range: below
                kind = "a whole number" if name == "seed" else "a positive whole number"
                raise PlanError(f"eval: {name} must be {kind}, not {said(v)}")
        d = self.delta
        if isinstance(d, int) and not isinstance(d, bool) and abs(d) >= 2 ** 1024:  # float(d) overflowed
            raise PlanError(f"eval: delta {said(d)} is past a float's range")
        if d is not None and (isinstance(d, bool) or not isinstance(d, (int, float)) or math.isnan(d)):
            raise PlanError(f"eval: delta must be a number, not {said(d)}")

    def check_resumed_configs(self, sel: Selection, lm=None) -> None:
        """What ``--resume`` compares once the model has loaded (:class:`~seakr.eval.runner.RowLog`), compared
        before, where the plan alone says it: the data file, the method and every option the run sets to a
        value (``auto`` and unset ones settle with the model). A resume with ``max_steps=2`` over a run of
        ``max_steps=1`` loaded the model first (10.8 s with the 1.5B)."""
        from ..methods import METHODS
        from .runner import _comparable, _with_added_options, check_same_method, check_same_questions, read_run_config

        questions = self.questions_record()
        for r in self.runs if self.resume else ():
            old = read_run_config(self.out_for(r), required=False)
            if not isinstance(old.get("method"), dict):
                continue
            recorded, opts = _with_added_options(old["method"]), self.options_for(r, sel.family)
            rec = recorded.get("config") if isinstance(recorded.get("config"), dict) else {}
            now = dataclasses.asdict(METHODS[r.method].Config.from_dict(opts))  # typed as the method will
            diff = [] if recorded.get("method") == r.method else [("method", recorded.get("method"), r.method)]
            diff += [(f"config.{k}", rec[k], now[k]) for k, v in opts.items()
                     if v is not None and v != "auto" and k in rec and _comparable(rec[k]) != _comparable(now[k])]
            diff += self._setup_diff(recorded, lm)
            try:  # the questions first: another data file changes the family's options too
                check_same_questions(old, questions, self.out_for(r))
                check_same_method(diff, self.out_for(r))
            except ValueError as e:
                raise PlanError(str(e)) from None

    def _setup_diff(self, recorded: dict, lm=None) -> list[tuple[str, Any, Any]]:
        """How a resume's model and index differ from what the run recorded, where the plan alone says it: the
        model (``lm``'s, where one is given loaded), an explicit precision, layer or state source, and the index by
        its checksum (a finished run "resumed" with another --precision, --layer or --index printed the old summary
        without a word; another model was found only once it had loaded)."""
        from ..models.machine import precision_name
        from ..search.base import is_url
        from ..search.generations import read_manifest

        model = recorded.get("model") if isinstance(recorded.get("model"), dict) else {}
        m = self.model
        now = {"model.model": self.model_name() if lm is None else (lm.info() or {}).get("model")}
        if lm is None:  # a model given loaded computes as it was loaded, whatever the plan's flags say
            now |= {"model.precision": precision_name(m.precision) if m.precision != "auto" else None,
                    "model.state_layer": m.layer, "model.state_source": m.state_source}
        diff = [(k, model.get(k.split(".")[1]), v) for k, v in now.items()
                if v is not None and k.split(".")[1] in model and model[k.split(".")[1]] != v]
        engine = recorded.get("engine") if isinstance(recorded.get("engine"), dict) else {}
        if self.index and engine.get("checksum") and not is_url(self.index):
            try:
                checksum = read_manifest(Path(self.index)).get("checksum")
            except (OSError, ValueError):  # not an index (yet): the open says what it is, as ever
                checksum = None
            if checksum and checksum != engine["checksum"]:
                diff.append(("engine.checksum", engine["checksum"][:16], checksum[:16]))
        return diff

    def questions_record(self) -> dict:
        """What a run records of its questions beside its method (the data file, limit, shard, every): what a
        ``--resume`` must match."""
        from .runner import data_identity

        return {**data_identity(self.data), "limit": self.limit, "shard": self.shard,
                **({"every": self.every} if self.every else {})}

    def model_name(self) -> str:
        """The model as a run records it (``config.json``'s ``method.model.model``): a registry name resolved."""
        from ..models import DEFAULT_MODEL, model_path

        return model_path(self.model.model or DEFAULT_MODEL)

    def out_for(self, run: RunSpec) -> str:
        return os.path.join(self.out, run.name) if self.grid or len(self.runs) > 1 else self.out

    def options_for(self, run: RunSpec, family: str) -> dict:
        return method_options(run.method, run.options, family, prompt_set=self.prompt_set, delta=self.delta, seed=self.seed)

    def select(self) -> Selection:
        """Load the data file and pick this plan's questions."""
        from ..prompts import family_for
        from .datasets import load_dataset

        full = load_dataset(self.data, self.layout)
        if not full:
            raise PlanError(f"{self.data}: no questions in this file")
        chosen = select_examples(full, self.limit, self.every)
        order_of = {ex.id: i for i, ex in enumerate(chosen)}
        if self.shard:
            i, n = parse_shard(self.shard)
            chosen = chosen[i::n]
        # the file's family, not the shard's first question's: a shard without questions took the file's name
        # ("bom.jsonl" -> hotpotqa) and its config then differed from its siblings' where `merge` compares them
        return Selection(chosen, full, family_for(full[0].dataset), order_of)

    def ensure_index(self, sel: Selection, progress: bool = True) -> str:
        """The plan's index: the one given, else the dataset's paragraphs (+ filler) pooled once and cached
        (over the whole file, not only the selection: the other questions' distractors stay in). A plan whose
        methods never search (CoT) needs none: None, and its data need carry no paragraphs."""
        from ..methods import METHODS

        if self.index or not any(METHODS[r.method].retrieves for r in self.runs):
            return self.index
        from ..progress import progress_bar
        from .corpus import check_poolable, pooled_index

        check_poolable(self.data, sel.full)
        with progress_bar("pooling the dataset's paragraphs into an index", enabled=progress) as adv:
            self.index = pooled_index(self.data, sel.full, self.filler, progress=adv)
        return self.index

    def run_config(self, run: RunSpec, family: str) -> dict:
        """What a run's method is built from: the name, the method and its effective options."""
        return {"name": run.name, "method": run.method, "options": self.options_for(run, family)}

    def for_shard(self, i: int, n: int) -> "EvalPlan":
        """This plan's shard ``i`` of ``n``, writing to ``out/shard-i`` and resuming whatever is there."""
        return dataclasses.replace(self, shard=f"{i}/{n}", out=os.path.join(self.out, f"shard-{i}"), resume=True,
                                   runs=list(self.runs))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def run_plan(plan: EvalPlan, lm=None, *, progress: bool = True, say: Callable[[str], Any] = _say) -> list[dict]:
    """Run every method of ``plan`` over its questions (one loaded model shared by the runs); returns
    their summaries. ``say`` receives the effective config of each run before it starts."""
    from ..methods import build_method
    from ..methods.base import warn_unread_tap
    from ..progress import progress_bar
    from ..search import open_engine
    from .datasets import warn_unlabelled
    from .runner import run_eval, summary_of_rows

    plan.check()
    sel = plan.select()
    plan.check_resumed_configs(sel, lm)
    if lm is None and plan.resume and (done := _answered_already(plan, sel)) is not None:
        say(f"nothing left to answer: every run holds a row for each of its {len(sel.examples)} question(s); "
            "summaries from the rows, the model not loaded")
        for run, (_, method) in zip(plan.runs, done):
            say(f"config[{run.name}]: " + json.dumps(method))  # as the run recorded it
        return [summary_of_rows(plan.out_for(r), rows, r.name, sel.examples) for r, (rows, _) in zip(plan.runs, done)]
    index = plan.ensure_index(sel, progress)
    warn_unlabelled(plan.data, sel.examples)  # after every refusal of the input: those stay one line
    say(f"index: {redact(index) if index else 'none (no run searches)'}")
    lm = lm or plan.model.load()
    if plan.concurrency > 1:
        from ..models.batching import BatchingModel

        lm = BatchingModel(lm)
    extra = plan.questions_record()
    sums = []
    for run in plan.runs:
        m = build_method(run.method, lm, open_engine(index) if index else None, **plan.options_for(run, sel.family))
        warn_unread_tap(m, plan.model.tap_given())
        say(f"config[{run.name}]: " + json.dumps(m.describe()))
        with progress_bar(run.name, total=len(sel.examples), enabled=progress) as adv:
            sums.append(run_eval(m, sel.examples, plan.out_for(run), resume=plan.resume, name=run.name, progress=adv,
                                 concurrency=plan.concurrency, extra_config=extra, order_of=sel.order_of))
    return sums


def _answered_already(plan: EvalPlan, sel: Selection) -> list[tuple[list[dict], dict]] | None:
    """Each run's rows and recorded method where a resumed plan has nothing left to answer, else None. Its
    method, options and questions were checked against each run's record (:meth:`EvalPlan.check_resumed_configs`);
    a run recorded with another model goes the usual way (the model loads, and the resume says what differs)."""
    from .runner import finished_rows, recorded_with

    done = []
    for r in plan.runs:
        cfg = recorded_with(plan.out_for(r), plan.model_name())
        rows = finished_rows(plan.out_for(r), sel.examples) if cfg is not None else None
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

    from .. import textio

    try:
        conf = tomllib.loads(textio.read_text(path, PlanError))
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{path}: {e}") from None
    except RecursionError:  # `a = [[[[...` thousands deep: a traceback from inside the parser
        raise PlanError(f"{path}: nested too deeply to read (arrays or tables inside one another past the "
                        "parser's limit)") from None
    except ValueError as e:  # Python's bound on int(str): "use sys.set_int_max_str_digits()", naming no file
        if (why := textio.too_many_digits(e)) is None:
            raise  # the file's own refusal (missing, not UTF-8), already named
        raise PlanError(f"{path}: {why}") from None
    _grid_top(path, conf)
    if "run" in conf and not conf["run"]:  # it ran the flags' method (SeaKR by default) as if no key were there
        raise PlanError(f"{path}: 'run' lists no runs; add a [[run]] table with a method, or leave the key out")
    names: set = set()
    runs = [_grid_run(f"{path}: [[run]] #{i + 1}", r, names) for i, r in enumerate(conf.get("run", []))]
    return {k: v for k, v in conf.items() if k != "run"}, runs


__all__ = ["EvalPlan", "ModelSpec", "PlanError", "RunSpec", "Selection", "check_grid_paths", "check_run", "method_options",
           "read_grid", "run_plan", "select_examples"]

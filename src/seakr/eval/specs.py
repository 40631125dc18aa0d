"""The parts of an evaluation plan and the checks each part's settings pass before any model loads: the model,
the runs and their methods' options, the selection of questions, the shard and the output folder."""

from __future__ import annotations

import os
import re
from dataclasses import field
from typing import Annotated, Any, Sequence

from pydantic import AfterValidator, BeforeValidator, Strict, model_validator

from ..common.schema import PathText, Positive, Said, Seed, check_type, schema, unknown_keys
from ..models.machine import default_threads, layer_problem, missing_device, too_many_threads
from ..models.options import Device, Layer, Precision, StateSource
from ..common.files import is_pattern, missing
from ..common.writing import nearest_existing, no_place, place_refused
from .example import Example
from ..methods import METHODS, method_name
from ..methods.config import check_lengths
from ..common.runs import ROW_FILES
from .folders import check_free
from ..models import DEFAULT_MODEL, load_model, model_path
from ..models.figures import model_context, model_depth
from ..models.registry import model_kind
from ..prompts import PromptSet


class PlanError(ValueError):
    """A plan that cannot run: one line naming the file, the run and the field."""


class SettingError(PlanError):
    """A setting of the plan refused: which one (``field``, as the Python API spells it: ``model.precision``,
    ``shard``) and what is wrong with its value (``text``). Each door names it as its users write it:
    :meth:`spelled` with ``--precision`` on the command line, ``key 'precision':`` in a TOML grid; a Python
    caller reads the field. The value quoted follows the name without a colon (``--device 'gpu': expected ...``),
    words do after one (``--layer: expected ...``), whichever check refused it."""

    def __init__(self, field: str, text: str, lead: str = ""):
        self.field, self.text = field, text.removeprefix(": ") if text.startswith(": '") else text
        super().__init__(lead + self.spelled(field))  # lead: the object it belongs to (``eval: ``), for Python

    @property
    def name(self) -> str:
        """The setting's own name, as the flags and a grid's keys are spelled (``model.state_source``: state_source)."""
        return self.field.rsplit(".", 1)[-1]

    def spelled(self, name: str) -> str:
        return name + ("" if self.text.startswith(":") else " ") + self.text

    def as_flag(self) -> str:
        return self.spelled("--" + self.name.replace("_", "-"))


def _a_model(v: str) -> str:
    if not v.strip():  # else read as the default model, without a word
        raise ValueError("empty; name a model, or leave it out for the default")
    return v


@schema("model.", error=PlanError, field_error=SettingError)
class ModelSpec:
    """Which model, how it computes and where its states are read (the ``--model/--precision/--device/--threads/
    --layer/--state-source`` flags)."""

    model: Annotated[PathText, AfterValidator(_a_model),  # None: the default
                     Said("a registry name, a .gguf file or a model folder", "")] | None = None
    precision: Precision = "auto"
    device: Device = "cpu"
    threads: Positive | None = None  # bounded by this machine's CPUs where the model loads here (check)
    layer: Layer | None = None  # 0-based state layer; None: L/2 - 1
    state_source: StateSource = "mlp"  # the layer's feed-forward output (the paper's), or its residual stream

    def tap_given(self) -> list[str]:
        """The tap flags given (``--layer 3``, ``--state-source residual``): what a method that reads no hidden state
        is told it does not read (:func:`~seakr.methods.base.warn_unread_tap`)."""
        return [*([f"--layer {self.layer}"] if self.layer is not None else []),
                *([f"--state-source {self.state_source}"] if self.state_source != "mlp" else [])]

    def check(self, here: bool = True) -> None:
        """The mistakes that would otherwise surface after a minute of loading, each a :class:`SettingError` of
        ``model.FIELD``. ``here``: the model loads on this machine (not on a remote Ray cluster's workers, whose
        CPUs bound the threads there)."""
        try:
            model_kind(self.model or DEFAULT_MODEL)
        except ValueError as e:
            raise PlanError(str(e)) from None
        # beyond this machine's CPUs threads only contend; a remote cluster's workers bound them by their own
        if here and self.threads is not None and (why := too_many_threads(self.threads)):
            raise SettingError("model.threads", f"{self.threads}: {why}")
        if here and self.threads is None:  # SEAKR_THREADS, read as the setting is
            try:
                default_threads()
            except ValueError as e:
                raise PlanError(str(e)) from None
        if why := missing_device(self.device):  # one this machine lacks: now, not at the first load
            raise SettingError("model.device", f"{self.device!r}: {why}")
        if self.layer is not None:  # against the depth where it is known without the weights (any local model)
            if why := layer_problem(self.layer, model_depth(model_path(self.model or DEFAULT_MODEL))):
                raise SettingError("model.layer", f"{self.layer}: {why}")

    def context(self) -> int | None:
        """The model's context window in tokens where it is known without the weights (a packaged model, a local
        file or folder, a cached hub id); None otherwise, or for a model name that :meth:`check` refuses."""
        try:
            return model_context(DEFAULT_MODEL if self.model is None else model_path(self.model))
        except (TypeError, ValueError):
            return None

    def load(self):
        return load_model(self.model or DEFAULT_MODEL, precision=self.precision, device=self.device,
                          threads=self.threads, state_layer=self.layer, state_source=self.state_source)


def _options(v):
    return {} if v is None else v  # RunSpec("cot", None): no options


RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: The names of the files a run keeps its record in, as a case-blind file system sees them: a run folder so named
#: would be read as the file by ``report`` and ``compare``.
RECORD_FILES = frozenset(n.casefold() for n in ("config.json", "summary.json", "summary.md", "states", *ROW_FILES))


def _run_name(v: str) -> str:
    """A run's name is its folder: a plain file name, not one of a run's own files."""
    if not RUN_NAME.fullmatch(v) or v in (".", ".."):
        raise ValueError(f"{v!r} must be a file name of ASCII letters, digits, '.', '_' and '-' (no '/', no "
                         "accented letters)")
    if v.casefold() in RECORD_FILES:
        raise ValueError(f"{v!r} is the name of a file a run keeps its record in; name the run otherwise")
    return v


@schema("field", unknown_keys, strict=False, error=PlanError)
class RunSpec:
    """One method run of a plan: the method, its options, and its name (the folder its rows go to;
    default: the method's name). A grid's ``[[run]]`` table is one. The options are held to the method's own
    schema as the run is made; :attr:`config` is that validated configuration."""

    method: Annotated[str, Strict(), AfterValidator(method_name)] = "seakr"
    options: Annotated[dict[str, Any], Strict(), BeforeValidator(_options)] = field(default_factory=dict)
    name: Annotated[str, Strict(), AfterValidator(_run_name)] | None = None

    @model_validator(mode="after")
    def _options_of_the_method(self):
        self.config = METHODS[self.method].Config.from_dict(self.options)
        if self.name is None:  # only when not given: an empty name is refused, not replaced
            self.name = self.method
        return self


def run_spec(where: str, method: Any = "seakr", options: Any = None, *, context: int | None = None, **kw) -> RunSpec:
    """A :class:`RunSpec` made at a door before any model loads, its refusal led by where it was given (``--option``,
    a grid's ``g.toml: [[run]] #2 (b)``); ``context``: the model's window, where :meth:`ModelSpec.context` knows it,
    which each generation length the run sets must leave room in (the method checks again with its prompt)."""
    try:
        run = RunSpec(method, options, **kw)
    except PlanError as e:
        raise PlanError(f"{where}: {e}") from None
    check_window(where, run, context)
    return run


def check_window(where: str, run: RunSpec, context: int | None) -> None:
    """Each generation length ``run`` sets leaves room for a prompt in the model's window (``context``: None where
    it is not known without the weights), refused led by ``where``."""
    try:
        check_lengths(run.config, context)
    except ValueError as e:
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
    """``I/N`` (0 <= I < N): this process runs questions I, I+N, I+2N, ... of the (limited) list. ASCII digits
    only, so a run records the one spelling that merge and --resume compare."""
    try:
        if not re.fullmatch(r"\s*[0-9]+\s*/\s*[0-9]+\s*", text):
            raise ValueError(text)
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"{text!r}: expected I/N, e.g. 0/4") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"{text!r}: need 0 <= I < N")
    return i, n


def shard_spelled(text: str) -> str:
    """A shard as ``I/N``, the one spelling a run records and ``merge`` and ``--resume`` compare."""
    return "{}/{}".format(*parse_shard(text))


def check_unique(where: str, name: str, names: set) -> None:
    """A run's name, unique within the plan (added to ``names``), also ignoring case: on macOS and Windows "X" and
    "x" are one folder, and the two runs' rows would mix."""
    same = next((n for n in names if n.casefold() == name.casefold()), None)
    if same == name:
        raise PlanError(f"{where}: a second run named {name!r} (each run writes to its own folder)")
    if same is not None:
        raise PlanError(f"{where}: run {name!r} differs from run {same!r} only in case, one folder on macOS and "
                        "Windows (each run writes to its own folder)")
    names.add(name)


def check_settings(seed: int | None, prompt_set: str | None) -> None:
    """The seed's range and a prompt-set file (a missing or malformed one: one line naming it)."""
    if seed is not None:
        try:
            check_type(Seed, seed)
        except ValueError as e:
            raise SettingError("seed", f": {e}") from None
    if prompt_set:
        PromptSet.load(prompt_set)


def check_there(field: str, path: str, lead: str) -> None:
    """A file a setting names is there (a quoted glob of a split's shards is matched where it is read), else a
    :class:`SettingError` of ``field``, which each door names as its users write it (``--data``, a grid's key)."""
    if not (is_pattern(path) or os.path.exists(path)):
        raise SettingError(field, f": {path}: {missing(path)}", lead=lead)


def check_output_dir(path: str, field: str = "out") -> None:
    """An output folder a run can make or write into, and that no live run is writing to, refused as a
    :class:`SettingError` of ``field``. Whose folder it is (another program's, an index) is the rows' rule
    (:func:`~seakr.eval.folders.check_rows_home`), checked first by the callers that write rows."""
    if not path.strip():
        raise SettingError(field, ": an empty path; name the folder")
    if os.path.islink(path) and not os.path.exists(path):
        raise SettingError(field, f"{path}: a symbolic link to nothing ({os.readlink(path)}); remove it or choose "
                                  "another")
    if os.path.exists(path) and not os.path.isdir(path):
        raise SettingError(field, f"{path}: exists and is not a directory")
    if not os.path.exists(path):  # made by the run's first write: a run refused later leaves no empty folder
        where = nearest_existing(path)
        if no_place(where) is None and not os.access(where, os.W_OK | os.X_OK):  # no place: _try_a_folder says why
            raise SettingError(field, f"{path}: cannot create the folder ({where} is not writable)")
        _try_a_folder(path, field, where)
        return
    if not os.access(path, os.W_OK):
        raise SettingError(field, f"{path}: not writable")

    try:
        check_free(path)
    except ValueError as e:
        raise PlanError(str(e)) from None
    _try_a_folder(path, field, path)  # last: nothing is made, even for a moment, in a folder refused above


def _try_a_folder(path: str, field: str, where: str) -> None:
    """Refuse an output folder the system will not make or write into (``/proc/x`` passes the permission bits),
    learnt by trying, before the model loads."""
    why = place_refused(where)
    if why:
        doing = "cannot write into the folder" if where == path else "cannot create the folder"
        raise SettingError(field, f"{path}: {doing} ({why})")

"""Where a method finds its fitted self-knowledge: the probes, calibration maps and gate level for one
model, from a folder the user names or, by default, the package's ``probes/data``.

File names (in either place): ``<model>-<form>.probe.json``, ``<model>-<form>-<estimator>.calibration.json``,
``gates.json`` ({model: {gate: {"gate_p": p, ...provenance}}}, gate ``check`` or ``probe``) and
``reasoning.json`` ({model: {"reasoning": rule, ...provenance}}: the final choice chosen on tuning data) and
``decisions.json`` ({model: {option: value, "why": {option: provenance}}}: what an option's "auto" takes for
the model, chosen on decision data).
Each file is read once, on first use, and a missing one is a one-line error that says how to fit it.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Sequence

from ..common.writing import write_atomic
from ..prompts import check_wording
from ..common.jsontext import parse_json
from ..common.schema import Probability, SchemaError, check_type, schema
from ..uncertainty import NEEDS
from .calibration import Calibration
from .probe import Probe, calibration_name, packaged_name
import datetime

#: The gate level when neither the user nor the package gives one: retrieve unless the model is more
#: likely right than wrong.
DEFAULT_GATE_P = 0.5


@schema("field", extra="allow")
class GateLevel:
    """A gate's entry in ``gates.json``: the probability of being right below which it retrieves, and beside it
    how that level was chosen (rule, n, data, fitted_at, ...)."""

    gate_p: Probability


#: What the scores of sampled answers depend on beside the model and the prompt: how the k samples are
#: drawn, and (EigenScore) the regulariser of its log-determinant.
SAMPLING_KEYS = ("k", "temperature", "top_k", "top_p")


def sampling_record(config: dict, estimators) -> dict | None:
    """The part of a method's config (a dict of its fields) that the named estimators' values depend on:
    the sampling where one of them reads samples, plus alpha for EigenScore; None where none does (a
    greedy-only score or a state probe is the same under any sampling) or the config predates the fields."""
    estimators = list(estimators)
    if not any(NEEDS.get(e) == "samples" for e in estimators):
        return None
    keys = SAMPLING_KEYS + (("alpha",) if any(e.startswith("eigen") for e in estimators) else ())
    return {k: config[k] for k in keys} if all(k in config for k in keys) else None


def _same_wording(fitted, where: str):
    """A short-form probe or map is read only where it was fitted on the check's answers to this wording."""
    if fitted.form == "short":
        check_wording(fitted.provenance, where)
    return fitted


def _named(fitted, where: str, form: str, estimator: str | None = None):
    """A file is read under its name's form (and estimator): one copied or renamed from another form's
    would put its scale on this decision."""
    if fitted.form != form or (estimator is not None and fitted.estimator != estimator):
        what = fitted.form + (f"/{fitted.estimator}" if estimator is not None else "")
        want = form + (f"/{estimator}" if estimator is not None else "")
        raise ValueError(f"{where}: holds a {what} {type(fitted).__name__.lower()}, read here as the {want} one")
    return fitted


def check_sampling(fitted, config: dict | None, where: str):
    """A map of a sample-based score (or a probe reading one) is read only under the sampling it was fitted
    on: EigenScore at k = 5 or at another temperature is on another scale than the map's."""
    estimators = fitted.scores_read
    got, ours = fitted.provenance.get("sampling"), sampling_record(config or {}, estimators)
    if got and ours and any(k not in got or float(got[k]) != float(ours[k]) for k in ours):
        fmt = lambda r: ", ".join(f"{k}={r.get(k)}" for k in ours)  # noqa: E731
        raise ValueError(f"{where}: fitted on {', '.join(estimators)} of samples drawn with {fmt(got)}; this run "
                         f"samples with {fmt(ours)}: sample as it was fitted, or refit it on studies run with these "
                         "options")
    return fitted


def check_folder(folder: str | None, contents: bool = False) -> None:
    """A ``probes=`` folder must be one; with ``contents``, every fitted file in it readable as what its name
    says, so a method's options can refuse a damaged file before any model loads (which files a run reads
    settles with the model). Whether a file fits the model, and another model's entries are valid, is checked
    when the model reads it."""
    if folder is None:
        return
    if not Path(folder).is_dir():
        raise ValueError(f"probes={folder}: " + ("not a directory" if Path(folder).exists() else "no such directory"))
    if not contents:
        return
    files = sorted(f for f in Path(folder).iterdir() if (f.name.endswith(_FITTED) or f.name in _TABLES) and f.is_file())
    _check_files(tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files))


_FITTED, _TABLES = (".probe.json", ".calibration.json"), ("gates.json", "reasoning.json", "decisions.json")


@functools.lru_cache(maxsize=16)
def _check_files(stamped: tuple) -> None:
    """Each file once per version (a config is built many times a run); an error is not cached."""
    for where, _, _ in stamped:
        d = _parse(Path(where), where)
        if where.endswith(".probe.json"):
            Probe.from_dict(d, where)
        elif where.endswith(".calibration.json"):
            Calibration.from_dict(d, where)
        else:
            _table(d, where, "check" if where.endswith("gates.json") else Path(where).name.removesuffix(".json"))


def _table(d, where: str, key: str, model: str | None = None) -> None:
    """A table file ({model: {key: ...}}) is a JSON object, and ``model``'s entry in it one."""
    if not isinstance(d, dict) or (model is not None and not isinstance(d.get(model, {}), dict)):
        raise ValueError(f"{where}: expected {{model: {{{key}: ...}}}}, a JSON object per model")


def _parse(f, where: str):
    try:
        return parse_json(f.read_text(encoding="utf-8"), where)
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not UTF-8 text") from None


class SelfKnowledge:
    """``sampling``: the reading method's config (a dict of its fields); where given, a file fitted on
    scores of samples drawn otherwise is refused when it is read (:func:`check_sampling`).
    ``check_sampling``: the same for the knowledge check's files (short form), where it samples otherwise."""

    def __init__(self, model: str, folder: str | None = None, sampling: dict | None = None,
                 check_sampling: dict | None = None):
        self.model, self.folder, self.sampling = model, folder, sampling
        self.check_sampling = check_sampling if check_sampling is not None else sampling
        self._cache: dict[str, object] = {}
        check_folder(folder)

    def _read(self, name: str) -> tuple[dict | None, str]:
        if self.folder is not None:
            f, where = Path(self.folder) / name, str(Path(self.folder) / name)
        else:
            f, where = resources.files("seakr.probes").joinpath("data", name), f"seakr/probes/data/{name}"
        if not f.is_file():
            return None, where
        return _parse(f, where), where

    def _missing(self, what: str, where: str, command: str) -> str:
        """A missing fitted file, and how to make one that this lookup finds: the folder reads files by their
        packaged names only, which ``--out`` must spell."""
        name, folder = Path(where).name, self.folder or "FOLDER"
        return (f"no {what} for model {self.model!r} at {where}: fit one on tuning data with "
                f"`seakr {command} --out {Path(folder) / name}` and give {folder} as the probes option")

    def probe(self, form: str) -> Probe:
        key = f"probe:{form}"
        if key not in self._cache:
            d, where = self._read(packaged_name(self.model, form))
            if d is None:
                raise ValueError(self._missing(f"{form!r} probe", where, f"probe fit --form {form}"))
            self._cache[key] = check_sampling(_same_wording(_named(Probe.from_dict(d, where), where, form), where),
                                              self._sampling(form), where)
        return self._cache[key]  # type: ignore[return-value]

    def calibration(self, form: str, estimator: str) -> Calibration:
        key = f"cal:{form}:{estimator}"
        if key not in self._cache:
            d, where = self._read(calibration_name(self.model, form, estimator))
            if d is None:
                raise ValueError(self._missing(f"{form!r} calibration of {estimator!r}", where,
                                               f"probe calibrate --form {form} --estimator {estimator}"))
            cal = _named(Calibration.from_dict(d, where), where, form, estimator)
            if cal.provenance.get("model") not in (None, self.model):  # a map of another model's scores
                raise ValueError(f"{where}: fitted on {cal.provenance['model']!r}'s scores, read here for "
                                 f"{self.model!r}")
            self._cache[key] = check_sampling(_same_wording(cal, where), self._sampling(form), where)
        return self._cache[key]  # type: ignore[return-value]

    def _sampling(self, form: str) -> dict | None:
        return self.check_sampling if form == "short" else self.sampling

    def has_probe(self, form: str) -> bool:
        return self._read(packaged_name(self.model, form))[0] is not None

    def has_calibration(self, form: str, estimator: str) -> bool:
        return self._read(calibration_name(self.model, form, estimator))[0] is not None

    def _model_entry(self, name: str, key: str) -> tuple[dict | None, str]:
        """This model's entry under ``key`` in a table file (``gates.json``, ``reasoning.json``: {model:
        {key: ...}}), or None; a file of another shape is refused naming it."""
        d, where = self._read(name)
        if d is None:
            return None, where
        _table(d, where, key, self.model)
        return (d.get(self.model) or {}).get(key), where

    def reasoning(self, rules: Sequence[str]) -> tuple[str | None, str]:
        """The final-choice rule chosen for this model on tuning data (``reasoning.json``: {model:
        {"reasoning": rule, ...provenance}}) and where it came from; (None, "auto") where none was chosen.
        A rule outside ``rules`` (those the reading method knows) is refused in one line."""
        return self._chosen("reasoning", rules)

    def decided(self, option: str, rules: Sequence[str]) -> tuple[str | None, str]:
        """The value chosen for ``option`` for this model on decision data (``decisions.json``: {model: {option:
        value, "why": {...}}}), as :meth:`reasoning` reads its rule."""
        return self._chosen(option, rules, "decisions.json")

    def decided_level(self, option: str) -> float | None:
        """The level chosen for ``option`` for this model on decision data (``decisions.json``), or None."""
        v, where = self._model_entry("decisions.json", option)
        try:
            return None if v is None else check_type(Probability, v)
        except SchemaError as e:
            raise ValueError(f"{where}: {self.model}: {option}: {e}") from None

    def _chosen(self, decision: str, rules: Sequence[str], file: str | None = None) -> tuple[str | None, str]:
        rule, where = self._model_entry(file or f"{decision}.json", decision)
        if rule is None:
            return None, "auto"
        if rule not in rules:
            raise ValueError(f"{where}: {self.model}: {decision} {rule!r} is not one of {', '.join(rules)}")
        return rule, f"{where}:{self.model}"

    def save_gate_level(self, res: dict) -> str:
        """Write the level :func:`~seakr.eval.fitting.gate_from_runs` chose into this folder's ``gates.json`` under
        this model and gate, with its provenance, keeping every other entry; returns the file, which
        ``probes=DIR`` then reads."""
        if self.folder is None:
            raise ValueError("the chosen gate level is written into a probes folder of your own (--probes DIR); the "
                             "package's folder holds the packaged models' levels")
        d, where = self._read("gates.json")
        d = {"_about": "gate levels chosen on tuning data (seakr probe gate)"} if d is None else d
        _table(d, where, res["gate"], self.model)
        at = res["at_gate_p"]
        d.setdefault(self.model, {})[res["gate"]] = {
            "gate_p": res["gate_p"], "rule": res["rule"], "n": res["n"], "tuning_f1": round(at["f1"], 3),
            "tuning_answered_by_check": round(at["answered_by_check"], 3), "chain_f1": round(res["chain_f1"], 3),
            "data": res["data"], "fitted_at": datetime.date.today().isoformat()}
        write_atomic(Path(where), json.dumps(d, indent=1) + "\n")
        return where

    def gate_p(self, gate: str) -> tuple[float, str]:
        """The probability of being right below which ``gate`` retrieves, and where it came from. A level that is
        not a probability (7, "high", NaN) is refused naming the file."""
        entry, where = self._model_entry("gates.json", gate)
        if entry is None:
            return DEFAULT_GATE_P, "default"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: {self.model}: {gate}: expected {{\"gate_p\": p, ...}}, got {entry!r}")
        try:
            return GateLevel(**entry).gate_p, f"{where}:{self.model}:{gate}"
        except SchemaError as e:
            raise ValueError(f"{where}: {self.model}: {gate}: {e}") from None

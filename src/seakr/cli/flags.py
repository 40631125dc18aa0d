"""What the commands share: the one-line error, the model a command's flags name, ``--option KEY=VALUE`` read as
typed values, and an output file checked before any slow work."""

from __future__ import annotations

import json
import math
import os
import re

from ..common.console import said
from ..common.jsontext import KeyTwice, check_escapes, loads as textio_loads, too_many_digits
from ..common.writing import check_output_file
from ..eval.specs import ModelSpec
from ..common.runs import check_not_a_record
from .. import uncertainty as U


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def why_inf(name: str, g) -> str:
    """Why an estimator read +inf on a generation ("uncertain": nothing to measure), in a few words."""
    need, rows = U.NEEDS.get(name), int(g.states.shape[0])  # states: the samples with content (never None)
    if need == "samples" and name.startswith("eigen") and rows < 2:
        return f"  (compares >= 2 samples with content; {rows} here)"
    if need == "samples" and not any(s.token_ids for s in g.samples):
        return "  (no sample with content)"
    if need == "greedy" and (g.greedy is None or not g.greedy.token_ids):
        return "  (the greedy answer is empty)"
    return ""


def model_spec(args) -> ModelSpec:
    return ModelSpec(args.model, args.precision, args.device, args.threads, args.layer, args.state_source)


def parse_options(pairs: list[str]) -> dict:
    """``--option key=value`` pairs; values parsed as JSON when they look like it (numbers, true, null)."""
    out = {}
    for kv in pairs or []:
        if "=" not in kv:
            raise CLIError(f"--option expects key=value, got {said(kv)}")
        k, v = kv.split("=", 1)
        k = k.strip().replace("-", "_")
        if not k:
            raise CLIError(f"--option expects key=value, got {said(kv)}")
        try:
            value = textio_loads(v)
            check_escapes(v, f"--option {k}", CLIError, numbered=False)
        except KeyTwice as e:  # JSON still, not text
            raise CLIError(f"--option {k}: {e.msg}") from None
        except json.JSONDecodeError:  # text, or a whole number JSON refuses ("020")
            try:
                value = int(v) if re.fullmatch(r"\s*[+-]?\d+\s*", v) else v
            except ValueError as e:  # only Python's bound on digits refuses a string of digits
                raise CLIError(f"--option {k}: {too_many_digits(e)}") from None
        if k in out and out[k] != value:  # the last one won without a word
            raise CLIError(f"--option {k}: given twice ({json.dumps(out[k])}, then {json.dumps(value)}); give it once")
        out[k] = value
    return out


def one_value(options: dict, key: str, flag: str, value) -> None:
    """A flag that is also an option (``--delta`` and ``--option delta=``) holds one value; two different ones
    are refused, since no door could say which one it took."""
    if value is not None and key in options and options[key] != value:
        raise CLIError(f"{flag} {value} and --option {key}={json.dumps(options[key])}: give one")


def flag_or_option(options: dict, key: str, flag: str, value) -> None:
    """:func:`one_value`, then the flag's value into the options."""
    one_value(options, key, flag, value)
    if value is not None:
        options[key] = value


def output_file(path: str, flag: str, overwrite: bool | None = None) -> None:
    """An output flag's file, checked before any slow work: writable, not a run's, study's or index's own, and (where
    the command has ``--overwrite``: ``overwrite`` not None) not a file of someone else's that exists: a page seakr
    wrote is replaced, any other file only with ``--overwrite``."""
    if path == "-":  # not a file named "-"; where "-" means standard output the command says so before this
        raise CLIError(f"{flag} -: this command writes a file here (its own report goes to standard output); name it")
    check_output_file(path, flag)
    check_not_a_record(path, flag)
    if overwrite is False and os.path.isfile(path) and not _seakr_page(path):
        raise CLIError(f"{flag} {path}: exists and seakr did not write it; pass --overwrite to replace it")


def _seakr_page(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"<meta name='generator' content='seakr'>" in f.read(4096)
    except OSError:
        return False

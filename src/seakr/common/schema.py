"""One schema mechanism for every input object: pydantic v2 dataclasses (field constraints, ``extra="forbid"``,
a model validator per cross-field rule), and one adapter that turns pydantic's ``ValidationError`` into the one
line every door prints (``<label> <field>: <what>, got <value>``; an unknown name with the nearest valid one).

Types are strict (a bool is no number, a text no number) with the few conversions every door needs, so the
command line, a TOML grid, Python and HTTP reach one verdict: a NumPy scalar is Python's number, a whole float
(JSON's ``16.0``) a whole number, ``"inf"`` (JSON and TOML spell no infinity) a float, a ``pathlib.Path`` text.
"""

from __future__ import annotations

import functools
import math
import os
import re
import typing
from typing import Annotated, Any, Callable

import annotated_types as at
import pydantic.dataclasses
from pydantic import AfterValidator, BeforeValidator, ConfigDict, ValidationError

from .console import did_you_mean, said
from .files import user_path
from .jsontext import native

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

_INFINITY = re.compile(r"[+-]?inf(inity)?", re.IGNORECASE)


def _whole(v):
    v = native(v)  # np.int64(5) from a sweep: Python's 5
    return int(v) if isinstance(v, float) and math.isfinite(v) and v.is_integer() else v


def _real(v):
    v = native(v)
    if isinstance(v, int) and not isinstance(v, bool):
        try:
            float(v)
        except OverflowError:  # 10**400 from Python: no float holds it
            raise ValueError("past a float's range") from None
    return float(v) if isinstance(v, str) and _INFINITY.fullmatch(v.strip()) else v


def _not_nan(v):
    if v is not None and math.isnan(v):
        raise ValueError("NaN")
    return v


def _path(v):
    return os.fspath(v) if isinstance(v, os.PathLike) else v


def _visible(v: str) -> str:
    if not v.strip():  # read as "not given" (the package's files), or as "."
        raise ValueError("an empty path; name the folder, or leave the option out")
    return v


#: A whole number (a whole float is its int; a bool is not one).
Whole = Annotated[int, BeforeValidator(_whole)]
#: A finite number.
Real = Annotated[float, BeforeValidator(_real)]
#: A number where +-inf mean "never" / "always" (a threshold); NaN is none.
Threshold = Annotated[float, pydantic.Field(allow_inf_nan=True), BeforeValidator(_real), AfterValidator(_not_nan)]
#: A file or folder named in text or as a ``pathlib.Path``, ``~`` expanded.
PathText = Annotated[str, BeforeValidator(_path), AfterValidator(user_path)]
#: A folder that must name something when given.
Folder = Annotated[str, BeforeValidator(_path), AfterValidator(_visible), AfterValidator(user_path)]


class SchemaError(ValueError):
    """One line naming the field and the problem; ``errors`` keeps pydantic's structured list (HTTP returns it)."""

    def __init__(self, message: str, errors: list | None = None):
        super().__init__(message)
        self.errors = errors or []


def schema(label: str = "option", unknown: Callable[[type, list[str]], str] | None = None):
    """Make ``cls`` a strict pydantic dataclass whose construction fails with one :class:`SchemaError` line.
    ``label`` leads each message; ``unknown(cls, names)`` words the unknown names (the nearest valid one)."""

    def wrap(cls):
        cls = pydantic.dataclasses.dataclass(cls, config=STRICT)
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            try:
                init(self, *args, **kwargs)
            except ValidationError as e:
                raise SchemaError(one_line(e, type(self), label, unknown), e.errors(include_url=False)) from None

        cls.__init__ = __init__
        return cls

    return wrap


def one_line(e: ValidationError, cls: type, label: str = "option",
             unknown: Callable[[type, list[str]], str] | None = None) -> str:
    """The first problem of ``e`` in one line; every unknown name at once (a typo is seldom alone)."""
    names = list(getattr(cls, "__pydantic_fields__", {}))
    errors = [{**x, "loc": (names[x["loc"][0]], *x["loc"][1:])} if x["loc"] and isinstance(x["loc"][0], int)
              and x["loc"][0] < len(names) else x for x in e.errors(include_url=False)]  # a positional argument's name
    extra = [str(x["loc"][0]) for x in errors if x["type"] in ("unexpected_keyword_argument", "extra_forbidden")]
    if extra:
        return unknown(cls, extra) if unknown else _unknown(cls, extra, label)
    missing = [str(x["loc"][0]) for x in errors if x["type"] in ("missing", "missing_argument") and x["loc"]]
    if missing:
        return f"missing {label}{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}"
    x = errors[0]
    name = str(x["loc"][0]) if x["loc"] else ""
    at_ = f" (item {'.'.join(map(str, x['loc'][1:]))})" if len(x["loc"]) > 1 else ""  # an item of a list field
    field = getattr(cls, "__pydantic_fields__", {}).get(str(x["loc"][0])) if x["loc"] else None
    if x["type"] == "value_error" and "error" in x.get("ctx", {}):
        why = str(x["ctx"]["error"])  # a validator's own sentence; a field's names the field
        if field is None:
            return why
        return f"{label} {name}: " + (f"expected {describe(field)}, got nan" if why == "NaN" else why)
    if x["type"] == "literal_error" and field is not None:
        choices = [c for c in _literals(field.annotation)]
        return (f"{label} {name}: one of {', '.join(map(str, choices))}, not {said(x['input'])}"
                f"{did_you_mean(x['input'], choices)}")
    if field is None:
        return f"{label} {name}: {x['msg']}"
    return f"{label} {name}: expected {describe(field)}, got {said(x['input'])}{at_}"


def _unknown(cls: type, names: list[str], label: str = "option") -> str:
    fields = list(getattr(cls, "__pydantic_fields__", {}))
    said_ = ", ".join(f"{n!r}{did_you_mean(n, fields)}" for n in names)
    return f"{cls.__name__}: unknown {label}(s) {said_}; its {label}s: {', '.join(fields)}"


def _literals(annotation) -> list:
    out = []
    for arg in typing.get_args(annotation) or ():
        out += list(typing.get_args(arg)) if typing.get_origin(arg) is typing.Literal else []
    return list(typing.get_args(annotation)) if typing.get_origin(annotation) is typing.Literal else out


def _meta(field) -> list:
    args = typing.get_args(field.annotation)
    meta = [m for m in field.metadata] + [m for a in args for m in getattr(a, "__metadata__", ())]
    return meta + [x for m in meta if isinstance(m, pydantic.fields.FieldInfo) for x in m.metadata]


def bounds(field) -> tuple[tuple | None, tuple | None]:
    """A number field's ends, each ``(value, open)`` or None (unbounded)."""
    meta = _meta(field)
    lo = next(((m.ge, False) for m in meta if isinstance(m, at.Ge)), None) or next(
        ((m.gt, True) for m in meta if isinstance(m, at.Gt)), None)
    hi = next(((m.le, False) for m in meta if isinstance(m, at.Le)), None) or next(
        ((m.lt, True) for m in meta if isinstance(m, at.Lt)), None)
    return lo, hi


def _kind(t) -> str:
    t = typing.get_args(t)[0] if typing.get_origin(t) is Annotated else t
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin in (list, tuple):
        inner = _kind(args[0]) if args else ""
        return {"text": "a list of texts", "a number": "a list of numbers", "a whole number": "a list of whole numbers"
                }.get(inner, "a list")
    return {int: "a whole number", float: "a number", bool: "true or false", str: "text"}.get(t) or (
        "a table" if origin is dict or t is dict else str(t))


def describe(field) -> str:
    """What a field takes, in words: ``a whole number in [1, inf)``, ``a number (inf and -inf allowed) or null``."""
    args = typing.get_args(field.annotation)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), field.annotation) if optional else field.annotation
    kind = _kind(base)
    lo, hi = bounds(field)
    if lo or hi:
        num = lambda x: str(x) if isinstance(x, int) else f"{int(x)}" if x.is_integer() else f"{x:g}"  # noqa: E731
        kind += (f" in {'(' if lo is None or lo[1] else '['}{'-inf' if lo is None else num(lo[0])}, "
                 f"{'inf' if hi is None else num(hi[0])}{')' if hi is None or hi[1] else ']'}")
    elif any(getattr(m, "allow_inf_nan", None) for m in _meta(field)):
        kind += " (inf and -inf allowed)"
    return kind + (" or null" if optional else "")


def numbers(cls: type) -> dict[str, tuple]:
    """Every number field of a schema, with its :func:`bounds`."""
    out = {}
    for name, f in cls.__pydantic_fields__.items():
        if describe(f).startswith(("a whole number", "a number")):
            out[name] = bounds(f)
    return out


@functools.lru_cache(maxsize=None)
def _adapter(cls: type, name: str) -> pydantic.TypeAdapter:
    f = cls.__pydantic_fields__[name]
    t = Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation
    return pydantic.TypeAdapter(t, config=ConfigDict(strict=True, allow_inf_nan=False))


def check_value(cls: type, name: str, value, label: str = "option"):
    """``value`` checked as field ``name`` of schema ``cls`` is, alone (a step that needs one field before the
    object exists: a fit refuses a bad form before it fits); returns it as the schema would hold it."""
    try:
        return _adapter(cls, name).validate_python(value)
    except ValidationError as e:
        x = e.errors(include_url=False)[0]
        raise SchemaError(one_line(ValidationError.from_exception_data(
            e.title, [{**x, "loc": (name, *x["loc"])}]), cls, label)) from None


def validate(cls: type, d: Any, label: str = "option"):
    """``cls`` built from a mapping (a TOML table, a JSON body): a non-mapping is one line too."""
    if not isinstance(d, dict):
        raise TypeError(f"{cls.__name__}: expected a table of {label}s, got {type(d).__name__}")
    return cls(**d)

"""One schema mechanism for every input object: pydantic v2 dataclasses (field constraints, ``extra="forbid"``,
a model validator per cross-field rule), and one adapter that turns pydantic's ``ValidationError`` into the one
line every door prints (``<label> <field>: <what>, got <value>``; an unknown name with the nearest valid one).

Types are strict (a bool is no number, a text no number) with the few conversions every door needs, so the
command line, a TOML grid, Python and HTTP reach one verdict: a NumPy scalar is Python's number, a whole float
(JSON's ``16.0``) a whole number, ``"inf"`` (JSON and TOML spell no infinity) a float, a ``pathlib.Path`` text.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import types
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
#: A count of one or more.
Positive = Annotated[Whole, pydantic.Field(ge=1)]
#: A count that may be 0.
Count = Annotated[Whole, pydantic.Field(ge=0)]
#: A finite number > 0 (seconds, a ridge).
PositiveReal = Annotated[Real, pydantic.Field(gt=0)]
#: A finite number >= 0 (a temperature, where 0 is greedy; a threshold on a z-score).
NonNegative = Annotated[Real, pydantic.Field(ge=0)]
#: A probability or a level on one (a gate's P(correct), a query word's token p, FLARE's theta).
Probability = Annotated[Real, pydantic.Field(ge=0, le=1)]
#: A random seed (torch's generators take 32 bits).
Seed = Annotated[Whole, pydantic.Field(ge=0, le=2 ** 32 - 1)]
#: A file or folder named in text or as a ``pathlib.Path``, ``~`` expanded.
PathText = Annotated[str, BeforeValidator(_path), AfterValidator(user_path)]
#: A folder that must name something when given.
Folder = Annotated[str, BeforeValidator(_path), AfterValidator(_visible), AfterValidator(user_path)]


class SchemaError(ValueError):
    """One line naming the field and the problem; ``errors`` keeps pydantic's structured list (HTTP returns it)."""

    def __init__(self, message: str, errors: list | None = None):
        super().__init__(message)
        self.errors = errors or []


def schema(label: str = "option", unknown: Callable[[type, list[str]], str] | None = None, extra: str = "forbid",
           strict: bool = True, error: type[ValueError] | None = None,
           field_error: Callable[[str, str], ValueError] | None = None):
    """Make ``cls`` a strict pydantic dataclass whose construction fails with one :class:`SchemaError` line.
    ``label`` leads each message; ``unknown(cls, names)`` words the unknown names (the nearest valid one);
    ``extra="ignore"``: a record that may hold more than its readers need (a row); ``strict=False``: nested
    records read from JSON objects (its scalar fields then say ``Strict()`` themselves); ``error``: the
    exception a refusal raises (a :class:`SchemaError` by default); ``field_error(field, text)``: the one a refusal
    of one field's value raises instead, so each door can name the field as its users spell it (a flag, a key)."""

    def wrap(cls):
        cls = pydantic.dataclasses.dataclass(cls, config=ConfigDict(STRICT, extra=extra, strict=strict))
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            try:
                init(self, *args, **kwargs)
            except ValidationError as e:
                msg = one_line(e, type(self), label, unknown)
                field = _field_at(e, type(self), label) if field_error is not None else None
                if field and msg.startswith(field + ":"):
                    raise field_error(field, msg[len(field):]) from None
                if error is not None:
                    raise error(msg) from None
                raise SchemaError(msg, e.errors(include_url=False)) from None

        cls.__init__ = __init__
        return cls

    return wrap


def one_line(e: ValidationError, cls: type, label: str = "option",
             unknown: Callable[[type, list[str]], str] | None = None) -> str:
    """The first problem of ``e`` in one line; every unknown name at once (a typo is seldom alone)."""
    errors = _named(e, cls)
    extra = [x["loc"] for x in errors if x["type"] in ("unexpected_keyword_argument", "extra_forbidden")]
    if extra:  # a nested record's (a demonstration's in a file) at its place, in its own class's words
        path, owner = _holder(cls, extra[0][:-1])
        names = [str(loc[-1]) for loc in extra if loc[:-1] == extra[0][:-1]]
        return (f"{_at(label, path)}: " if path else "") + (unknown(owner, names) if unknown else
                                                              _unknown(owner, names, label))
    missing = [_leaf(cls, x["loc"])[0] or str(x["loc"][-1]) for x in errors
               if x["type"] in ("missing", "missing_argument") and x["loc"]]
    if missing:
        return f"missing {label}{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}"
    name, t = _leaf(cls, errors[0]["loc"])
    return _problem(errors[0], _at(label, name), t)


def _named(e: ValidationError, cls: type) -> list[dict]:
    """``e``'s errors with a positional argument's index replaced by its field's name."""
    names = list(getattr(cls, "__pydantic_fields__", {}))
    return [{**x, "loc": (names[x["loc"][0]], *x["loc"][1:])} if x["loc"] and isinstance(x["loc"][0], int)
            and x["loc"][0] < len(names) else x for x in e.errors(include_url=False)]


def _field_at(e: ValidationError, cls: type, label: str) -> str | None:
    """The field a refusal is about, as :func:`one_line` names it (``model.layer``), where it is one known field."""
    loc = _named(e, cls)[0]["loc"][:1]
    return _at(label, loc[0]) if loc and loc[0] in getattr(cls, "__pydantic_fields__", {}) else None


def _problem(x: dict, at: str, t) -> str:
    """One pydantic error ``x`` of a value of type ``t`` (None: not a field's) in words, led by where it is."""
    lead = f"{at}: " if at else ""
    if x["type"] == "value_error" and "error" in x.get("ctx", {}):
        why = str(x["ctx"]["error"])  # a validator's own sentence; a field's names the field
        if t is None:
            return why
        return lead + (f"expected {describe_type(t)}, got nan" if why == "NaN" else why)
    if t is None:
        return f"{lead}{x['msg']}"
    if x["type"] in _LENGTHS:
        most, unit = _LENGTHS[x["type"]]
        size = x["ctx"]["max_length" if most else "min_length"]
        got = f"{len(x['input']):,}" if most else said(x["input"])  # too long to quote: its length
        return f"{lead}{'at most' if most else 'at least'} {size:,} {unit}, got {got}"
    if x["type"] == "literal_error":
        choices = list(typing.get_args(_parts(t)[0]))
        return f"{lead}one of {', '.join(map(str, choices))}, not {said(x['input'])}{did_you_mean(x['input'], choices)}"
    return f"{lead}expected {describe_type(t)}, got {said(x['input'])}"


#: pydantic's length errors: (whether the bound is the most, what is counted)
_LENGTHS = {"too_short": (False, "item(s)"), "too_long": (True, "item(s)"),
            "string_too_short": (False, "character(s)"), "string_too_long": (True, "characters")}


def worded(x: dict, cls: type) -> str:
    """One pydantic error ``x`` of schema ``cls`` (``loc`` from ``cls``'s fields) in the words :func:`one_line`
    uses, without the field's name: for a door that names the field apart (HTTP's ``{"field", "error"}``). An
    unknown key comes with the nearest known one of the object it is in."""
    loc = tuple(x.get("loc") or ())
    if x["type"] in ("extra_forbidden", "unexpected_keyword_argument") and loc:
        return unknown_keys(_holder(cls, loc[:-1])[1], [str(loc[-1])])
    if x["type"] in ("missing", "missing_argument"):
        return "required"
    if not loc and x["type"].endswith("_type"):  # the whole object is of another kind (a list, a number)
        return f"expected an object, got {said(x['input'])}"
    path, t = _leaf(cls, loc)
    return _problem(x, "", t if path else None)


def _at(label: str, name: str) -> str:
    """Where a field is, as its door names it: ``option k``, ``key limit``, ``model.threads``."""
    if label.endswith("."):  # a part of an object: model.threads (and model.model is the model)
        return name if label[:-1] == name else f"{label}{name}"
    return f"{label} {name}"


def _full(field) -> Any:
    """A field's type with its constraints, as one ``Annotated``."""
    return Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation


def _parts(t) -> tuple[Any, list, bool]:
    """``t`` unwrapped: the type under its ``Annotated`` layers and ``| None``, every constraint on the way (a
    ``Field``'s too), and whether null is taken."""
    meta, optional = [], False
    while True:
        if typing.get_origin(t) is Annotated:
            meta += list(typing.get_args(t)[1:])
            t = typing.get_args(t)[0]
        elif typing.get_origin(t) in (typing.Union, types.UnionType) and type(None) in typing.get_args(t):
            optional, rest = True, [a for a in typing.get_args(t) if a is not type(None)]
            t = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
        else:
            break
    return t, meta + [x for m in meta if isinstance(m, pydantic.fields.FieldInfo) for x in m.metadata], optional


def _schema_class(t) -> type | None:
    base = _parts(t)[0]
    return base if isinstance(base, type) and hasattr(base, "__pydantic_fields__") else None


def _element(t, part) -> Any:
    """The type of item ``part`` of a list (an index) or a table (a key) of type ``t``; None where ``t`` is
    neither (``part`` is a union member's tag)."""
    base = _parts(t)[0]
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin in (list, tuple) and isinstance(part, int) and args:
        return args[0]
    if origin is dict and isinstance(part, str) and len(args) == 2:
        return args[1]
    return None


def _tagged(t, tag) -> Any:
    """The member of union ``t`` marked ``Tag(tag)`` (a discriminated union), or None."""
    base = _parts(t)[0]
    if typing.get_origin(base) not in (typing.Union, types.UnionType):
        return None
    return next((a for a in typing.get_args(base) if typing.get_origin(a) is Annotated and any(
        isinstance(m, pydantic.Tag) and m.tag == tag for m in typing.get_args(a)[1:])), None)


def _fields(owner) -> dict:
    """A schema's fields by every name a file may give them (a field read from ``_id`` or ``id``: both)."""
    fields = dict(getattr(owner, "__pydantic_fields__", {}) if owner is not None else {})
    for f in list(fields.values()):
        alias = f.validation_alias
        fields.update({a: f for a in getattr(alias, "choices", [alias]) if isinstance(a, str)})
    return fields


def _leaf(cls: type, loc: tuple) -> tuple[str, Any]:
    """The path of an error as a row or a file writes it (``steps[1].u``), and the type it ends at."""
    path, t, owner = "", None, cls
    for part in loc:
        fields = _fields(owner)
        if isinstance(part, str) and part in fields:
            t = _full(fields[part])
            path += f".{part}" if path else part
        elif t is not None and (item := _element(t, part)) is not None:
            t = item
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        elif t is not None and (member := _tagged(t, part)) is not None:
            t = member  # a discriminated union's member, by its tag: the form the value was given in
        else:
            continue  # a union member's tag ("float", "str")
        owner = _schema_class(t)
    return path, t


def _holder(cls: type, loc: tuple) -> tuple[str, type]:
    """(the path, the schema) of the object at ``loc`` in ``cls``: where an unknown key was given, so its nearest
    valid name comes from that object's fields (``cls`` itself at the top, or where the path leads to no schema)."""
    path, t = _leaf(cls, loc)
    return path, (_schema_class(t) or cls) if path else cls


def unknown_keys(cls: type, names: list[str]) -> str:
    """The unknown keys of a file's table (a grid's, a run's), each with the nearest known one, else the list."""
    allowed = list(cls.__pydantic_fields__)
    return "; ".join(f"unknown key {k!r}" + (did_you_mean(k, allowed) or f"; allowed: {', '.join(allowed)}")
                     for k in names)


def _unknown(cls: type, names: list[str], label: str = "option") -> str:
    fields = list(getattr(cls, "__pydantic_fields__", {}))
    said_ = ", ".join(f"{n!r}{did_you_mean(n, fields)}" for n in names)
    return f"{cls.__name__}: unknown {label}(s) {said_}; its {label}s: {', '.join(fields)}"


def _bounds(meta: list) -> tuple[tuple | None, tuple | None]:
    lo = next(((m.ge, False) for m in meta if isinstance(m, at.Ge)), None) or next(
        ((m.gt, True) for m in meta if isinstance(m, at.Gt)), None)
    hi = next(((m.le, False) for m in meta if isinstance(m, at.Le)), None) or next(
        ((m.lt, True) for m in meta if isinstance(m, at.Lt)), None)
    return lo, hi


def bounds(field) -> tuple[tuple | None, tuple | None]:
    """A number field's ends, each ``(value, open)`` or None (unbounded)."""
    return _bounds(_parts(_full(field))[1])


@dataclasses.dataclass(frozen=True)
class Said:
    """How a type is said in a refusal, where its Python name says nothing (``an uncertainty``)."""

    one: str
    many: str


_PLURAL = {"text": "texts", "a number": "numbers", "a whole number": "whole numbers", "true or false": "flags",
           "a value": "values", "an object": "objects"}


def _said(t) -> Said:
    base, meta, optional = _parts(t)
    if said_ := next((m for m in meta if isinstance(m, Said)), None):
        return said_
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin in (typing.Union, types.UnionType):
        one = " or ".join(_said(a).one for a in args)
    elif origin in (list, tuple):
        one = f"a list of {_said(args[0]).many}" if args else "a list"
    elif _schema_class(base) is not None:
        one = "an object"
    elif origin is dict or base is dict:
        one = f"a table of {_said(args[1]).many}" if len(args) == 2 and args[1] is not Any else "a table"
    else:
        one = {int: "a whole number", float: "a number", bool: "true or false", str: "text", Any: "a value"}.get(
            base, str(base))
    many = ("lists" if one.startswith("a list") else "tables" + one[len("a table"):] if one.startswith("a table")
            else one)
    return Said(one, _PLURAL.get(one, many))


def describe_type(t) -> str:
    """What a type takes, in words: ``a whole number in [1, inf)``, ``a number (inf and -inf allowed) or null``."""
    base, meta, optional = _parts(t)
    kind = _said(t).one
    lo, hi = _bounds(meta)
    if any(isinstance(m, Said) for m in meta):
        pass  # its own words say its range
    elif lo or hi:
        num = lambda x: str(x) if isinstance(x, int) else f"{int(x)}" if x.is_integer() else f"{x:g}"  # noqa: E731
        kind += (f" in {'(' if lo is None or lo[1] else '['}{'-inf' if lo is None else num(lo[0])}, "
                 f"{'inf' if hi is None else num(hi[0])}{')' if hi is None or hi[1] else ']'}")
    elif any(getattr(m, "allow_inf_nan", None) for m in meta):
        kind += " (inf and -inf allowed)"
    return kind + (" or null" if optional else "")


def describe(field) -> str:
    """What a schema's field takes, in words (:func:`describe_type`)."""
    return describe_type(_full(field))


def numbers(cls: type) -> dict[str, tuple]:
    """Every number field of a schema, with its :func:`bounds`."""
    return {name: bounds(f) for name, f in cls.__pydantic_fields__.items()
            if describe(f).startswith(("a whole number", "a number"))}


@functools.lru_cache(maxsize=256)
def _adapter(t) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(t, config=ConfigDict(strict=True, allow_inf_nan=False))


def check_type(t, value, name: str = ""):
    """``value`` checked as type ``t`` (a setting outside any schema object: a command's ``--seed``), refused in
    one line beginning with ``name``; returns it as the type holds it."""
    try:
        adapter = _adapter(t)
    except TypeError:  # a type whose constraints do not hash: made for this call
        adapter = _adapter.__wrapped__(t)
    try:
        return adapter.validate_python(value)
    except ValidationError as e:
        raise SchemaError(_problem(e.errors(include_url=False)[0], name, t)) from None


def check_value(cls: type, name: str, value, label: str = "option"):
    """``value`` checked as field ``name`` of schema ``cls`` is, alone (a step that needs one field before the
    object exists: a fit refuses a bad form before it fits); returns it as the schema would hold it."""
    return check_type(_full(cls.__pydantic_fields__[name]), value, _at(label, name))

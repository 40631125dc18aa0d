"""Strict JSON: text parsed so a key given twice, a lone surrogate or a number too long for Python is named
with its place, and values written so NaN or infinity never reach a file as bare ``NaN``."""

from __future__ import annotations

import json
import math
import re
import sys

from .console import repeated, said
from .files import read_text
from json import decoder, scanner


#: A JSON \u escape of a UTF-16 surrogate (D800-DFFF) whose backslash is not itself escaped. JSON spells a
#: character beyond the first 65,536 as two of them; one alone decodes into a Python str that cannot be written
#: as UTF-8, so a question, passage or answer holding one failed after the model had run, or inside tantivy.
_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*\\u([dD][89a-fA-F][0-9a-fA-F]{2})")


def lone_surrogate(text: str) -> tuple[int, str] | None:
    """(line, escape) of the first surrogate escape in JSON ``text`` that is not half of a pair, or None."""
    if "\\u" not in text:  # the common case, for the cost of one scan
        return None
    high = None  # a high surrogate's escape, waiting for its low half right after it
    for m in _SURROGATE.finditer(text):
        low = int(m.group(1), 16) >= 0xDC00
        if high is None and not low:
            high = m
        elif high is not None and low and m.start(1) - 2 == high.end():
            high = None  # a pair: one character
        else:
            return _escape_at(text, high or m)
    return _escape_at(text, high) if high else None


def _escape_at(text: str, m: re.Match) -> tuple[int, str]:
    return text.count("\n", 0, m.start(1)) + 1, text[m.start(1) - 2:m.end()]


def check_escapes(text: str, where: str, error: type[Exception] = ValueError, line: int | None = None,
                  numbered: bool = True) -> None:
    """Refuse JSON ``text`` (file ``where``, or a flag's value where not ``numbered``) that escapes half a
    surrogate pair, naming its line: decoded, it is not text any file, index or response can hold."""
    found = lone_surrogate(text)
    if found:
        n, esc = found
        at = f"{where}:{n if line is None else line}" if numbered else where
        raise error(f"{at}: {esc} is half of a surrogate pair (JSON escapes a character past U+FFFF as two), "
                    "not text")


def loads(text: str):
    """``json.loads`` whose input nested past the parser's recursion limit (``[[[[...`` a hundred thousand deep:
    a corrupt or hostile file) or holds a number past Python's bound on digits is a ``json.JSONDecodeError``
    where that starts, as any other malformed JSON is, instead of a traceback or advice meant for programmers;
    an object that gives a key twice is a :class:`KeyTwice` where that object starts."""
    try:
        return json.loads(text, object_pairs_hook=_once)
    except _KeyTwice as e:
        raise KeyTwice(f"the key {said(e.key)} is given twice in one object: which is meant? give it once",
                       text, _twice_at(text)) from None
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to read (over 500 levels of brackets)", text,
                                   _too_deep_at(text, 500)) from None
    except ValueError as e:  # a JSONDecodeError passes: it says no such thing
        if (why := too_many_digits(e)) is None:
            raise
        at = re.search(r"\d{%d,}" % (sys.get_int_max_str_digits() + 1), text)
        raise json.JSONDecodeError(why, text, at.start() if at else 0) from None


class KeyTwice(json.JSONDecodeError):
    """JSON that parses, where one object gives a key twice (:func:`loads`)."""


class _KeyTwice(Exception):
    def __init__(self, key: str):
        self.key = key


def _once(pairs: list) -> dict:
    """An object's (key, value) pairs as a dict, where each key is given once: of ``"answer": "Paris",
    "answer": "Lyon"`` no reader can say which is meant."""
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _KeyTwice(repeated(k for k, _ in pairs))
    return d


def _twice_at(text: str) -> int:
    """Where the first object that gives a key twice starts in ``text`` (read again by the pure-Python
    scanner, whose objects know where they start: only on this path, which ends in an error)."""
    class Finder(json.JSONDecoder):
        def __init__(self):
            super().__init__(object_pairs_hook=_once)
            self.parse_object = self._object
            self.scan_once = scanner.py_make_scanner(self)

        @staticmethod
        def _object(s_and_end, *rest):
            try:
                return decoder.JSONObject(s_and_end, *rest)
            except _KeyTwice:
                raise _At(s_and_end[1] - 1) from None

    class _At(Exception):
        def __init__(self, pos: int):
            self.pos = pos

    try:
        Finder().decode(text)
    except _At as e:
        return e.pos
    except Exception:  # noqa: BLE001 - the position is a courtesy; the error stands without it
        pass
    return 0


def too_many_digits(e: BaseException) -> str | None:
    """Python's bound on int(str) ("Exceeds the limit (4300 digits) ... use sys.set_int_max_str_digits()", advice
    meant for programmers) in a user's words; None for any other error."""
    if isinstance(e, ValueError) and "integer string conversion" in str(e):
        return f"a number of over {sys.get_int_max_str_digits():,} digits"
    return None


def _too_deep_at(text: str, depth: int) -> int:
    """Where ``text``'s brackets (outside strings) first open ``depth`` levels deep (0 if they never do)."""
    level, quoted, escaped = 0, False, False
    for i, ch in enumerate(text):
        if quoted:
            quoted, escaped = (escaped or ch != '"'), (not escaped and ch == "\\")
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            level += 1
            if level > depth:
                return i
        elif ch in "]}":
            level -= 1
    return 0


def native(v):
    """A NumPy scalar (a sweep over ``np.arange``, a DataFrame's cell), or a 0-d array or tensor, as Python's own
    number, bool or text; anything else as given: what a config holds stays JSON, and a sweep's values pass the
    same checks as typed ones."""
    return v.item() if getattr(v, "ndim", None) == 0 and hasattr(v, "item") else v


def parse_json(text: str, where: str, error: type[Exception] = ValueError):
    """``text`` (the content of file ``where``) as JSON; bad JSON raises ``error`` naming ``where:line``."""
    try:
        value = loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}:{e.lineno}: invalid JSON ({e.msg})") from None
    check_escapes(text, where, error)
    return value


def json_file(path: str, error: type[Exception] = ValueError):
    """A JSON file's content; a missing file, bytes that are not UTF-8 or bad JSON raise ``error`` naming it."""
    return parse_json(read_text(str(path), error), str(path), error)


def spelled(x: float) -> str | None:
    """A non-finite number as a config spells it: the text "inf" / "-inf" its number options read back; NaN
    as null."""
    return ("inf" if x > 0 else "-inf") if x == x else None


def finite(x, spell: bool = False):
    """A JSON-safe copy: each non-finite float null ("no figure"), or with ``spell`` :func:`spelled` (a
    threshold of -inf is "always", not "unset"); tuples become lists."""
    if isinstance(x, float) and not math.isfinite(x):
        return spelled(x) if spell else None
    if isinstance(x, dict):
        return {k: finite(v, spell) for k, v in x.items()}
    return [finite(v, spell) for v in x] if isinstance(x, (list, tuple)) else x


def strict_json(obj, *, spell: bool = False, **kw) -> str:
    """``json.dumps`` that every JSON reader takes: Python writes NaN and Infinity, which jq and JSON.parse refuse
    (the whole file); :func:`finite` makes them null, or spells them."""
    return json.dumps(finite(obj, spell), allow_nan=False, **kw)

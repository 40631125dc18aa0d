"""The checks every door asks of a value a user gives: a question is visible, encodable text; a number
is in its range; a record's fields have their kinds."""

from __future__ import annotations

import math

import numpy as np

from .console import without_controls


def blank(text: str) -> bool:
    """No visible character: empty, spaces, control or zero-width characters, or a console's escapes only. Only
    an escape's tail is printable, so the text is cleaned only where it holds an ESC (every passage of an
    index build passes here, and the plain strip is 50 times cheaper)."""
    if "\x1b" in text:
        text = without_controls(text)
    return not any(ch.isprintable() and not ch.isspace() for ch in text)


def encodable(text: str) -> bool:
    """Text a file, tokenizer or response can hold: no lone surrogate (half a JSON pair; a shell's undecodable
    byte arrives as one too)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def question_text(q: str) -> str:
    """The rule of a question, at every door (the commands, the Python API, HTTP, a data file's rows through
    ``Example``): encodable as UTF-8 (a shell can pass undecodable bytes) and a visible character at least."""
    if not encodable(q):  # first: bytes a shell passed undecoded are no visible text either, and not "empty"
        raise ValueError("not valid UTF-8 (undecodable bytes, or half a surrogate pair)")
    if blank(q):
        raise ValueError("empty (no visible text)")
    return q


def check_question(q: str, error: type[Exception] = ValueError) -> str:
    """:func:`question_text` for a door that takes the question alone, named ``question``."""
    if not isinstance(q, str):  # b"Who?" or ["Who?"] from Python: the kind, and how to decode bytes
        raise TypeError(f"question: expected text, got {type(q).__name__}"
                        + (" (decode it: question.decode('utf-8'))" if isinstance(q, bytes) else ""))
    try:
        return question_text(q)
    except ValueError as e:
        raise error(f"question: {e}") from None


def labels(positives, shape: tuple | None, what: str, meaning: str = "") -> np.ndarray:
    """``positives`` as booleans, one for each score (``shape``, the scores'; None: the caller counts them):
    True/False or 1/0 (a float 1.0/0.0 too), the one rule for every label a statistic or a fit reads
    (``meaning`` says what True is). Text labels and values other than 0/1 are refused: "no" would count as
    True."""
    y = np.asarray(positives)
    if y.dtype.kind != "b" and (y.dtype.kind not in "iuf" or not np.isin(y, (0, 1)).all()):
        odd = y.ravel()[0] if y.dtype.kind not in "iuf" else y[~np.isin(y, (0, 1))].ravel()[0]
        odd = odd.item() if isinstance(odd, np.generic) else odd
        raise ValueError(f"{what}: labels must be booleans (True/False or 1/0{meaning}), got {odd!r}")
    y = y.astype(bool)
    if shape is not None and y.shape != shape:  # numpy's "boolean index did not match" before
        raise ValueError(f"{what}: {math.prod(shape)} scores but {y.size} labels")
    return y

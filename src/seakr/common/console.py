"""What the console shows: text without a terminal's escapes, values quoted as errors quote them, the
nearest valid name for a misspelt one, and warnings said once."""

from __future__ import annotations

import math
import re
import sys
from typing import Iterable
import difflib


#: control characters other than newline and tab, as escapes: a terminal acts on them (ESC starts a colour, a
#: title or a clipboard write; CR overwrites the line shown)
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))}


def repeated(items: Iterable):
    """The first item that an earlier one equals; None where each is given once (a column's name, an id)."""
    seen: set = set()
    return next((x for x in items if x in seen or seen.add(x)), None)


def misspelled(rec, names) -> str | None:
    """Why a record's key is read as no field: it spells one of ``names`` (lower case) in other case or spacing
    ("key 'Title' is read as no field: name it 'title'"); None where no key does. A table's header is read in
    any case; a record's keys are read as they are spelled."""
    for k in rec:
        if isinstance(k, str) and k not in names and (low := k.strip().lower()) in names:
            if low in rec:  # both: which is meant? ("answer" read, "ANSWER" dropped unsaid)
                return f"keys {low!r} and {said(k)} spell one field two ways; give it once"
            return f"key {said(k)} is read as no field: name it {low!r}"
    return None


def said(v) -> str:
    """An option's value as an error quotes it: a whole number of thousands of digits by its size (its repr
    raised "Exceeds the limit (4300 digits)", advising sys.set_int_max_str_digits), anything else's repr cut
    to 80 characters (a pasted passage as a marker)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10 ** 80:
        return f"a whole number of about {int(v.bit_length() * math.log10(2)) + 1:,} digits"
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


#: A terminal's escape sequences (colours, a window title) and every control character that is not whitespace.
_TERMINAL = re.compile(r"\x1b\[[0-?]*[ "
                       r"-/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


def without_controls(text: str) -> str:
    """Text without terminal escapes and control characters (whitespace stays), so a question pasted from a
    console reaches the prompt and the search as the words it shows."""
    return _TERMINAL.sub("", text)


def shown(text) -> str:
    """Text from a corpus, a dataset or the model as a console should show it: its control characters escaped
    (a passage holding "\x1b]0;title\x07" retitled the terminal that ran `seakr search`)."""
    return str(text).translate(_CONTROLS)


_LONG_RUN = re.compile(r"\S{241,}")


def message(text) -> str:
    """An error or warning line as a console should show it: :func:`shown`, and any run of over 240 characters
    without a space (a value of 5,000 digits, a passage given as a path) cut in its middle, saying how long
    it was."""
    return _LONG_RUN.sub(lambda m: f"{m[0][:160]}...({len(m[0]):,} characters)...{m[0][-40:]}", shown(text))


def nearest(value, choices, cutoff: float = 0.6) -> str | None:
    """The choice closest to ``value`` read in lower case without punctuation (a model's, an estimator's or a
    decision's name as its makers capitalise it: "EigenScore", "Probe", "Qwen2.5-Coder-0.5B"), else None: the one
    likeness every did-you-mean of seakr reads."""
    if not isinstance(value, str):
        return None
    flat = lambda text: re.sub(r"[^0-9a-z]", "", text.lower())  # noqa: E731 -- "Max Entropy" is max-entropy
    key, names = flat(value), {flat(str(c)): str(c) for c in choices}
    # a name that begins the value (the longest), or that the value begins (the shortest), before letters in
    # common: "EigenScore" is eigen, not hidden-score; a name of one or two letters begins too much to say ("keep"
    # is not --k), and is meant only where it is the value
    longer = [f for f in names if f and key.startswith(f) and (len(f) >= 3 or f == key)]
    shorter = [f for f in names if len(key) >= 3 and f.startswith(key)]
    if longer or shorter:
        return names[max(longer, key=len)] if longer else names[min(shorter, key=len)]
    close = difflib.get_close_matches(key, list(names), n=1, cutoff=cutoff)  # "--" is no likeness
    return names[close[0]] if close else None


def did_you_mean(value, choices, cutoff: float = 0.6) -> str:
    """`` (did you mean 'x'?)`` for :func:`nearest` choice, else ``""``."""
    close = nearest(value, choices, cutoff)
    return f" (did you mean {close!r}?)" if close is not None else ""


def unknown_choice(kind: str, value, choices) -> str:
    """``unknown KIND 'x' (did you mean 'y'?); choose from a, b``: a name outside a fixed set, in one sentence."""
    return f"unknown {kind} {value!r}{did_you_mean(value, choices)}; choose from {', '.join(choices)}"


_WARNED: set[str] = set()


def warn(msg: str, once: bool = False) -> None:
    """One line on stderr for what goes on but should be known (a skipped row, a missing shard, a fallback);
    ``once``: not again in this process (a server builds a method per request)."""

    if once and msg in _WARNED:
        return
    _WARNED.add(msg)
    print(f"seakr: warning: {message(msg)}", file=sys.stderr)  # it may quote a file's name or a dataset's text


def first_line(e: BaseException, limit: int = 200) -> str:
    """An exception's message as one line for an error of ours: its first line, cut at ``limit``; the
    exception's type where it has no message (``str(e).splitlines()[0]`` raised IndexError there)."""
    text = str(e).strip()
    return text.splitlines()[0][:limit] if text else type(e).__name__

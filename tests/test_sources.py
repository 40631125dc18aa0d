"""Rules the source itself keeps, read from its syntax tree."""

import ast
from pathlib import Path

import seakr

#: ``X.open(...)`` calls that are not a text file's open (gzip's and os's take bytes or flags; the rest are
#: seakr's and tantivy's own ``open`` constructors).
NOT_TEXT_OPENS = ("gzip", "os", "t.Index", "StateStore", "cls", "webbrowser")


def _text_io_without_encoding(tree: ast.AST):
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name not in ("open", "read_text", "write_text") or any(k.arg == "encoding" for k in n.keywords):
            continue
        if isinstance(f, ast.Name) and name != "open":
            continue  # common.files.read_text, seakr's own reader (it decodes UTF-8 itself)
        base = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
        if base in NOT_TEXT_OPENS:
            continue
        if name == "open":
            pos = 1 if isinstance(f, ast.Name) else 0
            mode = n.args[pos] if len(n.args) > pos else next((k.value for k in n.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and "b" in mode.value:
                continue
        yield n.lineno, ast.unparse(n)


def test_every_text_file_seakr_opens_names_its_encoding():
    """Without ``encoding=``, Python reads and writes in the locale's encoding: on Windows (cp1252) or a Latin-1
    locale a run's summary, a report or the viewer's own files would be written in one encoding and read back in
    another, or fail on a character the code page lacks. Every text open names UTF-8."""
    root = Path(seakr.__file__).parent
    found = [f"{p.relative_to(root)}:{line}: {call}" for p in sorted(root.rglob("*.py"))
             for line, call in _text_io_without_encoding(ast.parse(p.read_text(encoding="utf-8")))]
    assert not found, "\n".join(found)

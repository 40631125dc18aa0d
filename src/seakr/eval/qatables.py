"""Question-answer tables: a CSV or TSV with a header naming its question and answer columns (PopQA's TSV, one's
own), and the HotpotQA/2Wiki train subsets' CSV whose answers and titles are Python-list strings."""

from __future__ import annotations

import itertools
import json
import re

from ..common.files import MAX_LINE, lines as file_lines
from ..common.tables import column_twice, csv_rows, row_width_refused
from ..common.layouts import QA_CSV_HEADER, TABLE_COLUMNS, DatasetError, question_delimiter
from .metrics import number_text
from .example import example_at
import csv
import ast


def _py_list(where: str, field: str, text: str) -> list[str]:
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        v = None
    if not isinstance(v, list):
        raise DatasetError(f"{where}: field '{field}' should be a list such as ['a', 'b'], got {text[:40]!r}")
    return [str(x) for x in v]


def load_qa_csv(path):
    csv.field_size_limit(MAX_LINE)  # 128 KB by default: too small for a long Documents field
    lines = (line for _, line in file_lines(path, DatasetError, MAX_LINE))
    reader = csv.reader(lines)
    header = next(reader, None)
    if header != QA_CSV_HEADER:
        raise DatasetError(f"{path}:1: expected the header {','.join(QA_CSV_HEADER)}, got "
                           f"{','.join(header or [])[:80]!r}")
    for n, row in csv_rows(reader, path, DatasetError):
        where = f"{path}:{n}"
        if len(row) != 4:
            raise DatasetError(row_width_refused(path, reader, n, len(row), f"4 fields ({','.join(QA_CSV_HEADER)})"))
        yield where, example_at(where, DatasetError, row[0], row[1], _py_list(where, "Answers", row[2]),
                                list(dict.fromkeys(_py_list(where, "Documents", row[3]))),
                      [], "", "2wikimultihopqa" if "2wiki" in path.lower() else "hotpotqa")


_QUOTED = r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"'  # one quoted string, either quote, escapes kept


#: a NumPy array of strings as pandas writes it to CSV (a Parquet split's list column): ['Paris' 'Lima'], no commas
_ARRAY = re.compile(rf"\[\s*(?:(?:{_QUOTED})\s*)+\]")


def _cell_answers(text: str) -> list[str]:
    """A table cell's answers: a JSON or Python list (``["cat", "Felis catus"]``, PopQA's ``possible_answers``),
    answers split by ``|`` (``Lima | Ciudad de los Reyes``: no factoid answer holds one), or else one answer
    as written (a cell that parses as no list is that answer)."""
    s = text.strip()
    if _ARRAY.fullmatch(s):  # before Python's parse, which reads 'Paris' 'Lima' as the one string 'ParisLima'
        return [re.sub(r"\\(.)", r"\1", q[1:-1]) for q in re.findall(_QUOTED, s)]
    if s.startswith("[") and s.endswith("]"):
        for parse in (json.loads, ast.literal_eval):
            try:
                v = parse(s)
            except (ValueError, SyntaxError, RecursionError, MemoryError):
                continue
            if isinstance(v, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
                return [x if isinstance(x, str) else number_text(x) for x in v]
    if "|" in s:
        return [a.strip() for a in s.split("|") if a.strip()] or [s]
    return [s]


def table_columns(header: list[str], where: str) -> dict[str, int | None]:
    """Column index of each of ``TABLE_COLUMNS`` in ``header``; a missing question column is named (without an
    id column the rows are numbered; without an answer column the questions are read alone, unscored)."""
    low = [h.strip().lower() for h in header]
    if twice := column_twice(header, [n for names in TABLE_COLUMNS.values() for n in names]):
        raise DatasetError(f"{where}: {twice}")
    cols = {k: next((low.index(n) for n in names if n in low), None) for k, names in TABLE_COLUMNS.items()}
    if cols["question"] is None:
        names = " or ".join(TABLE_COLUMNS["question"])
        raise DatasetError(f"{where}: a question-answer table needs a column named {names} (the header has "
                           f"{', '.join(header)[:120]})")
    return cols


def load_table(path):
    """A CSV or TSV of questions and answers with a header row (``TABLE_COLUMNS``), its delimiter told by the
    header line (``question_delimiter``); an answer cell may hold a list (see ``_cell_answers``)."""
    csv.field_size_limit(MAX_LINE)
    lines = (line for _, line in file_lines(path, DatasetError, MAX_LINE))
    first = next(lines, "")
    reader = csv.reader(itertools.chain([first], lines), delimiter=question_delimiter(first))
    header = next(reader, None) or []
    cols = table_columns(header, f"{path}:1")
    for n, row in csv_rows(reader, path, DatasetError):
        where = f"{path}:{n}"
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise DatasetError(row_width_refused(path, reader, n, len(row), f"{len(header)} fields (as the header)"))
        qid = row[cols["id"]] if cols["id"] is not None else f"row-{reader.line_num}"
        answers = _cell_answers(row[cols["answers"]]) if cols["answers"] is not None else []
        yield where, example_at(where, DatasetError, qid, row[cols["question"]], answers, [], [], "", "table")

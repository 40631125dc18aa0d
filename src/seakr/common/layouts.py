"""Which dataset layout a data file's head shows: the loaders read by it, and a corpus's reader asks it too,
to refuse a file of questions given where passages go."""

from __future__ import annotations

import os

from .tables import head as file_head, table_delimiter
import csv


#: The header of the question-answer CSV layout (HotpotQA / 2Wiki train subsets: answers and supporting
#: titles as Python-list strings, no paragraph text): enough for closed-book labels, not for retrieval.
QA_CSV_HEADER = ["ID", "Question", "Answers", "Documents"]


#: The columns a question-answer table (CSV or TSV with a header; PopQA's TSV is one) is read from, matched
#: without regard to case: the first name present of each; no id column numbers the rows (``row-<line>``)
TABLE_COLUMNS = {"id": ("id", "qid", "question_id", "_id"), "question": ("question", "query"),
                 "answers": ("answers", "answer", "possible_answers", "golden_answers", "gold_answers")}


class DatasetError(ValueError):
    pass


def names_question(cells: list[str]) -> bool:
    return any(h.strip().lower() in TABLE_COLUMNS["question"] for h in cells)


def question_delimiter(line: str) -> str:
    """The delimiter of a question-answer table: the one its header line gives a question column by."""
    return table_delimiter(line, TABLE_COLUMNS["question"])


def _table_header(head: str) -> list[str] | None:
    """The header of a question-answer table opening ``head``: a first line, not JSON, with a question column."""
    first = head.split("\n", 1)[0].rstrip("\r")
    if first.lstrip().startswith(("{", "[")):
        return None
    header = next(csv.reader([first], delimiter=question_delimiter(first)), [])
    return header if names_question(header) else None


def layout_of(path: str) -> str | None:
    """The layout a data file's head shows, or None (an empty file is refused)."""
    name = os.path.basename(path).lower()
    head = file_head(path, 4096, DatasetError)
    if not head.strip() or head.strip() in ("[]", "{}"):
        raise DatasetError(f"{path}: no questions in this file")
    if head.startswith(",".join(QA_CSV_HEADER)):
        return "qa-csv"
    header = _table_header(head)
    if header is not None:
        return "table"
    if '"Data"' in head and '"QuestionId"' in head or '"question_source"' in head or "trivia" in name:
        return "triviaqa"
    if '"questions"' in head and '"links"' in head or "iirc" in name:
        return "iirc"
    if '"paragraph_text"' in head or "musique" in name:
        return "musique"
    if '"paragraphs"' in head or '"answer_start"' in head or "squad" in name:
        return "squad"
    if '"ctxs"' in head or ('"answers"' in head and '"question"' in head and '"context"' not in head):
        return "nq"
    if "2wiki" in name or '"evidences"' in head or ('"golden_answers"' in head and '"context"' in head):
        return "2wiki"
    if '"golden_answers"' in head:
        return "flashrag"
    if '"supporting_facts"' in head or "hotpot" in name:
        return "hotpotqa"
    if '"question"' in head and ('"answer"' in head or '"possible_answers"' in head):  # NQ-open's official
        # release; any plain question/answer file; PopQA's records
        return "nq"
    if '"question"' in head and '"context"' in head:  # HotpotQA's test split: no answers, no supporting facts
        return "hotpotqa"
    if '"question"' in head:  # questions alone (a test split, one's own): answered, not scored
        return "nq"
    return None

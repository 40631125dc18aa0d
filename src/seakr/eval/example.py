"""One question of a dataset, as every loader reads it and a Python caller builds it: its id, text, gold answers
and, where the dataset has them, its paragraphs and supporting titles. One schema holds a file's rows and a
caller's list to the same rules, and :func:`check_questions` the rules across them; each door names where a
question was given (a file's line, ``examples[i]``)."""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Annotated, Callable, Sequence

from pydantic import AfterValidator, Strict

from ..common.checks import question_text
from ..common.schema import SchemaError, schema


#: Visible, encodable text (the question's rule): an id keys its row (written, resumed and paired by id); a
#: question is asked.
Visible = Annotated[str, Strict(), AfterValidator(question_text)]


@schema("example", strict=False)
class Example:
    id: Visible
    question: Visible
    answers: list[Annotated[str, Strict()]]  # gold answers + aliases; [] for none (answered, not scored)
    supporting_titles: list[str] = field(default_factory=list)
    contexts: list[tuple[str, str]] = field(default_factory=list)  # (title, text) paragraphs given with the question
    type: str = ""
    dataset: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def example_at(where: str, error: type[ValueError], *args) -> Example:
    """``Example(*args)`` for a file's loader: a refusal names the file and line ``where``."""
    try:
        return Example(*args)
    except SchemaError as e:
        raise error(f"{where}: {e}") from None


def check_questions(examples: Sequence[Example], where: Callable[[int], str], error: type[ValueError] = ValueError):
    """The rules across the questions of a run, from a file or a caller: ids unique (rows are written, resumed and
    compared by id), and a gold answer on every question or on none (a test split is answered unscored; one
    question without among others would score 0 unsaid). ``where(i)``: how the door names question ``i``."""
    seen: dict[str, int] = {}
    for i, ex in enumerate(examples):
        if ex.id in seen:
            raise error(f"{where(i)}: id {ex.id!r} repeats the question at {where(seen[ex.id])}; ids must be unique "
                        "(rows are written, resumed and compared by id)")
        seen[ex.id] = i
    bare = [i for i, ex in enumerate(examples) if not any(a.strip() for a in ex.answers)]
    if bare and len(bare) < len(examples):
        raise error(f"{where(bare[0])}: question {examples[bare[0]].id!r} has no gold answer, but "
                    f"{len(examples) - len(bare)} other(s) have; give it one, or leave out every answer to run the "
                    "questions unscored")

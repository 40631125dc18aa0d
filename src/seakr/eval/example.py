"""One question of a dataset, as every loader reads it: its id, text, gold answers and, where the dataset has
them, its paragraphs and supporting titles."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Example:
    id: str
    question: str
    answers: list[str]  # gold answers + aliases
    supporting_titles: list[str] = field(default_factory=list)
    contexts: list[tuple[str, str]] = field(default_factory=list)  # (title, text) paragraphs given with the question
    type: str = ""
    dataset: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

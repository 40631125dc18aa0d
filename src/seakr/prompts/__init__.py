"""Prompt templates and in-context demonstrations (our own words; data files in ``prompts/data``).

Layout of a prompt (plain style, paper Appendix B, worded by us)::

    <instruction>

    Question: <demo question>
    Answer: <step>. <step>. So the answer is <answer>.
    ... (n_shot demonstrations)                        <- the cached prefix ends here
    Context:                                            <- only when passages are given
    [1] <passage text>
    <context footer>
    Question: <question>
    Answer: <accepted step>. <accepted step>.           <- the rationale buffer R

Why steps never contain ". ": the method stops each generation at ". " to get exactly one sentence
(the reference's trick: its demonstrations have every internal period removed). Our demonstrations
are written without internal periods, and periods followed by a space in the question are dropped.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Sequence

from pydantic import AfterValidator, Field, Strict

from ..common.console import did_you_mean, without_controls
from ..common.files import check_rereadable, is_url, missing, read_text
from ..common.jsontext import check_escapes, loads
from ..common.runs import path_shaped
from ..common.schema import SchemaError, schema
MARKER = "So the answer is"
#: Where a text gives its answer ("... the answer is X", MARKER's words): a chain's step that does ends the chain
#: (methods/text.py reads the answer after it), so a demonstration's steps never do.
ANSWER_SAYS = re.compile(r"the (?:final )?answer is\s*:?\s*", re.IGNORECASE)
#: ``auto``: the packaged model's measured better style, else plain (settled when a method is built).
PROMPT_STYLES = ("plain", "chat", "auto")


def instruction(marker: str = MARKER) -> str:
    """The chain's instruction, naming the marker the demonstrations end with (a method's own ``marker`` too:
    told "So the answer is" and shown "The result is", a model may say either)."""
    return ("Answer each question by reasoning in short sentences, one fact per sentence. "
            f'When you know the answer, finish with "{marker}" followed by a short answer.')


INSTRUCTION = instruction()
#: The knowledge check's instruction: a short answer and nothing else. Its U is read where SeaKR's own
#: forms have none: on a few words the model either knows, and its samples agree, or it does not.
#: (Worded on train questions: naming the kinds of answer, "yes or no" among them, made the 0.5B answer
#: "Yes" to most questions; this wording did not.)
SHORT_INSTRUCTION = "Give only the short answer to the question, without explanation."
SHORT_STOPS = ("\n", "Question:")
SHORT_TOKENS = 24  # room for a short answer (the check and the detect study's short form share it)


@dataclass(frozen=True)
class ShortWording:
    """How the knowledge check asks: a system instruction (None: the chat template's own), the user's turn
    (``{question}`` is filled in) and the words the answer follows. The check's U and every probe and map
    fitted on its answers belong to one wording: change it and they must be refitted."""

    system: str | None = SHORT_INSTRUCTION
    user: str = "Question: {question}"
    lead: str = "Answer:"


SHORT_WORDING = ShortWording()


def wording_record(wording: ShortWording = SHORT_WORDING) -> dict:
    """The wording as studies and fitted files record it (what :func:`check_wording` compares)."""
    return dataclasses.asdict(wording)


def check_wording(provenance: dict, where: str) -> None:
    """A probe or map fitted on the check's answers must have been fitted on this wording's answers (files
    that predate the record carry none and are taken as they are)."""
    got = provenance.get("wording")
    if got is not None and got != wording_record():
        raise ValueError(f"{where}: fitted on the knowledge check's answers to another wording ({got}); "
                         f"this version asks {wording_record()}: refit it (seakr detect --form short, seakr probe fit)")


CONTEXT_HEADER = "Context:"
CONTEXT_FOOTER = "Use the context above where it helps, and answer in the same style as the examples."
FAMILIES = ("hotpotqa", "2wikimultihopqa", "simpleqa")
_SENTINEL = "\x00SEAKR-SPLIT\x00"


def _one_line(v: str) -> str:
    if not v.strip():
        raise ValueError("empty; give visible text")
    if "\n" in v:
        raise ValueError("holds a line break (the prompt reads one line each)")
    return v


def _a_step(t: str) -> str:
    """One sentence that does not say the answer: a step ends at '. ' or a line break (the model would learn to
    stop mid-step), and a chain ends at a step that says the answer (rendered, the demonstration would say its
    answer twice, the first time mid-chain)."""
    if not t.strip():
        raise ValueError("an empty sentence")
    if ". " in t.rstrip(". ") or "\n" in t:
        raise ValueError(f"holds a stop string ('. ' or a line break): {t!r}")
    if ANSWER_SAYS.search(t):
        raise ValueError(f"gives the answer ({t!r}); a chain ends at such a step, and the prompt adds '{MARKER} ...' "
                         "after the steps: put the answer in 'answer' only")
    return t


Line = Annotated[str, Strict(), AfterValidator(_one_line)]


@schema("field", strict=False)
class Demo:
    """One demonstration, as the model will see it: a one-line question, its steps (one sentence each), the
    answer said after the marker."""

    question: Line
    steps: list[Annotated[str, Strict(), AfterValidator(_a_step)]]
    answer: Line
    type: Annotated[str, Strict()] = ""

    def render(self, marker: str = MARKER) -> str:
        body = " ".join(s.rstrip(". ") + "." for s in self.steps)
        return f"Question: {self.question}\nAnswer: {body} {marker} {self.answer}."


@schema("field", strict=False)
class PromptSetFile:
    """A prompt set's file: at least one demonstration (a set of none would prompt the question alone, with no
    example of the steps or the marker; n_shot=0 asks without them)."""

    demos: Annotated[list[Demo], Field(min_length=1)]
    name: Annotated[str, Strict()] | None = None
    description: Annotated[str, Strict()] = ""


@dataclass
class PromptSet:
    name: str
    demos: list[Demo] = field(default_factory=list)
    description: str = ""

    @classmethod
    def load(cls, name_or_path: str) -> "PromptSet":
        """A packaged family (hotpotqa, 2wikimultihopqa, simpleqa) or a JSON file of the same shape."""
        if isinstance(name_or_path, str) and not name_or_path.strip():  # "" names no file (not the current folder)
            raise ValueError(f"an empty prompt set name; give {', '.join(FAMILIES)} or a JSON file, or leave it out")
        if name_or_path in FAMILIES:
            raw = resources.files("seakr.prompts").joinpath("data", f"{name_or_path}.json").read_text(encoding="utf-8")
            src = name_or_path
        else:
            p = Path(name_or_path)
            if not p.exists():
                if name_or_path == "-" or is_url(name_or_path):
                    raise ValueError(f"prompt set {name_or_path}: {missing(name_or_path)}")
                raise ValueError(_unknown_set(name_or_path))
            check_rereadable(p, "a prompt set is read when the options are checked and again by the method")
            raw, src = read_text(str(p)), str(p)  # a BOM dropped, bytes that are not UTF-8 named
        try:
            d = loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(f"{src}: malformed prompt set ({e})") from e
        check_escapes(raw, src)
        if not isinstance(d, dict):
            raise ValueError(f"{src}: malformed prompt set (expected an object with a list 'demos')")
        try:
            f = PromptSetFile(**d)
        except SchemaError as e:
            raise ValueError(f"{src}: {e}") from None
        return cls(f.name or src, f.demos, f.description)


def _unknown_set(name: str) -> str:
    """Why a prompt set that names no file is none: a path's file is missing, or a family's name is misspelled
    (the nearest one suggested)."""
    choices = f"{', '.join(FAMILIES)} or a JSON file"
    if name.lower().endswith(".json") or path_shaped(name):
        return f"prompt set '{name}': no such file (a prompt set is {choices})"
    return f"unknown prompt set '{name}'{did_you_mean(name, FAMILIES, cutoff=0.5)}: use {choices}"


@functools.lru_cache(maxsize=None)
def _packaged(name: str) -> PromptSet:
    return PromptSet.load(name)


def prompt_set(name_or_path: str) -> PromptSet:
    """A prompt set as options are checked against it (a packaged one read once; a file read each time: it may
    change). Raises ValueError for an unknown or malformed set."""
    return _packaged(name_or_path) if name_or_path in FAMILIES else PromptSet.load(name_or_path)


def family_for(dataset: str) -> str:
    """Prompt family for a dataset name (HotpotQA/IIRC -> hotpotqa, 2Wiki -> 2wiki, simple QA and a question-answer
    table -> simpleqa)."""
    d = dataset.lower()
    if "2wiki" in d:
        return "2wikimultihopqa"
    if any(x in d for x in ("nq", "natural", "trivia", "squad", "simple", "table")):
        return "simpleqa"
    return "hotpotqa"


def clean_question(q: str) -> str:
    """The question on one line, its spaces single, and without a period followed by a space ("St. Louis" -> "St
    Louis") so a copied name cannot end a step; a newline inside would break the prompt's "Question: ..."
    line (a blank line separates one demonstration from the next). Terminal escapes and control characters go
    (:func:`without_controls`)."""
    return re.sub(r"\. ", " ", " ".join(without_controls(q).split()))


def clean_step(s: str) -> str:
    return s.strip().rstrip(".").replace(". ", " ").strip()


class PromptBuilder:
    """Renders prompts for one prompt set; returns (prompt, cacheable prefix).

    Args:
        prompt_set: family name or JSON path.
        n_shot: how many demonstrations (all by default).
        style: ``plain`` (raw completion, as the reference) or ``chat`` (the model's chat template).
        chat: ``messages -> text``, the model's chat template (a model's ``format_chat``); needed for ``chat``.
        titles: put passage titles in the context (the paper puts only the text).
    """

    def __init__(self, prompt_set: str = "hotpotqa", n_shot: int | None = None, style: str = "plain",
                 chat=None, titles: bool = False, marker: str = MARKER):
        if style not in ("plain", "chat"):
            raise ValueError(f"prompt style must be plain or chat, not {style!r}")
        if style == "chat" and chat is None:
            raise ValueError("prompt style 'chat' needs the model's chat template")
        self.set = PromptSet.load(prompt_set)
        self.n_shot = len(self.set.demos) if n_shot is None else n_shot
        self.style, self.chat, self.titles, self.marker = style, chat, titles, marker
        # the demonstrations and the blank line after them (none without demonstrations: n_shot=0 left two)
        self.demos = "".join(d.render(marker) + "\n\n" for d in self.set.demos[: self.n_shot])
        self.instruction = instruction(marker)

    def context_block(self, passages: Sequence) -> str:
        if not passages:
            return ""
        lines = []
        for i, p in enumerate(passages, 1):
            text = p if isinstance(p, str) else (f"{p.title}: {p.text}" if self.titles and p.title else p.text)
            lines.append(f"[{i}] {' '.join(without_controls(text).split())}")  # a corpus's stray escapes too
        return f"{CONTEXT_HEADER}\n" + "\n".join(lines) + f"\n{CONTEXT_FOOTER}\n"

    def render(self, question: str, steps: Sequence[str] = (), passages: Sequence = (),
               tail: str = "") -> tuple[str, str]:
        """Prompt for the next step (or, with ``tail``, e.g. a forced marker) and its cacheable prefix."""
        q = clean_question(question)
        answer = "Answer:" + "".join(" " + clean_step(s) + "." for s in steps if clean_step(s)) + tail
        ctx = self.context_block(passages)
        if self.style == "plain":
            prefix = f"{self.instruction}\n\n{self.demos}"
            return prefix + ctx + f"Question: {q}\n{answer}", prefix
        msgs = [
            {"role": "system", "content": self.instruction},
            {"role": "user", "content": f"{self.demos}{_SENTINEL}{ctx}Question: {q}"},
        ]
        text = self.chat(msgs)
        cut = text.index(_SENTINEL)
        return text[:cut] + text[cut + len(_SENTINEL):] + answer, text[:cut]

    def render_short(self, question: str, passages: Sequence = (),
                     wording: ShortWording = SHORT_WORDING) -> tuple[str, str]:
        """The knowledge check's prompt: the question (after any passages), no demonstrations, and room
        for a short answer; returns (prompt, cacheable prefix) as :meth:`render` does."""
        user = self.context_block(passages) + wording.user.format(question=clean_question(question))
        if self.style == "plain":
            prefix = f"{wording.system}\n\n" if wording.system else ""
            return prefix + user + "\n" + wording.lead, prefix
        msgs = ([{"role": "system", "content": wording.system}] if wording.system else []) + [
            {"role": "user", "content": _SENTINEL + user}]
        text = self.chat(msgs)
        cut = text.index(_SENTINEL)
        return text[:cut] + text[cut + len(_SENTINEL):] + wording.lead, text[:cut]

    def to_dict(self) -> dict:
        return {"prompt_set": self.set.name, "n_shot": self.n_shot, "style": self.style, "titles": self.titles,
                "marker": self.marker}

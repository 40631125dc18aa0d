"""QA datasets in their official layouts -> one :class:`Example` record.

Loaders: HotpotQA (official JSON list, Hugging Face JSONL), 2WikiMultihopQA (official JSON list,
FlashRAG JSONL; aliases from ``golden_answers`` or an ``id_aliases.json`` beside the file), NQ-open
(plain or with ``ctxs``), SQuAD v1.1 (2.0's unanswerable questions dropped), TriviaQA (official JSON),
IIRC (official JSON; unanswerable questions dropped, as in the paper), MuSiQue (official JSONL; likewise),
FlashRAG generic JSONL (``id, question, golden_answers``), PopQA (``possible_answers``), and a question-answer
table: CSV or TSV with a header naming its question and answer columns (``TABLE_COLUMNS``).
Errors name the file, the line (JSONL) or record, and the field; every question needs a unique id and a
question; every one has a gold answer, or none has (a test split: answered, not scored)."""

from __future__ import annotations

import itertools
import os
import re

from ..common.console import misspelled, unknown_choice, warn
from ..common.files import check_rereadable, given_path, is_pattern, user_path
from ..common.jsontext import json_file
from ..common.runs import seakr_config
from ..common.tables import dataset_object, head as file_head, jsonl
from ..common.layouts import TABLE_COLUMNS, DatasetError, layout_of
from .metrics import normalize
from .splits import split_files
from .example import Example, check_questions, example_at
from .qatables import _cell_answers, load_qa_csv, load_table
from ..search.corpora import detect_format
from ..search.records import read
from .records import (Aliases, FlashragQuestion, HotpotQuestion, IIRCPassage, MusiqueQuestion, NQQuestion,
                      SquadHFQuestion, SquadQuestions, TriviaQuestion, TriviaQuestions)
from ..search.base import seakr_own


LAYOUTS = ("hotpotqa", "2wiki", "musique", "nq", "squad", "triviaqa", "iirc", "flashrag", "qa-csv", "table", "auto")


#: The keys a plain question record is read by (:func:`load_nq`): another spelling of one is refused, not dropped.
_NQ_KEYS = frozenset({*TABLE_COLUMNS["id"], "question", "answers", "answer", "possible_answers"})


def _records(path):
    """(location label, record) from a JSON list or JSONL file; every record must be a JSON object. A file of
    one object of columns (pandas' ``DataFrame.to_json()`` by default: ``{"question": {"0": ...}, "answer":
    {"0": ...}}``) is read row by row."""
    recs = _file_records(path)
    first = next(recs, None)
    second = next(recs, None) if first is not None else None
    if first is not None and second is None and _columns(first[1]):
        where, d = first
        for label in next(iter(d.values())):
            yield f"{where} row {label!r}", {col: d[col][label] for col in d}
        return
    yield from itertools.chain([r for r in (first, second) if r is not None], recs)


def _columns(d: dict) -> bool:
    """Whether one JSON object is a table by columns: two or more, each an object of the same row labels."""
    cols = list(d.values())
    return len(cols) >= 2 and all(isinstance(c, dict) and c for c in cols) and len({tuple(c) for c in cols}) == 1


def _file_records(path):
    head = file_head(path, 2048, DatasetError).lstrip()
    if head.startswith("[") or dataset_object(head):
        d = json_file(path, DatasetError)
        for where, r in ([(f"{path}: record {i}", r) for i, r in enumerate(d)] if isinstance(d, list) else [(path, d)]):
            if not isinstance(r, dict):
                raise DatasetError(f"{where}: expected a JSON object, got {type(r).__name__}")
            yield where, r
        return
    for n, r in jsonl(path, DatasetError):
        yield f"{path}:{n}", r


def _one_object(path, recs=None) -> tuple[str, dict]:
    """The one JSON object a SQuAD or TriviaQA file is (a list or JSON lines is another layout); ``recs``: its
    records where the caller has begun reading them."""
    recs = list(_records(path) if recs is None else recs)
    if len(recs) != 1:
        raise DatasetError(f"{path}: expected one JSON object (its 'data'), got {len(recs)} records; "
                           "is it another layout? (pass --layout)")
    return recs[0]


def warn_unlabelled(path: str, examples: list[Example]) -> None:
    """Say, before a run answers them, that its questions have no gold answers (a table: nor an answer column)."""
    if examples and not examples[0].answers:  # every question has one or none has (check_questions)
        table = examples[0].dataset == "table"
        cols = f" (its header names no {' or '.join(TABLE_COLUMNS['answers'])} column)" if table else ""
        warn(f"{path}: no question has a gold answer{cols}: answers are written, without EM or F1", once=True)


def _example(where: str, qid, question: str, answers: list[str], titles, contexts, kind: str, dataset: str):
    return where, example_at(where, DatasetError, qid, question, answers, titles, contexts, kind, dataset)


def load_hotpotqa(path):
    for where, r in _records(path):
        q = read(HotpotQuestion, where, r, DatasetError)
        yield _example(where, q.id, q.question, q.answer, q.supporting_facts, q.context, q.type, "hotpotqa")


def _aliases(path: str) -> dict[str, list[str]]:
    """2Wiki's ``id_aliases.json`` beside a question file (JSON lines of an answer's Wikidata id and its other
    names), read as strictly as the questions: a damaged line is named by file and line."""
    side = os.path.join(os.path.dirname(path), "id_aliases.json")
    if not os.path.exists(side):
        return {}
    return {a.Q_id: a.aliases for a in (read(Aliases, f"{side}:{n}", r, DatasetError) for n,
                                        r in jsonl(side, DatasetError))}


def load_2wiki(path):
    aliases = _aliases(path)
    for where, r in _records(path):
        if "golden_answers" in r:  # FlashRAG layout: answer + aliases already merged
            q = read(FlashragQuestion, where, r, DatasetError)
            m = q.metadata
            yield _example(where, q.id, q.question, q.golden_answers, m.supporting_facts, m.context, m.type,
                           "2wikimultihopqa")
        else:
            q = read(HotpotQuestion, where, r, DatasetError)
            yield _example(where, q.id, q.question, q.answer + aliases.get(q.answer_id, []), q.supporting_facts,
                           q.context, q.type, "2wikimultihopqa")


def load_nq(path):
    """NQ-open: FlashRAG/DPR's ``answers`` (with ``ctxs``) or the official release's ``answer`` list (no id:
    ``nq-<line>``); also any plain ``{"question", "answer"}`` file, the answer a string or a list, and PopQA's
    records (``possible_answers``, a list written as a string)."""
    for i, (where, r) in enumerate(_records(path)):
        if why := misspelled(r, _NQ_KEYS):
            raise DatasetError(f"{where}: {why}")  # "Answer" left the file unscored, "ID" made the id nq-<line>
        if "answers" not in r and "answer" not in r and isinstance(pop := r.get("possible_answers"), str):
            r = {**r, "possible_answers": _cell_answers(pop)}  # PopQA writes its list as a string
        q = read(NQQuestion, where, r, DatasetError)
        ctxs = [(c.title, c.text) for c in q.ctxs if c.isgold]
        yield _example(where, q.id if q.id is not None else f"nq-{i}", q.question, q.answers, [t for t, _ in ctxs],
                       ctxs, "", "nq")


def _per_question(path, official: str):
    """(True, records) where the file holds one question a record (Hugging Face's layout, as ``datasets``
    writes it), else (False, records) for the official file, whose one object has the field ``official``."""
    recs = _records(path)
    first = next(recs, None)
    rest = itertools.chain([first] if first is not None else [], recs)
    return first is not None and official not in first[1] and "question" in first[1], rest


def _squad_hf(recs):
    """SQuAD's questions one a record; SQuAD 2.0's unanswerable ones (no answer text) dropped, as in the official
    file."""
    for where, r in recs:
        q = read(SquadHFQuestion, where, r, DatasetError)
        if q.answers.text:
            title = q.title.replace("_", " ")
            yield _example(where, q.id, q.question, list(dict.fromkeys(q.answers.text)), [title], [(title, q.context)],
                           "", "squad")


def load_squad(path):
    hf, recs = _per_question(path, "data")
    if hf:
        yield from _squad_hf(recs)
        return
    where, d = _one_object(path, recs)
    for i, art in enumerate(read(SquadQuestions, where, d, DatasetError).data):
        title = art.title.replace("_", " ")
        for j, para in enumerate(art.paragraphs):
            for qa in para.qas:
                if not qa.is_impossible:  # SQuAD 2.0's unanswerable: dropped
                    yield _example(f"{where} data[{i}].paragraphs[{j}].qas[{qa.id}]", qa.id, qa.question,
                                   list(dict.fromkeys(a.text for a in qa.answers)), [title], [(title, para.context)],
                                   "", "squad")


def load_triviaqa(path):
    hf, recs = _per_question(path, "Data")
    if hf:
        questions = ((where, read(TriviaQuestion, where, r, DatasetError)) for where, r in recs)
    else:
        where, d = _one_object(path, recs)
        questions = ((f"{where} Data[{i}]", q) for i,
                     q in enumerate(read(TriviaQuestions, where, d, DatasetError).Data))
    for where, q in questions:
        answers = [] if q.answer is None else list(dict.fromkeys([q.answer.value, *q.answer.aliases]))
        yield _example(where, q.question_id, q.question, answers, [], [], "", "triviaqa")


def load_iirc(path):
    """IIRC: unanswerable questions dropped, as in the paper."""
    for i, (where, r) in enumerate(_records(path)):
        passage = read(IIRCPassage, where, r, DatasetError)
        for j, q in enumerate(passage.questions):
            a = q.answer
            if a.type != "none":
                answers = [sp.text for sp in a.answer_spans] if a.type == "span" else [a.answer_value]
                yield _example(f"{where} questions[{j}]", q.qid if q.qid is not None else f"iirc-{i}-{j}", q.question,
                               answers, [passage.title], [], a.type, "iirc")


def load_musique(path):
    """MuSiQue (official JSONL): its paragraphs with ``is_supporting``; unanswerable questions dropped."""
    for where, r in _records(path):
        q = read(MusiqueQuestion, where, r, DatasetError)
        if q.answerable is not False:
            yield _example(where, q.id, q.question, list(dict.fromkeys([q.answer, *q.answer_aliases])),
                           list(dict.fromkeys(p.title for p in q.paragraphs if p.is_supporting)),
                           [(p.title, p.paragraph_text) for p in q.paragraphs], "", "musique")


def load_flashrag(path):
    for where, r in _records(path):
        q = read(FlashragQuestion, where, r, DatasetError)
        yield _example(where, q.id, q.question, q.golden_answers, [], [], q.metadata.type, "flashrag")


LOADERS = {"hotpotqa": load_hotpotqa, "2wiki": load_2wiki, "nq": load_nq, "squad": load_squad,
           "triviaqa": load_triviaqa, "iirc": load_iirc, "flashrag": load_flashrag, "qa-csv": load_qa_csv,
           "musique": load_musique, "table": load_table}


def detect_layout(path: str) -> str:
    layout = layout_of(path)
    if layout is not None:
        return layout
    if hint := _passages_hint(path):
        raise DatasetError(f"{path}: {hint}")
    head = file_head(path, 4096, DatasetError)
    if m := re.search(r'"(\s*question\s*)"\s*:', head, re.IGNORECASE):  # "Question": no layout has it
        raise DatasetError(f"{path}: key {m.group(1)!r} is read as no field: name it 'question'")
    raise DatasetError(f"{path}: cannot tell the dataset layout; pass --layout ({', '.join(LAYOUTS[:-1])})")


def _passages_hint(path: str) -> str:
    """What to do with a corpus given where questions go (a DPR TSV, JSON lines of id/title/text), or nothing."""
    try:
        fmt = detect_format(path)
    except ValueError:
        return ""
    if fmt not in ("dpr", "flashrag", "jsonl"):
        return ""
    return (f"passages (a {fmt} corpus), not questions: index them (seakr index build {path} --out IDX) and pass "
            "--index IDX, or pool them with --filler; questions need a 'question' field or column")


def load_dataset(path: str | os.PathLike, layout: str = "auto", limit: int | None = None) -> list[Example]:
    """The questions of a data file, of a folder holding one split, or of a quoted glob of a split's shards
    (``'trivia_qa/rc/validation-*.parquet'``), in shard order; ids are unique across the files."""
    path = user_path(given_path(path, "data", "data file"))
    if layout not in LOADERS and layout != "auto":
        raise DatasetError(unknown_choice("dataset layout", layout, LAYOUTS))
    if not is_pattern(path):
        _not_seakrs_own(path)
    files = split_files(path, DatasetError)
    for f in files:
        check_rereadable(f, "a data file is read more than once (its layout, its questions, its checksum "
                                "for --resume)", DatasetError)
    layouts = [detect_layout(f) if layout == "auto" else layout for f in files]
    if len(set(layouts)) > 1:
        i = next(i for i, lay in enumerate(layouts) if lay != layouts[0])
        raise DatasetError(f"{files[i]}: layout {layouts[i]}, but {files[0]} is {layouts[0]}; one run reads one "
                           "dataset")
    out, wheres = [], []
    for where, ex in itertools.chain.from_iterable(LOADERS[layouts[0]](f) for f in files):
        out.append(ex)
        wheres.append(where)
        if limit and len(out) >= limit:
            break
    check_questions(out, wheres.__getitem__, DatasetError)
    for ex in out:
        if not any(a.strip() for a in ex.answers):  # answers of spaces only: none, as a test split has
            ex.answers = []
    _warn_unscorable(path, out)
    return out


def _not_seakrs_own(path: str) -> None:
    """A run's, study's or index's own file or folder given as the questions, refused naming what it is, as
    ``index build`` refuses them as a corpus; a run's names the data file it read."""
    if not (own := seakr_own(path)):
        return
    kind, what = own
    if kind == "index":
        raise DatasetError(f"{path}: {what}, not questions; an index is given as --index")
    cfg = seakr_config(path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))) or {}
    raise DatasetError(f"{path}: {what}, not questions" +
                       (f"; the data file it read: {cfg['data']}" if isinstance(cfg.get("data"), str) else ""))


def check_examples(examples) -> list[Example]:
    """The questions a run or a study answers, refused in one line before any is answered: a list or tuple of
    Examples (a generator would be used up by the resume check), their ids unique. Each Example held its own
    fields to the schema when made."""
    if isinstance(examples, (str, Example)) or not isinstance(examples, (list, tuple)):
        raise TypeError(f"examples: a list of seakr Examples (seakr.eval.datasets.load_dataset reads them), "
                        f"got {type(examples).__name__}")
    for i, ex in enumerate(examples):
        if not isinstance(ex, Example):
            raise TypeError(f"examples[{i}]: expected a seakr Example (seakr.eval.datasets.load_dataset reads them), "
                            f"got {type(ex).__name__}")
    check_questions(examples, lambda i: f"examples[{i}]")
    return list(examples)


def require_golds(examples, what: str) -> None:
    """Refuse questions without gold answers where ``what`` (a study, a calibration) labels answers by them."""
    examples = check_examples(examples)
    bare = next((ex for ex in examples if not ex.answers), None)
    if bare is not None:
        raise DatasetError(f"question {bare.id!r} has no gold answer, and {what} labels answers right or wrong by them")


def _warn_unscorable(path: str, examples: list[Example]) -> None:
    """Say which questions no answer can score: every gold is empty once normalised ("A", the band "The The",
    '""': SQuAD's normalisation drops articles and punctuation). HotpotQA's train split has two in 10,000; they
    are kept (refusing them would refuse the file), and the warning says why they score 0 whatever is answered."""
    bad = [ex for ex in examples if ex.answers and not any(normalize(a) for a in ex.answers)]
    if bad:
        warn(f"{path}: {len(bad)} question(s) can never score, every gold answer being empty once normalised "
                    f"(e.g. {bad[0].id!r}: {bad[0].answers[0]!r}); they count as wrong whatever is answered", once=True)

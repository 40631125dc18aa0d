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
import json
import math
import os
import re

from ..common.console import did_you_mean, misspelled, warn
from ..common.files import check_rereadable, given_path, is_pattern, user_path
from ..common.jsontext import json_file
from ..common.runs import seakr_config
from ..common.tables import dataset_object, head as file_head, jsonl
from ..common.layouts import TABLE_COLUMNS, DatasetError, layout_of
from .metrics import normalize, number_text
from .splits import split_files
from .example import Example, check_questions, example_at
from .qatables import _cell_answers, load_qa_csv, load_table
from ..search.corpora import CorpusError, context_pairs, detect_format
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


def _req(where, rec, name, kind=None):
    if not isinstance(rec, dict) or name not in rec:
        raise DatasetError(f"{where}: missing field '{name}'")
    v = rec[name]
    if kind is not None and not isinstance(v, kind):
        raise DatasetError(f"{where}: field '{name}' should be {kind.__name__ if isinstance(kind, type) else kind}")
    return v


def _ident(where, v) -> str:
    """A question's id as text: a string or a whole number (2Wiki and IIRC ids are numbers in some copies). Rows
    are written, resumed and paired by id, so anything else is refused."""
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise DatasetError(f"{where}: the question's id is {json.dumps(v)[:40]}; ids are text or whole numbers")
    return str(v)


def _obj(where, v, what: str) -> dict:
    if not isinstance(v, dict):
        raise DatasetError(f"{where}: {what} should be a JSON object, got {json.dumps(v)[:40]}")
    return v


def _opt(where, rec: dict, name: str, kind: type, default):
    """An optional field: absent or null reads as ``default``; a value of another type is refused, naming the
    file, line and field."""
    v = rec.get(name)
    if v is None:
        return default
    if not isinstance(v, kind):
        raise DatasetError(f"{where}: field '{name}' should be {'text' if kind is str else 'a JSON ' + kind.__name__}, "
                           f"got {json.dumps(v)[:40]}")
    return v


def _missing(v) -> bool:
    """NaN or an infinity: how Python's json (and a table turned into records) writes a missing value; read as
    the answer "nan" it scored any prediction "NaN"."""
    return isinstance(v, float) and not math.isfinite(v)


def _answer(where, rec: dict, name: str) -> list[str]:
    """A record's one answer as a list; absent, null or NaN (a test split's questions): none; true or false:
    "yes" or "no"."""
    v = rec.get(name)
    if isinstance(v, bool):
        return _strs(where, name, [v])
    v = None if _missing(v) else _opt(where, rec, name, str, None)
    return [] if v is None else [v]


def _strs(where, name, values: list) -> list[str]:
    """A list of answers as text: numbers become their text (a year, a count), true and false "yes" and "no"
    (BoolQ's and StrategyQA's answers; HotpotQA's comparison questions answer so); anything else (null, an
    object) is a malformed answer, not the answer "None"."""
    bad = [v for v in values if not isinstance(v, (str, int, float)) or _missing(v)]
    if bad:
        raise DatasetError(f"{where}: field '{name}' holds {json.dumps(bad[0])}; answers are strings")
    return [v if isinstance(v, str) else ("yes" if v else "no") if isinstance(v, bool) else number_text(v) for v in values]


def warn_unlabelled(path: str, examples: list[Example]) -> None:
    """Say, before a run answers them, that its questions have no gold answers (a table: nor an answer column)."""
    if examples and not examples[0].answers:  # every question has one or none has (check_questions)
        table = examples[0].dataset == "table"
        cols = f" (its header names no {' or '.join(TABLE_COLUMNS['answers'])} column)" if table else ""
        warn(f"{path}: no question has a gold answer{cols}: answers are written, without EM or F1", once=True)


def _contexts(where, ctx):
    try:
        return context_pairs(where, ctx)
    except CorpusError as e:
        raise DatasetError(str(e)) from None


def _kind(where, v) -> str:
    """A question's type (comparison, bridge, ...): text or absent."""
    if v is not None and not isinstance(v, str):
        raise DatasetError(f"{where}: field 'type' should be text, got {json.dumps(v)[:40]}")
    return v or ""


def _titles(where, sf) -> list[str]:
    """The supporting titles of ``supporting_facts``: official ``[[title, sentence], ...]`` or HF's
    ``{"title": [...], "sent_id": [...]}``; another shape is refused (a string's letters are not titles)."""
    if sf is None:
        return []
    rows = sf.get("title") if isinstance(sf, dict) else [r[0] if isinstance(r, list) and r else None for r in sf] \
        if isinstance(sf, list) else None
    if not isinstance(rows, list) or not all(isinstance(t, str) for t in rows):
        raise DatasetError(f"{where}: field 'supporting_facts' should be [[title, sentence], ...] or "
                           "{\"title\": [...], \"sent_id\": [...]}")
    return list(dict.fromkeys(rows))


def load_hotpotqa(path):
    for where, r in _records(path):
        yield where, example_at(where, DatasetError, _ident(where, _req(where, r, "_id") if "_id" in r else _req(where, r, "id")), _req(where, r, "question", str),
                      _answer(where, r, "answer"), _titles(where, r.get("supporting_facts")),
                      _contexts(where, r["context"]) if "context" in r else [], _kind(where, r.get("type")), "hotpotqa")


def _aliases(path: str) -> dict[str, list[str]]:
    """2Wiki's ``id_aliases.json`` beside a question file (JSON lines of an answer's Wikidata id and its other
    names), read as strictly as the questions: a damaged line is named by file and line, an alias must be text."""
    side = os.path.join(os.path.dirname(path), "id_aliases.json")
    if not os.path.exists(side):
        return {}
    out = {}
    for n, a in jsonl(side, DatasetError):
        where = f"{side}:{n}"
        out[_req(where, a, "Q_id", str)] = _strs(where, "aliases", _opt(where, a, "aliases", list, []))
    return out


def load_2wiki(path):
    aliases = _aliases(path)
    for where, r in _records(path):
        if "golden_answers" in r:  # FlashRAG layout: answer + aliases already merged
            answers = _req(where, r, "golden_answers", list)
            meta = _opt(where, r, "metadata", dict, {})
            yield where, example_at(where, DatasetError, _ident(where, _req(where, r, "id")), _req(where, r, "question", str), _strs(where, "golden_answers", answers),
                          _titles(where, meta.get("supporting_facts")), _contexts(where, meta["context"]) if "context" in meta else [],
                          _kind(where, meta.get("type")), "2wikimultihopqa")
        else:
            answers = _answer(where, r, "answer") + aliases.get(_opt(where, r, "answer_id", str, None), [])
            qid = _req(where, r, "_id") if "_id" in r or "id" not in r else r["id"]  # "id": the hub's copies, as HotpotQA's
            yield where, example_at(where, DatasetError, _ident(where, qid), _req(where, r, "question", str), answers,
                          _titles(where, r.get("supporting_facts")), _contexts(where, r["context"]) if "context" in r else [],
                          _kind(where, r.get("type")), "2wikimultihopqa")


def load_nq(path):
    """NQ-open: FlashRAG/DPR's ``answers`` (with ``ctxs``) or the official release's ``answer`` list (no id:
    ``nq-<line>``); also any plain ``{"question", "answer"}`` file, the answer a string or a list, and PopQA's
    records (``possible_answers``, a list written as a string)."""
    for i, (where, r) in enumerate(_records(path)):
        if isinstance(r, dict) and (why := misspelled(r, _NQ_KEYS)):
            raise DatasetError(f"{where}: {why}")  # "Answer" left the file unscored, "ID" made the id nq-<line>
        name = next((n for n in ("answers", "answer", "possible_answers") if n in r), None)
        if name is None or r[name] is None or _missing(r[name]):  # no answer: a test split's question
            ans = []
        else:
            ans = _req(where, r, "answers", list) if name == "answers" else r[name]
        if name == "possible_answers" and isinstance(ans, str):
            ans = _cell_answers(ans)
        ans = [ans] if isinstance(ans, (str, int, float)) else ans  # a year: 1990; true: "yes"
        if not isinstance(ans, list):
            raise DatasetError(f"{where}: field '{name}' should be a string or a list of strings")
        ctxs = [(_opt(w, c, "title", str, ""), _opt(w, c, "text", str, "")) for w, c in
                ((f"{where} ctxs[{k}]", _obj(f"{where} ctxs[{k}]", c, "a context")) for k, c in
                 enumerate(_opt(where, r, "ctxs", list, []))) if c.get("isgold", True)]
        qid = next((r[k] for k in TABLE_COLUMNS["id"] if k in r), f"nq-{i}")  # StrategyQA's qid, PopQA's id
        yield where, example_at(where, DatasetError, _ident(where, qid), _req(where, r, "question", str), _strs(where, name or "answers", ans),
                      [t for t, _ in ctxs], ctxs, "", "nq")


def _per_question(path, official: str):
    """(True, records) where the file holds one question a record (Hugging Face's layout, as ``datasets``
    writes it), else (False, records) for the official file, whose one object has the field ``official``."""
    recs = _records(path)
    first = next(recs, None)
    rest = itertools.chain([first] if first is not None else [], recs)
    return first is not None and official not in first[1] and "question" in first[1], rest


def _squad_hf(recs):
    """SQuAD as Hugging Face has it: ``{id, title, context, question, answers: {text: [...], answer_start}}``;
    SQuAD 2.0's unanswerable questions (no answer text) are dropped, as in the official file."""
    for where, r in recs:
        texts = _strs(where, "answers.text", _req(where + ".answers", _req(where, r, "answers", dict), "text", list))
        if not texts:
            continue
        title = _opt(where, r, "title", str, "").replace("_", " ")
        yield where, example_at(where, DatasetError, _ident(where, _req(where, r, "id")), _req(where, r, "question", str), list(dict.fromkeys(texts)),
                             [title], [(title, _req(where, r, "context", str))], "", "squad")


def load_squad(path):
    hf, recs = _per_question(path, "data")
    if hf:
        yield from _squad_hf(recs)
        return
    where, d = _one_object(path, recs)
    for i, art in enumerate(_req(where, d, "data", list)):
        title = _opt(f"{where} data[{i}]", _obj(f"{where} data[{i}]", art, "an article"), "title", str, "").replace("_", " ")
        for j, para in enumerate(_req(f"{where} data[{i}]", art, "paragraphs", list)):
            wp = f"{where} data[{i}].paragraphs[{j}]"
            ctx = _req(wp, _obj(wp, para, "a paragraph"), "context", str)
            for k, qa in enumerate(_req(wp, para, "qas", list)):
                if _obj(f"{wp}.qas[{k}]", qa, "a question").get("is_impossible"):  # SQuAD 2.0's unanswerable: dropped
                    continue
                w = f"{wp}.qas[{qa.get('id', k)}]"
                answers = list(dict.fromkeys(_req(f"{w}.answers[{n}]", _obj(f"{w}.answers[{n}]", a, "an answer"), "text", str)
                                             for n, a in enumerate(_req(w, qa, "answers", list))))
                yield w, example_at(w, DatasetError, _ident(w, _req(w, qa, "id")), _req(w, qa, "question", str), answers, [title], [(title, ctx)], "", "squad")


def _triviaqa_hf(recs):
    """TriviaQA as Hugging Face has it: ``{question, question_id, ..., answer: {value, aliases, ...}}``."""
    for where, r in recs:
        a = _opt(where, r, "answer", dict, None)  # none: the test split
        answers = [] if a is None else [_req(where + ".answer", a, "value", str)] + [
            x for x in _opt(where + ".answer", a, "aliases", list, []) if isinstance(x, str)]
        yield where, example_at(where, DatasetError, _ident(where, _req(where, r, "question_id")), _req(where, r, "question", str),
                             list(dict.fromkeys(answers)), [], [], "", "triviaqa")


def load_triviaqa(path):
    hf, recs = _per_question(path, "Data")
    if hf:
        yield from _triviaqa_hf(recs)
        return
    where, d = _one_object(path, recs)
    for i, r in enumerate(_req(where, d, "Data", list)):
        w = f"{where} Data[{i}]"
        a = _opt(w, _obj(w, r, "a question"), "Answer", dict, None)  # none: the test split "without answers"
        answers = [] if a is None else [_req(w + ".Answer", a, "Value", str)] + [
            x for x in _opt(w + ".Answer", a, "Aliases", list, []) if isinstance(x, str)]
        yield w, example_at(w, DatasetError, _ident(w, _req(w, r, "QuestionId")), _req(w, r, "Question", str), list(dict.fromkeys(answers)),
                      [], [], "", "triviaqa")


def load_iirc(path):
    for i, (where, passage) in enumerate(_records(path)):
        for j, q in enumerate(_req(where, passage, "questions", list)):
            w = f"{where} questions[{j}]"
            a = _req(w, _obj(w, q, "a question"), "answer", dict)
            kind = _req(w + ".answer", a, "type", str)
            if kind == "none":  # unanswerable: dropped, as in the paper
                continue
            if kind == "span":
                answers = [_req(f"{w}.answer.answer_spans[{n}]", _obj(f"{w}.answer.answer_spans[{n}]", sp, "a span"), "text", str)
                           for n, sp in enumerate(_req(w + ".answer", a, "answer_spans", list))]
            elif kind in ("value", "binary"):
                answers = [str(_req(w + ".answer", a, "answer_value"))]
            else:
                raise DatasetError(f"{w}: field 'answer.type' has unknown value {kind!r}")
            yield w, example_at(w, DatasetError, _ident(w, q.get("qid", f"iirc-{i}-{j}")), _req(w, q, "question", str), answers,
                          [_opt(where, passage, "title", str, "")], [], kind, "iirc")


def load_musique(path):
    """MuSiQue (official JSONL): its paragraphs with ``is_supporting``; unanswerable questions dropped."""
    for where, r in _records(path):
        if r.get("answerable") is False:
            continue
        paras = _req(where, r, "paragraphs", list)
        for i, p in enumerate(paras):
            if not isinstance(p, dict) or not isinstance(p.get("paragraph_text"), str):
                raise DatasetError(f"{where}: paragraphs[{i}] needs a field 'paragraph_text' (a string)")
            _opt(f"{where} paragraphs[{i}]", p, "title", str, "")  # null reads as no title
        answers = [_req(where, r, "answer", str)] + _strs(where, "answer_aliases", _opt(where, r, "answer_aliases", list, []))
        yield where, example_at(where, DatasetError, _ident(where, _req(where, r, "id")), _req(where, r, "question", str), list(dict.fromkeys(answers)),
                             list(dict.fromkeys(p.get("title") or "" for p in paras if p.get("is_supporting"))),
                             [(p.get("title") or "", p["paragraph_text"]) for p in paras], "", "musique")


def load_flashrag(path):
    for where, r in _records(path):
        yield where, example_at(where, DatasetError, _ident(where, _req(where, r, "id")), _req(where, r, "question", str),
                      _strs(where, "golden_answers", _req(where, r, "golden_answers", list)), [], [],
                      _kind(where, _opt(where, r, "metadata", dict, {}).get("type")), "flashrag")


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
        raise DatasetError(f"unknown dataset layout {layout!r}{did_you_mean(layout, LAYOUTS)}; choose from "
                           f"{', '.join(LAYOUTS)}")
    if not is_pattern(path):
        _not_seakrs_own(path)
    files = split_files(path, DatasetError)
    for f in files:
        check_rereadable(f, "a data file is read more than once (its layout, its questions, its checksum "
                                "for --resume)", DatasetError)
    layouts = [detect_layout(f) if layout == "auto" else layout for f in files]
    if len(set(layouts)) > 1:
        i = next(i for i, lay in enumerate(layouts) if lay != layouts[0])
        raise DatasetError(f"{files[i]}: layout {layouts[i]}, but {files[0]} is {layouts[0]}; one run reads one dataset")
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

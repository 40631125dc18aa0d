"""Running a method over questions: one at a time or several in flight, each answered row appended to the run's
log as it finishes, resumable, with the summary written at the end."""

from __future__ import annotations

import os
import platform
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

from .datasets import check_examples
from .example import Example
from .metrics import exact_match, f1_score
from .rows import ResultRow
from .states import StateStore, own_tap, tap_name
from .rowlog import RowLog, row_kind
from .summary import _percent, _summary
import inspect
import importlib.metadata as md


def versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("seakr", "torch", "transformers", "tantivy", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


class FinalStates:
    """The final answers' states of an eval run, one store per final form (``states/final-rationale``,
    ``states/final-knowledge``), at the model's state tap; written only where the method read them."""

    def __init__(self, out_dir: str | os.PathLike, method):
        self.dir, self.method = Path(out_dir) / "states", method
        self._stores: dict = {}
        self._lock = threading.Lock()

    def put(self, qid: str, states: dict) -> None:
        for name, state in (states or {}).items():
            with self._lock:
                if name not in self._stores:  # the tap is read where states exist: a method with states has a model
                    self._stores[name] = StateStore(self.dir / f"final-{name}", [tap_name(own_tap(self.method.lm))])
            self._stores[name].put(qid, state)


def check_questions_fit(method, examples: Sequence[Example]) -> None:
    """Every question's bare prompt fits the model's context, checked before the first is answered, so a run
    never stops at one question (and every ``--resume`` again at the same one)."""
    check = getattr(method, "check_question", None)
    for ex in examples if check is not None else ():
        try:
            check(ex.question)
        except ValueError as e:
            raise ValueError(f"question {ex.id}: {e}; nothing more was run (shorten it, or leave it out)") from None


def takes_cancel(method) -> bool:
    """Whether ``method.answer`` takes a ``cancel`` event (every packaged method does; one of a user's own may
    not)."""
    try:
        return "cancel" in inspect.signature(method.answer).parameters
    except (TypeError, ValueError):
        return False


def answer_concurrently(one: Callable, todo: Sequence[Example], concurrency: int, cancel: bool) -> None:
    """``one(example[, cancel])`` over ``todo``, ``concurrency`` at a time. Ctrl-C, SIGTERM or a question's error
    stops the questions in flight at their next decode step and drops the queued ones, so a stop acts at
    once; the rows finished are on disk already."""
    stop = threading.Event() if cancel else None
    pool = ThreadPoolExecutor(concurrency)
    try:
        for fut in [pool.submit(one, ex, stop) if cancel else pool.submit(one, ex) for ex in todo]:
            fut.result()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # first: no queued question starts once told to stop
        if stop is not None:
            stop.set()
        pool.shutdown(wait=True)
        raise
    pool.shutdown()


def run_eval(method, examples: Sequence[Example], out_dir: str | os.PathLike, *, resume: bool = False,
             name: str | None = None, progress=None, extra_config: dict | None = None, concurrency: int = 1,
             order_of: dict | None = None, log: RowLog | None = None) -> dict:
    """Answer every example (``concurrency`` questions in flight; wrap the model in
    :class:`~seakr.models.batching.BatchingModel` so their model calls share decode batches).
    ``order_of`` maps ids to their place in the whole run (shards keep the unsharded order). ``log``: the row log
    of ``out_dir`` a plan claimed before the model loaded (:meth:`~seakr.eval.plan.EvalPlan.claim`); else it is
    claimed here."""
    if not callable(getattr(method, "answer", None)) or not callable(getattr(method, "describe", None)):
        raise TypeError(f"method: expected a seakr method (seakr.methods.build_method), got {type(method).__name__}")
    examples = check_examples(examples)
    cfg = {"name": name or method.name, "method": method.describe(), "versions": versions(),
           "examples": len(examples), **(extra_config or {})}
    if unread := dict(getattr(method, "unread", list)()):  # said once at the start; the folder keeps it, beside
        cfg["unread_options"] = unread  # the method (a resume compares the method alone)
    log = log if log is not None else RowLog(out_dir, "results.jsonl", resume=resume, **row_kind("results.jsonl"))
    with log:
        log.begin(cfg)
        rows = log.rows_for(examples)
        if progress:
            progress(len(rows), f1=_percent(rows, "f1"))
        todo = log.todo(examples)
        check_questions_fit(method, todo)
        t_start = time.perf_counter()

        def shown(rows):
            if progress:
                progress(1, EM=_percent(rows, "em"), F1=_percent(rows, "f1"))

        order = {ex.id: i for i, ex in enumerate(examples)} if order_of is None else order_of
        keep_states = FinalStates(out_dir, method)

        def one(ex, cancel=None):
            t = time.perf_counter()
            ans = method.answer(ex.question, cancel=cancel) if cancel is not None else method.answer(ex.question)
            dt = time.perf_counter() - t
            keep_states.put(ex.id, ans.states)  # before the row: a row on disk always has its states
            golds = ex.answers
            em, f1 = (exact_match(ans.answer, golds), f1_score(ans.answer, golds)) if golds else (None, None)
            row = ResultRow(ex.id, ans.answer, em, f1, round(dt, 3), order.get(ex.id, 0), ex.type, question=ex.question,
                            golds=ex.answers, trace=ans.trace)
            log.append(row.to_dict(), shown)

        if concurrency <= 1:
            for ex in todo:
                one(ex)
        else:
            answer_concurrently(one, todo, concurrency, takes_cancel(method))
        rows = log.rows_for(examples)  # a resumed log may hold questions outside this --limit
        held = list(log.rows)
    return _summary(Path(out_dir), rows, cfg["name"], resume, len(todo), time.perf_counter() - t_start, concurrency,
                    held)

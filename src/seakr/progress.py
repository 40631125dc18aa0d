"""One progress-bar helper (rich) used by index builds and evaluation runs: a bar on a terminal, plain lines
elsewhere."""

from __future__ import annotations

import contextlib
import sys
import time


@contextlib.contextmanager
def progress_bar(description: str, total: int | None = None, enabled: bool | None = None):
    """Yield ``advance(n=1, **fields)``: a rich bar on stderr where one can be drawn (a terminal, a notebook),
    else a plain line every ~10 %; ``enabled=False`` asks for the plain lines. Never on stdout, which holds
    a command's output (``seakr eval ... > table.md``)."""
    console = _console() if enabled is not False else None
    if console is None:
        # Not a terminal (CI, nohup, a pipe): a plain line every ~10 % so long runs stay visible in logs.
        state = {"done": 0, "next": 0}

        def log(n=1, **kw):
            state["done"] += n
            if total and state["done"] >= state["next"]:
                info = " ".join(f"{k}={v}" for k, v in kw.items())
                print(f"{description}: {state['done']}/{total} {info}".rstrip(), file=sys.stderr, flush=True)
                state["next"] = state["done"] + max(1, total // 10)

        yield log
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    cols = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[info]}")]
    with Progress(*cols, transient=False, console=console) as prog:
        task = prog.add_task(description, total=total, info="")

        def advance(n=1, **kw):
            info = " ".join(f"{k}={v}" for k, v in kw.items())
            prog.update(task, advance=n, **({"info": info} if kw else {}))

        yield advance


def _console():
    """rich's console on stderr, where it can draw a bar (a terminal, or a Jupyter notebook, whose stderr is no
    terminal); None elsewhere (a pipe, a file, CI). rich is imported only here."""
    if not sys.stderr.isatty() and "ipykernel" not in sys.modules:
        return None
    from rich.console import Console

    console = Console(stderr=True)
    return console if console.is_terminal or console.is_jupyter else None


class LiveLine:
    """A listener (``Method.answer(listener=...)``) that shows what an answer in progress is doing: one
    line rewritten in place on a terminal, one line per decision elsewhere. A SeaKR question takes tens
    of seconds on a CPU; this is what moves meanwhile."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.clock, self.t0 = time.perf_counter, time.perf_counter()

    def __call__(self, ev: dict) -> None:
        msg = self.describe(ev)
        if msg is None or (not self.tty and ev.get("type") == "model_call"):
            return
        line = f"[{self.clock() - self.t0:5.1f} s] {msg}"
        if self.tty:
            self.stream.write("\r\033[K" + line[:118])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    @staticmethod
    def describe(ev: dict) -> str | None:
        kind = ev.get("type")
        if kind == "model_call":
            u = ev.get("u")
            return f"{ev.get('purpose')}: {ev.get('greedy') or ''!s:.50}" + ("" if u is None else f" (U={u:.2f})")
        if kind == "retrieval":
            return f"search {ev.get('query')!r}: {len(ev.get('hits') or [])} passages"
        if kind == "decision" and ev.get("what") in ("retrieve", "no-retrieve"):
            step = "check" if ev.get("step") == -1 else f"step {int(ev.get('step', 0)) + 1}"
            if "p_correct" in ev:
                return f"{step}: P(correct)={ev['p_correct']:.2f} vs {ev.get('gate_p', 0):.2f} -> {ev['what']}"
            u, d = ev.get("u"), ev.get("delta")
            if u is None and d is None:  # no U judged this step (past a knowledge check every step retrieves)
                return f"{step}: {ev.get('rule') or 'no U'} -> {ev['what']}"
            us = "inf" if u is None else f"{u:.2f}"
            return f"{step}: U={us}" + ("" if d is None else f" vs delta {d:.2f}") + f" -> {ev['what']}"
        return None

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()

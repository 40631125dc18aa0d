"""One progress-bar helper (rich) used by index builds and evaluation runs; silent when not a TTY."""

from __future__ import annotations

import contextlib
import sys


@contextlib.contextmanager
def progress_bar(description: str, total: int | None = None, enabled: bool | None = None):
    """Yield ``advance(n=1, **fields)``; shows a rich bar on a terminal, nothing otherwise."""
    enabled = sys.stderr.isatty() if enabled is None else enabled
    if not enabled:
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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    cols = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[info]}")]
    with Progress(*cols, transient=False) as prog:
        task = prog.add_task(description, total=total, info="")

        def advance(n=1, **kw):
            info = " ".join(f"{k}={v}" for k, v in kw.items())
            prog.update(task, advance=n, **({"info": info} if kw else {}))

        yield advance

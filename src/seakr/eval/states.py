"""Where studies and runs keep the state vectors a probe is fitted on: one store per study or final
form, one small file per question, and the names of the taps they were read at."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from ..common.console import first_line
from ..common.jsontext import json_file
from ..common.writing import make_folder, write_atomic


def tap_name(tap) -> str:
    """``(11, "mlp")`` as ``"L11:mlp"``: how taps are named in stored states and fitted probes."""
    return f"L{tap[0]}:{tap[1]}"


def own_tap(lm) -> tuple[int, str]:
    """The (layer, source) where the model reads its state (its configured tap)."""
    info = lm.info()
    return (info["state_layer"], info["state_source"])


class StateStore:
    """The greedy answer's state vectors of a study, one float16 ``.npy`` per question (the taps in
    ``taps.json``): what a probe is fitted on. Derived data: kept beside the rows, not committed."""

    def __init__(self, folder: Path, taps: Sequence[str]):
        self.folder, self.taps = Path(folder), list(taps)
        #: the states' width, from the first one read (a reader pooling stores sets the first store's on the next)
        self.width: int | None = None
        make_folder(self.folder)
        meta = self.folder / "taps.json"
        if meta.exists() and (stored := _taps(meta)) != self.taps:
            raise ValueError(f"{self.folder}: states were read at {stored}, this run reads "
                             f"{self.taps}: use another --out")
        write_atomic(meta, json.dumps(self.taps))

    def path(self, qid: str) -> Path:
        return self.folder / (hashlib.sha1(str(qid).encode()).hexdigest()[:20] + ".npy")

    def put(self, qid: str, state) -> np.ndarray | None:
        """Store one question's state; returns it as a (taps, d) array (None when the answer was empty)."""
        if state is None:
            return None
        z = np.asarray(state, dtype=np.float32).reshape(len(self.taps), -1)
        # float16 halves the files, but tops out at 65,504: a residual stream's massive activations (thousands to
        # tens of thousands in larger models) stay float32
        small = z.astype(np.float16) if np.all(np.abs(z[np.isfinite(z)]) <= np.finfo(np.float16).max) else z
        buf = io.BytesIO()  # numpy's own write leaves half a file on a full disk, without an errno:
        np.save(buf, small)  # written whole through Python's file I/O
        write_atomic(self.path(qid), buf.getvalue())
        return z

    def get(self, qid: str) -> np.ndarray | None:
        p = self.path(qid)
        if not p.exists():
            return None
        try:  # numpy's words name neither the file nor the question
            z = np.load(p)
        except (ValueError, OSError, EOFError) as e:
            raise ValueError(f"{p}: the stored state of question {qid!r} is damaged ({first_line(e, limit=1000)}); "
                             "delete it to leave the question out, or run the study again into a new --out") from None
        if z.ndim != 2 or z.shape[0] != len(self.taps):
            raise ValueError(f"{p}: the stored state of question {qid!r} has shape {z.shape}, expected "
                             f"({len(self.taps)}, d) for taps {', '.join(self.taps)}")
        if not np.isfinite(z).all():  # the fit named only "row 5" of the pooled states (rows without one left out)
            raise ValueError(f"{p}: the stored state of question {qid!r} holds non-finite values (the model's "
                             "activations overflowed there); delete it to leave the question out")
        if self.width is not None and z.shape[1] != self.width:  # named with the question
            raise ValueError(f"{p}: the stored state of question {qid!r} is {z.shape[1]} wide, the states read before "
                             f"it {self.width}: another model's (pool studies of one model)")
        self.width = z.shape[1]
        return z.astype(np.float32)

    @classmethod
    def open(cls, folder: str | Path) -> "StateStore":
        meta = Path(folder) / "taps.json"
        if not meta.exists():
            raise ValueError(f"{folder}: no stored states (run `seakr detect` first; it keeps them under states/)")
        return cls(Path(folder), _taps(meta))


def _taps(meta: Path) -> list[str]:
    """A store's taps.json: a list of tap names, or one line naming the file."""
    taps = json_file(meta)
    if not isinstance(taps, list) or not all(isinstance(t, str) for t in taps):
        raise ValueError(f"{meta}: expected a list of tap names such as [\"L11:mlp\"], not {json.dumps(taps)[:60]}")
    return taps

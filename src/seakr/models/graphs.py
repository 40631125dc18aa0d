"""The decode step replayed from a CUDA graph.

Why: on a GPU, batch-1 decode of a 7B-shaped model ran at 13 % of what memory bandwidth allows: each
token issues ~1,800 small kernels from Python, and their dispatch (531 ms of CPU time against 127 ms of
kernel time over 16 tokens, docs/results.md) is the cost, not the arithmetic. A CUDA graph records one
step's kernels once per call and replays them with one launch.

A graph replays fixed shapes and addresses, so for the whole call:
* the attention state is :class:`~seakr.models.attention.StaticShapeState` (the write position is a
  device tensor; scores over each row's whole token buffer, unwritten positions masked);
* rows never leave the batch: a row that finishes keeps its slot and computes, unread, until the call
  ends (its own KV rows only); the backend maps the decode loop's live rows to slots.
Short calls decode eagerly through the same state (capture costs about two steps).
"""

from __future__ import annotations

import threading

import torch

from .attention import StaticShapeState

#: below this many new tokens a call is decoded without capturing a graph (the capture would not pay)
MIN_GRAPH_TOKENS = 12
#: held by every model call where graphs are on (HFLanguageModel._exclusive): a capture must not see
#: another thread's device work, so this process's model calls take turns
DEVICE_LOCK = threading.RLock()


class GraphedBackend:
    """A decode backend (:class:`~seakr.models.decode.DecodeBackend`) for the module-free fast step.

    ``graph=False`` runs the same static-shape step eagerly: the path a CPU can test."""

    def __init__(self, fast, graph: bool = True, warmup: int = 2):
        self.fast, self.use_graph, self.warmup = fast, graph, warmup
        self.state: StaticShapeState | None = None
        self.graph = None

    def start(self, prefilled, row_prompt, max_new):
        used = sorted(set(row_prompt))
        kv = [[([k[0] for k in ks], [v[0] for v in vs]) for ks, vs in prefilled[j].kv] for j in used]
        self.state = StaticShapeState(kv, [used.index(j) for j in row_prompt], max_new)
        dev = self.state.gk[0].device
        B = len(row_prompt)
        self.slots = torch.arange(B, device=dev)  # slot of each live row, in the decode loop's order
        self.feed = torch.zeros(B, dtype=torch.long, device=dev)
        self.pos = torch.zeros(B, dtype=torch.long, device=dev)
        self.use_graph = self.use_graph and max_new >= MIN_GRAPH_TOKENS and dev.type == "cuda"

    def step(self, feed, pos, capture):
        self.feed.index_copy_(0, self.slots, feed)  # finished slots keep their last token and position
        self.pos.index_copy_(0, self.slots, pos)
        self.state.t_index.fill_(self.state.t)
        if not self.use_graph:
            logits, states = self.fast.step(self.feed, self.pos, self.state, capture)
        else:
            if self.graph is None:
                self._capture(capture)
            self.graph.replay()
            logits, states = self.out
        self.state.t += 1
        # indexing copies out of the graph's static outputs, which the next replay overwrites
        return logits[self.slots], (states[self.slots] if states is not None else None)

    def _capture(self, capture: bool) -> None:
        # warm-up on a side stream first (cuBLAS handles, allocator), as torch.cuda.graphs asks; a warm-up
        # step writes this step's K, V at position t, which the replay writes again with the same values
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self.fast.step(self.feed, self.pos, self.state, capture)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.fast.step(self.feed, self.pos, self.state, capture)

    def select(self, keep):
        self.slots = self.slots[keep]

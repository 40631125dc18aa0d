"""Continuous batching across questions: concurrent ``generate`` calls become one decode batch.

Several questions answered at once (``seakr eval --concurrency 8``, the HTTP service) each call the
model from their own thread. This wrapper owns the model on one worker thread: it waits up to
``window`` seconds for calls to accumulate, merges those with the same sampling config and
demonstration prefix into a single :meth:`generate` (prompts of different questions side by side),
and hands each caller its own results. Decode on a CPU is bound by reading the weights once per
step, so a step over 8x21 rows costs far less than 8 steps over 21 rows.

Every other model call (token strings, attention, next-token log-probs) runs on the same worker
thread, so the wrapped model is never entered concurrently. A sampled row's random numbers depend
only on the seed and its sample index (sampling.uniform_streams), so a question gets the same samples
whichever questions share its call.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import astuple
from typing import Sequence

from .base import check_generate


class BatchingModel:
    def __init__(self, lm, window: float = 0.02, max_prompts: int = 16):
        self.lm, self.window, self.max_prompts = lm, window, max_prompts
        self.name = lm.name
        self.capabilities = lm.capabilities
        self._q: queue.Queue = queue.Queue()
        self.merged_calls = self.requests = 0
        self._t = threading.Thread(target=self._loop, name="seakr-batcher", daemon=True)
        self._t.start()

    # ---- protocol: everything goes through the worker thread
    def generate(self, prompts: Sequence[str], config, *, prefix: str | None = None):
        prompts = check_generate(prompts, config, prefix)  # here: a bad call raised inside the worker's loop
        return self._submit(("gen", prompts, config, prefix)) if prompts else []

    def next_token_logprobs(self, prompts, options):
        return self._submit(("call", self.lm.next_token_logprobs, (prompts, options)))

    def token_strings(self, ids):
        return self._submit(("call", self.lm.token_strings, (ids,)))

    def attention(self, text):
        return self._submit(("call", self.lm.attention, (text,)))

    def count_tokens(self, text):
        return self.lm.count_tokens(text)  # tokenizer only: thread-safe

    def format_chat(self, messages):
        return self.lm.format_chat(messages)  # tokenizer only: thread-safe

    def info(self):
        return self.lm.info()

    def _submit(self, item):
        fut: Future = Future()
        self._q.put((item, fut))
        return fut.result()

    # ---- worker
    def _loop(self):
        while True:
            first = self._q.get()
            batch = [first]
            try:  # collect what arrives within the window (more questions reaching their next call)
                while sum(len(it[1]) for it, _ in batch if it[0] == "gen") < self.max_prompts:
                    batch.append(self._q.get(timeout=self.window))
            except queue.Empty:
                pass
            calls = [(it, f) for it, f in batch if it[0] == "call"]
            for (_, fn, args), fut in calls:
                self._run(fut, fn, *args)
            groups: dict = {}
            for it, fut in batch:
                if it[0] == "gen":
                    key = (astuple(it[2]), it[3])
                    groups.setdefault(key, []).append((it, fut))
            for members in groups.values():
                self._generate(members)

    def _generate(self, members) -> None:
        """One merged call for the callers that share a sampling config and prefix. A merge that fails (too large
        for the device, one caller's prompt past the context) runs its callers' calls one by one: each then gets
        what it would have got alone (a row's samples do not depend on who shares the call), so one caller's bad
        call never fails the others."""
        self.requests += len(members)
        self.merged_calls += 1
        prompts = [p for (it, _) in members for p in it[1]]
        cfg, prefix = members[0][0][2], members[0][0][3]
        try:
            res = self.lm.generate(prompts, cfg, prefix=prefix)
        except Exception as e:
            for it, fut in members:
                if len(members) == 1:
                    fut.set_exception(e)
                else:
                    self._run(fut, lambda p=it[1]: self.lm.generate(p, cfg, prefix=prefix))
            return
        except BaseException as e:  # an interrupt: every caller of the merged call sees it
            for _, fut in members:
                fut.set_exception(e)
            return
        i = 0
        for it, fut in members:
            fut.set_result(res[i : i + len(it[1])])
            i += len(it[1])

    @staticmethod
    def _run(fut, fn, *args):
        try:
            fut.set_result(fn(*args))
        except BaseException as e:
            fut.set_exception(e)

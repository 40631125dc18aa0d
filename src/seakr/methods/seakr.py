"""SeaKR (paper §3), with the ablation switches of Table 3.

Per iteration (multi-hop): pseudo-generate the next step with k samples -> U.
  self-aware retrieval  U > delta (or an empty step) -> query = the step minus low-confidence words
  self-aware re-ranking the top-N passages, each added to the knowledge buffer K in its own prompt;
                        the N x k samples go through the model in one batched call; keep the
                        candidate (and the step it produced) with the lowest U
  stop                  a step with the answer marker, a repeated query, no new passage, or the
                        limits (7 steps, 5 kept passages: reference defaults)
Final, self-aware reasoning: answer from the rationales R ("... <steps>. So the answer is", paper
B.3) and from all of K with a fresh chain of thought; keep the answer with the lower U (tie ->
knowledge; "unknown"/empty defers to the other).

Simple-QA mode (NQ/TriviaQA/SQuAD, one retrieval): answer closed-book; if U > delta, retrieve N
passages for the question and keep the answer whose single-passage context gives the lowest U.

Choices where paper and reference differ (documented):
* rationale-based reasoning follows the paper (append "So the answer is" after the steps); the
  reference instead re-reads the steps as context and regenerates a whole chain of thought;
* a step that *contains* the marker ends the loop and is kept; its answer sentence is dropped
  before the forced rationale-based answer, as the reference does;
* answers are not cut at the first comma (the reference's extractor turns "August 25, 1963"
  into "august 25").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from .base import ANSWER_STOPS, STEP_STOPS, Method, MethodConfig, default_delta, pick
from .text import align_words, build_query, drop_answer_sentence, extract_answer, has_answer
from .trace import Step, Tracer

RETRIEVAL = ("self-aware", "always")
RERANK = ("self-aware", "engine")
REASONING = ("self-aware", "rationales", "knowledge")


@dataclass
class SeaKRConfig(MethodConfig):
    delta: float | None = None  # None: calibration file -> packaged measurement -> paper's -6
    keep_p: float = 0.9  # query: keep words whose tokens all have p >= keep_p
    retrieval: str = "self-aware"  # | always        (ablation "- S.A. retrieval")
    rerank: str = "self-aware"  # | engine           (ablation "- S.A. re-rank": search-engine top-1)
    reasoning: str = "self-aware"  # | rationales | knowledge
    mode: str = "multihop"  # | simple (one retrieval, NQ/TriviaQA/SQuAD)


class SeaKR(Method):
    name = "seakr"
    Config = SeaKRConfig

    def __init__(self, lm, engine=None, config: SeaKRConfig | None = None, **overrides):
        super().__init__(lm, engine, config, **overrides)
        c = self.config
        for val, allowed, what in ((c.retrieval, RETRIEVAL, "retrieval"), (c.rerank, RERANK, "rerank"),
                                   (c.reasoning, REASONING, "reasoning"), (c.mode, ("multihop", "simple"), "mode")):
            if val not in allowed:
                raise ValueError(f"{what} must be one of {', '.join(allowed)}, not {val!r}")
        if c.delta is None:
            self.delta, self.delta_source = default_delta(lm.info() if hasattr(lm, "info") else {}, c.estimator)
        else:
            self.delta, self.delta_source = float(c.delta), "config"

    @classmethod
    def from_config(cls, model: str | None = None, index: str | None = None, **options) -> "SeaKR":
        """``SeaKR.from_config(model="qwen2.5-coder-0.5b", index="idx/", delta=-5.2)``."""
        from ..models import DEFAULT_MODEL, load_model
        from ..search import open_engine

        lm_keys = {"dtype", "threads", "state_layer", "state_source"}
        lm = load_model(model or DEFAULT_MODEL, **{k: options.pop(k) for k in list(options) if k in lm_keys})
        return cls(lm, open_engine(index) if index else None, **options)

    def describe(self) -> dict:
        d = super().describe()
        d["delta"] = None if math.isinf(self.delta) else self.delta
        d["delta_source"] = self.delta_source
        return d

    # ------------------------------------------------------------------ multi-hop
    def _run(self, question: str, tr: Tracer) -> str:
        if self.config.mode == "simple":
            return self._simple(question, tr)
        c = self.config
        steps: list[str] = []
        kept: list = []
        queries: set[str] = set()
        stop_reason = "max_steps"
        for i in range(c.max_steps):
            st = Step(index=i, threshold=None if math.isinf(self.delta) else self.delta)
            tr.steps.append(st)
            if i:
                tr.step_done(tr.steps[-2])
            prompt, prefix = self.prompts.render(question, steps, kept)
            t0 = time.perf_counter()
            (g, u), = self.call(tr, "pseudo-step", [prompt], prefix, STEP_STOPS)
            st.pseudo, st.u = g.greedy.text.strip(), u
            retrieve = c.retrieval == "always" or u > self.delta
            tr.decision("retrieve" if retrieve else "no-retrieve", step=i, u=u, delta=self.delta, rule=c.retrieval)
            tr.stage("pseudo", time.perf_counter() - t0)
            step_text, step_u = st.pseudo, u
            if retrieve and len(kept) < c.max_passages:
                words = align_words(self.lm.token_strings(g.greedy.token_ids), g.greedy.logprobs)
                query, dropped = build_query(words, question, steps[-1] if steps else "", c.keep_p, c.query_max_words)
                st.query = query
                if query in queries:
                    st.note, stop_reason = "repeated query: stop", "repeated_query"
                    tr.decision("stop", reason=stop_reason, query=query)
                    break
                queries.add(query)
                known = {p.id for p in kept}
                hits = [h for h in self.search(tr, query, c.n_candidates) if h.id not in known]
                if not hits:
                    st.note, stop_reason = "no new passage: stop", "no_new_passage"
                    tr.decision("stop", reason=stop_reason, query=query)
                    break
                st.retrieved = True
                t0 = time.perf_counter()
                best, cand = self._rerank(tr, question, steps, kept, hits)
                tr.stage("rerank", time.perf_counter() - t0)
                st.candidates = cand
                kept.append(hits[best])
                st.kept = {"id": hits[best].id, "title": hits[best].title, "score": hits[best].score}
                step_text, step_u = cand[best]["step"], cand[best]["u"]
            st.text, st.u_step = step_text, step_u
            if not step_text:
                stop_reason = "empty_step"
                tr.decision("stop", reason=stop_reason)
                break
            steps.append(step_text)
            if has_answer(step_text):
                stop_reason = "answered"
                tr.decision("stop", reason=stop_reason)
                break
            if len(kept) >= c.max_passages:
                stop_reason = "max_passages"
                tr.decision("stop", reason=stop_reason)
                break
        if tr.steps:
            tr.step_done(tr.steps[-1])
        return self._final(question, tr, steps, kept, stop_reason)

    def _rerank(self, tr, question, steps, kept, hits):
        """Score each candidate by the U of the next step generated with it added to K (paper §3.2)."""
        if self.config.rerank == "engine":
            hits = hits[:1]  # ablation: trust the search engine's order
        prompts, prefix = [], None
        for h in hits:
            p, prefix = self.prompts.render(question, steps, kept + [h])
            prompts.append(p)
        res = self.call(tr, "rerank", prompts, prefix, STEP_STOPS)  # N x k samples in one batched call
        cand = [{"id": h.id, "title": h.title, "rank": r, "step": g.greedy.text.strip(), "u": u, "chosen": False}
                for r, (h, (g, u)) in enumerate(zip(hits, res))]
        best = 0 if self.config.rerank == "engine" else min(range(len(cand)), key=lambda j: (cand[j]["u"], j))
        cand[best]["chosen"] = True
        tr.decision("rerank", rule=self.config.rerank, chosen=cand[best]["id"], us=[c["u"] for c in cand])
        return best, cand

    def _final(self, question, tr, steps, kept, stop_reason) -> str:
        c = self.config
        t0 = time.perf_counter()
        rat = know = None
        if c.reasoning in ("self-aware", "rationales"):
            rat = self._from_rationales(question, tr, steps)
        if c.reasoning in ("self-aware", "knowledge"):
            know = self.answer_prompt(tr, question, [], kept, "final/knowledge")
        if c.reasoning == "self-aware":
            choice = pick(rat, know)
        else:
            choice = "rationale" if c.reasoning == "rationales" else "knowledge"
        chosen = rat if choice == "rationale" else know
        tr.final = {"stop_reason": stop_reason, "rationale": rat or {}, "knowledge": know or {}, "choice": choice,
                    "rule": c.reasoning, "passages": [{"id": p.id, "title": p.title} for p in kept]}
        tr.decision("final", choice=choice, rule=c.reasoning)
        tr.stage("final", time.perf_counter() - t0)
        return chosen["answer"]

    def _from_rationales(self, question, tr, steps) -> dict:
        """Paper B.3: '<demos> Question: q Answer: <step>. <step>. So the answer is' -> the answer."""
        body = [s for s in steps[:-1]] + ([drop_answer_sentence(steps[-1])] if steps else [])
        body = [s for s in body if s.strip()]
        prompt, prefix = self.prompts.render(question, body, [], tail=f" {self.config.marker}")
        (g, u), = self.call(tr, "final/rationale", [prompt], prefix, ANSWER_STOPS, max_new=32)
        ans = extract_answer(f"the answer is {g.greedy.text}") or ""
        return {"answer": ans, "u": u, "text": g.greedy.text, "forced": True}

    # ------------------------------------------------------------------ simple QA
    def _simple(self, question: str, tr: Tracer) -> str:
        c = self.config
        st = Step(index=0, threshold=None if math.isinf(self.delta) else self.delta)
        tr.steps.append(st)
        direct = self.answer_prompt(tr, question, [], [], "direct")
        st.pseudo, st.u = direct["text"].strip(), direct["u"]
        retrieve = c.retrieval == "always" or direct["u"] > self.delta
        tr.decision("retrieve" if retrieve else "no-retrieve", step=0, u=direct["u"], delta=self.delta)
        if not retrieve:
            st.text, st.u_step = st.pseudo, direct["u"]
            tr.final = {"choice": "direct", "direct": direct}
            return direct["answer"]
        st.retrieved, st.query = True, question
        hits = self.search(tr, question, c.n_candidates)
        if not hits:
            tr.final = {"choice": "direct", "direct": direct, "note": "no passage found"}
            return direct["answer"]
        if c.rerank == "engine":
            hits = hits[:1]
        res = self.answer_prompts(tr, question, [([], [h]) for h in hits], "rerank")  # one batched call
        best = 0 if c.rerank == "engine" else min(range(len(res)), key=lambda j: (math.inf if res[j]["u"] is None else res[j]["u"], j))
        st.candidates = [{"id": h.id, "title": h.title, "rank": r, "step": x["answer"], "u": x["u"], "chosen": r == best}
                         for r, (h, x) in enumerate(zip(hits, res))]
        st.kept = {"id": hits[best].id, "title": hits[best].title, "score": hits[best].score}
        st.text, st.u_step = res[best]["text"].strip(), res[best]["u"]
        tr.final = {"choice": "passage", "direct": direct, "chosen": res[best]}
        return res[best]["answer"]


__all__ = ["SeaKR", "SeaKRConfig"]

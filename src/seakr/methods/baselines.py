"""The paper's baselines on the same model, engine and prompts.

cot     chain of thought, no retrieval (paper: "similar prompts as SeaKR without retrieval")
single  standard RAG: top-N passages for the question, then a chain of thought over them
ircot   retrieve at every step with the last sentence as the query (the question first), keep top-1
flare   FLARE re-implemented step-wise (as the paper did for multi-hop QA): a tentative sentence with
        any token below probability theta triggers retrieval with that sentence minus its
        low-probability words as the query; the sentence is regenerated with the top-N passages
dragin  DRAGIN: RIND trigger (last-layer attention x token entropy x sentence length on content
        words, threshold tau) and QFS query (the content words most attended by the flagged words,
        top keep_top_k, in text order); regenerate and keep the first sentence
Self-RAG needs its fine-tuned checkpoint, which cannot be obtained here: not implemented.

Baselines generate greedily (no samples): their decisions use token probabilities, not U.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..models.base import ATTENTION, CHAT, GENERATE
from ..common.schema import NonNegative, Probability, schema
from .base import Method, STEP_STOPS, final_from_steps, take_step
from .config import MethodConfig, Positive, unknown_options
from .records import FinalAnswer
from .text import QUERY_STOPWORDS, align_words, content_words, mask_low_prob
from .trace import Tracer


class _Greedy(Method):
    """Baselines never sample: force n=0 whatever the estimator says, and never score."""

    def requires(self) -> set[str]:
        return {GENERATE} | ({CHAT} if self.config.prompt_style == "chat" else set())

    #: what a greedy method never reads: the sampling of k samples and the U computed from them
    SAMPLING = ("k", "temperature", "top_k", "top_p", "seed", "estimator", "alpha")
    #: the retrieval options each baseline reads (of n_candidates, max_passages, query_max_words)
    READS: ClassVar[tuple[str, ...]] = ()

    def unread(self) -> list[tuple[str, str]]:
        c, d = self.config, type(self.config)
        passages = () if self.retrieves else ("titles",)  # a method with no passage shows no title
        given = [n for n in (*self.SAMPLING, "n_candidates", "max_passages", "query_max_words", *passages)
                 if getattr(c, n) != getattr(d, n) and n not in self.READS]
        return [(n, f"{self.name} decodes greedily and draws no samples (SeaKR reads it)" if n in self.SAMPLING else
                 f"{self.name} does not retrieve" if not self.retrieves else f"{self.name} does not read it")
                for n in given] + super().unread()

    def gen_config(self, stops, sampled, max_new=None, final=False):
        return super().gen_config(stops, False, max_new, final)

    def call(self, tr, purpose, prompts, prefix, stops, *, scored=False, **kw):
        return super().call(tr, purpose, prompts, prefix, stops, scored=False, **kw)

    def _finish(self, question: str, tr: Tracer, steps: list[str], passages: list) -> str:
        """Answer from the steps when they contain one; else force it after the steps."""
        ans = final_from_steps(steps, self.config.marker)
        if ans is not None:
            return tr.finish(ans, "last step", {"last step": FinalAnswer(ans, text=steps[-1])},
                             passages=passages)
        forced = self.forced_answers(tr, question, [([s for s in steps if s.strip()], passages)], "final/forced",
                                     False)[0]
        return tr.finish(forced.answer, "forced", {"forced": forced}, passages=passages)


class CoT(_Greedy):
    name = "cot"
    retrieves = False

    def _run(self, question, tr):
        with tr.step(0) as st:
            r = self.answer_prompt(tr, question, [], [], "cot", scored=False)
            st.text = r.text.strip()
        tr.stop("answered")
        return tr.finish(r.answer, "cot", {"cot": r})


class SingleRetrieval(_Greedy):
    name = "single"
    READS = ("n_candidates",)

    def _run(self, question, tr):
        with tr.step(0) as st:
            hits = self.search(tr, question, self.config.n_candidates)
            r = self.answer_prompt(tr, question, [], hits, "single", scored=False)
            st.retrieved, st.query, st.text = True, question, r.text.strip()
            st.kept = {"ids": [h.id for h in hits], "title": ", ".join(h.title for h in hits)}
        tr.stop("answered")
        return tr.finish(r.answer, "single", {"single": r}, passages=hits)


class IRCoT(_Greedy):
    name = "ircot"
    READS = ("n_candidates", "max_passages")

    def _run(self, question, tr):
        c = self.config
        steps, kept = [], []
        query = question
        for i in range(c.max_steps):
            with tr.step(i) as st:
                st.retrieved, st.query = True, query
                known = {p.id for p in kept}
                new = [h for h in self.search(tr, query, c.n_candidates) if h.id not in known][:1]
                if new and len(kept) < c.max_passages:
                    kept.append(new[0])
                    st.kept = {"id": new[0].id, "title": new[0].title, "score": new[0].score}
                prompt, prefix = self.render(tr, question, steps, kept)
                st.text = self.call(tr, "step", [prompt], prefix, STEP_STOPS)[0].text
            if take_step(tr, steps, st.text, c.marker):
                break
            query = st.text
        else:
            tr.stop("max_steps")
        return self._finish(question, tr, steps, kept)


class _ActiveRetrieval(_Greedy):
    """FLARE and DRAGIN share this loop: a tentative sentence; if the trigger fires, retrieve with the
    method's query, regenerate the sentence with the top-N passages as context, keep it."""

    READS = ("n_candidates",)

    def _trigger(self, tr, question, steps, g, st) -> str | None:  # pragma: no cover - abstract
        """Set ``st.u`` to the trigger score; return the query when retrieval fires, else None."""
        raise NotImplementedError

    def _run(self, question, tr):
        c = self.config
        steps, ctx = [], []
        for i in range(c.max_steps):
            with tr.step(i, self._threshold()) as st:
                ctx = self._step(tr, question, steps, ctx, st)
            if take_step(tr, steps, st.text, c.marker):
                break
        else:
            tr.stop("max_steps")
        return self._finish(question, tr, steps, ctx)

    def _step(self, tr, question, steps, ctx, st) -> list:
        """A tentative sentence; regenerated with fresh passages when the trigger fires. Returns the
        context the next step sees (the latest retrieval's passages)."""
        prompt, prefix = self.render(tr, question, steps, ctx)
        g = self.call(tr, "tentative", [prompt], prefix, STEP_STOPS)[0].gen
        st.pseudo = st.text = g.greedy.text.strip()
        query = self._trigger(tr, question, steps, g, st) if st.pseudo else None
        tr.decision("retrieve" if query is not None else "no-retrieve", step=st.index, u=st.u, threshold=st.threshold)
        if query is None:
            return ctx
        st.query = query
        hits = self.search(tr, query, self.config.n_candidates)
        if not hits:
            st.note = "nothing found: the sentence stands"
            return ctx
        st.retrieved = True
        st.kept = {"id": hits[0].id, "title": ", ".join(h.title for h in hits), "score": hits[0].score}
        prompt, prefix = self.render(tr, question, steps, hits)
        st.text = self.call(tr, "regenerate", [prompt], prefix, STEP_STOPS)[0].text
        return hits


@schema("option", unknown_options)
class FLAREConfig(MethodConfig):
    # token probability below which a sentence triggers retrieval (FlashRAG default)
    theta: Probability = 0.2


class FLARE(_ActiveRetrieval):
    name = "flare"
    Config = FLAREConfig
    READS = ("n_candidates", "query_max_words")  # its query: the sentence minus low-probability words, cut

    def _threshold(self):
        return 1 - self.config.theta  # shown as U > threshold, like SeaKR's

    def _trigger(self, tr, question, steps, g, st):
        c = self.config
        probs = np.exp(g.greedy.logprobs) if g.greedy.logprobs else np.array([0.0])
        st.u = float(1 - probs.min())  # trigger score: 1 - min token probability
        if probs.min() >= c.theta:
            return None
        words = align_words(self.lm.token_strings(g.greedy.token_ids), g.greedy.logprobs)
        return mask_low_prob(words, c.theta, question, c.query_max_words)


@schema("option", unknown_options)
class DRAGINConfig(MethodConfig):
    tau: NonNegative = 1.0  # RIND threshold (DRAGIN configs: 0.6-1.5 for 7B/13B models)
    keep_top_k: Positive = 25  # QFS: content words kept in the query


class DRAGIN(_ActiveRetrieval):
    name = "dragin"
    Config = DRAGINConfig

    def _threshold(self):
        return self.config.tau

    def requires(self) -> set[str]:
        return super().requires() | {ATTENTION}

    def _trigger(self, tr, question, steps, g, st):
        with tr.timed("rind"):
            words, scores = self._rind(g)
        st.u = float(max(scores)) if scores else 0.0
        flagged = [w.text for w, s in zip(words, scores) if s > self.config.tau]
        return self._qfs(question, steps, st.pseudo, flagged) if flagged else None

    def _rind(self, g):
        """Per-word RIND scores of a generated sentence: normalised max attention received (last
        layer, over the sentence alone) x mean token entropy x number of words; content words only."""
        ids = g.greedy.token_ids
        pieces = self.lm.token_strings(ids)
        words = align_words(pieces, g.greedy.logprobs)
        if not words:
            return words, []
        text = "".join(pieces)
        att_ids, att = self.lm.attention(text)
        n = min(len(att_ids), len(ids))
        received = np.zeros(len(ids))
        for j in range(n):
            later = att[j + 1 : n, j] if j + 1 < n else att[j : j + 1, j]
            received[j] = later.max() if later.size else 0.0
        wa = np.array([received[w.tokens].sum() for w in words])
        wa = wa / wa.sum() if wa.sum() > 0 else wa
        entropies = g.greedy.entropies
        ent = np.array([np.mean([entropies[t] for t in w.tokens if t < len(entropies)] or [0.0]) for w in words])
        scores = wa * ent * len(words)
        real = np.array([w.text.lower() not in QUERY_STOPWORDS for w in words])
        return words, list(np.where(real, scores, 0.0))

    def _qfs(self, question: str, steps: list[str], sentence: str, flagged: list[str]) -> str:
        """Content words of (question + accepted steps) weighted by the attention of the flagged words."""
        before = " ".join([question] + steps)
        text = f"{before} {sentence}"
        ids, att = self.lm.attention(text)
        pieces = self.lm.token_strings(ids)
        words = align_words(pieces, [0.0] * len(pieces))
        cut = len(before)
        flagged_l = {f.lower() for f in flagged}
        rows = [t - 1 for w in words if w.start >= cut and w.text.lower() in flagged_l for t in w.tokens if t > 0]
        if not rows:
            return " ".join(content_words(question))
        weight = att[rows].mean(0)
        cands = [(float(weight[w.tokens].sum()), w.start, w.text) for w in words
                 if w.start < cut and w.text.lower() not in QUERY_STOPWORDS and w.text.lower() not in flagged_l]
        top = sorted(cands, reverse=True)[: self.config.keep_top_k]
        return " ".join(t for _, _, t in sorted(top, key=lambda x: x[1]))

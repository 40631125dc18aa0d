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

The gate, the re-rank and the final choice are strategy objects (``decisions.py``) chosen once from the settled
configuration: whichever signal decides (U against delta, a knowledge check, a probe, a calibration map), the loop
below is the same. With ``final_check``, the knowledge check's closed-book answer joins the final choice.

Simple-QA mode (NQ/TriviaQA/SQuAD, one retrieval): answer closed-book; if U > delta (or, gate=check|probe, the
knowledge check finds the model unsure), retrieve N passages for the question and keep the answer whose
single-passage context gives the lowest U (rerank=engine: the top-1's).

Choices where paper and reference differ (documented):
* rationale-based reasoning follows the paper (append "So the answer is" after the steps); the
  reference instead re-reads the steps as context and regenerates a whole chain of thought;
* a step that *contains* the marker ends the loop and is kept; its answer sentence is dropped
  before the forced rationale-based answer, as the reference does;
* answers are not cut at the first comma (the reference's extractor turns "August 25, 1963"
  into "august 25");
* an answer that abstains ("I don't know", "not enough information") counts as none, as "unknown"
  does in the reference (``text.is_unknown``): the other answer wins, and a check gives none as final.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from .. import uncertainty as U
from ..models.base import STATES, cancellable
from ..probes.bank import SelfKnowledge
from ..probes.probe import engine_features
from ..common.checks import check_question
from ..common.console import warn, without_controls
from ..prompts import SHORT_STOPS, SHORT_TOKENS
from .base import Method, STEP_STOPS, Scored, estimator_needs, final_from_steps, take_step
from .decisions import (CheckGate, EngineOrder, Guarded, LowerU, LowestU, MostProbable, OneForm, ProbeRanker,
                        StepGate)
from .deltas import default_delta
from .records import Candidate, Chain, FinalAnswer
from .seakr_config import PAPER_KEEP_P, QUERY_FROM, REASONING, RERANK, SeaKRConfig
from .text import align_words, build_query, drop_answer_sentence, short_answer
from .trace import Tracer

def _found_nothing(asked: SeaKRConfig, settled: SeaKRConfig) -> bool:
    """Every decision asked to settle ("auto") settled to the paper's rule: the fitted folder had nothing."""
    paper = {"gate": "step", "reasoning": "self-aware", "rerank": "self-aware"}
    auto = [k for k in paper if getattr(asked, k) == "auto"]
    return bool(auto) and all(getattr(settled, k) == paper[k] for k in auto)


class SeaKR(Method):
    name = "seakr"
    Config = SeaKRConfig
    #: where reasoning="auto" found its rule (reasoning.json), or "auto" where it fell back or was not asked
    reasoning_source = "auto"
    #: the decisions given as "auto" (gate, reasoning, rerank), which the model settled (:meth:`_settle`)
    _auto: frozenset = frozenset()

    def __init__(self, lm, engine=None, config: SeaKRConfig | None = None, **overrides):
        super().__init__(lm, engine, config, **overrides)
        c = self.config
        if c.delta is None:
            self.delta, self.delta_source = default_delta(lm.info(), c.estimator, c.prompt_style, c.mode)
        else:
            self.delta, self.delta_source = float(c.delta), "config"
        self.knowledge = SelfKnowledge(str(lm.info().get("model")), c.probes, sampling=vars(c),
                                       check_sampling={**vars(c), "temperature": self.check_temperature})
        self.greedy_states = c.reasoning == "probe" or c.rerank == "probe"
        self.gate_p, self.gate_p_source = (float(c.gate_p),
                                           "config") if c.gate_p is not None else self.knowledge.gate_p(c.gate)
        self._signals()  # every fitted file the options need, read now: a missing one fails here, not mid-answer
        self.gate, self.reranker, self.final = self._decisions()

    def _decisions(self):
        """The three decisions (:mod:`~seakr.methods.decisions`), chosen once from the settled configuration."""
        c, bank = self.config, self.knowledge
        gate = StepGate(self.delta, c.retrieval == "always") if c.gate == "step" else CheckGate(c.gate, self.gate_p)
        if c.query_from == "step" and gate.scored and not gate.always and c.mode == "multihop":
            raise ValueError(f"query_from=step drops the pseudo-step, whose U gate=step reads (gate=auto settled to "
                             f"step for model {self.lm.info().get('model')}): give gate=check|probe or "
                             "retrieval=always")
        rerank = {"self-aware": LowestU(), "engine": EngineOrder(), "guarded": Guarded(c.rerank_z),
                  "probe": ProbeRanker(lambda x, top: 1.0 - bank.probe("candidate").score(
                      x.state, engine_features(x.rank, x.score, top)))}[c.rerank]
        if c.reasoning in ("calibrated", "probe"):
            p_of = ((lambda form, x: bank.calibration(form, c.estimator)(x.u)) if c.reasoning == "calibrated"
                    else (lambda form, x: 1.0 - bank.probe(form).score(x.state)))
            final = MostProbable(c.reasoning, p_of, c.final_check)
        else:
            final = LowerU() if c.reasoning == "self-aware" else OneForm(c.reasoning)
        return gate, rerank, final

    def unread(self) -> list[tuple[str, str]]:
        """The options given that the settled configuration never reads, and why: ``delta`` beside a gate ``auto``
        settled to the model's fitted probe (the chain past a check retrieves at every step), ``gate_p`` under the
        step gate, ``rerank_z`` beside another re-rank. Said once each, not refused: a grid or a server's defaults
        may set them for several runs."""
        c, d = self.config, SeaKRConfig
        gate = f"gate={c.gate}" + (f" (auto's choice for {self.lm.info().get('model')})" if "gate" in self._auto
                                   else "")
        out = []
        if c.delta is not None and not (c.retrieval == "self-aware" and c.gate == "step"):
            past = ", and the chain past it retrieves at every step" if c.mode == "multihop" else ""
            out.append(("delta", "retrieval=always retrieves at every step" if c.retrieval == "always" else
                        f"{gate} decides retrieval{past} (gate=step reads delta)"))
        if c.gate_p is not None and c.gate not in ("check", "probe"):
            out.append(("gate_p", f"{gate} reads no probability of a right answer (gate=check or gate=probe does)"))
        for name in ("check_estimator", "check_temperature"):
            if c.gate != "check" and getattr(c, name) != getattr(d, name):
                out.append((name, f"{gate} draws no check samples (gate=check does)"))
        if c.final_check != d.final_check and not self._final_check_read():
            out.append(("final_check", f"{gate} with reasoning={c.reasoning} compares no check's P(correct) with the "
                        "chain's answers (gate=check|probe with reasoning=calibrated|probe does)"))
        if c.rerank != "guarded" and c.rerank_z != d.rerank_z:
            out.append(("rerank_z", f"rerank={c.rerank}" + (" (auto's choice)" if "rerank" in self._auto else "")
                        + " does not weigh the engine's top-1 by noise (rerank=guarded does)"))
        return out + (self._unread_simple() if c.mode == "simple" else []) + super().unread()

    #: what mode=simple never reads (it searches once, with the question, and answers from one passage), and why
    SIMPLE_UNREAD = {"max_steps": "answers in one step", "max_passages": "keeps one passage",
                     "keep_p": "searches with the question itself",
                     "query_max_words": "searches with the question itself",
                     "query_from": "searches with the question itself"}

    def _final_check_read(self) -> bool:
        c = self.config
        return c.gate in ("check", "probe") and c.reasoning in ("calibrated", "probe") and c.mode == "multihop"

    def _unread_simple(self) -> list[tuple[str, str]]:
        c, d = self.config, SeaKRConfig
        out = [(n, f"mode=simple {why} (mode=multihop reads it)") for n, why in self.SIMPLE_UNREAD.items()
               if getattr(c, n) != getattr(d, n) and n not in self._auto]
        if c.reasoning != "self-aware":  # what auto settles to there: any other was given
            out.append(("reasoning", "mode=simple answers from the passage it keeps: there is no final choice "
                                     "between rationales and passages (mode=multihop makes one)"))
        return out

    def resolve(self, config: SeaKRConfig) -> SeaKRConfig:
        """The ``auto`` options settled (:meth:`_settle`); then, for gate=check, the check's temperature:
        where none is given, the one its short-form calibration map was fitted at (the map reads EigenScores
        of samples drawn so), else the method's. The run's configuration records the settled values."""
        config = self._settle(config)
        if config.gate != "check" or config.check_temperature is not None:
            return config
        # a missing map fails here with the same line _signals would give
        bank = SelfKnowledge(str(self.lm.info().get("model")), config.probes)
        cal = bank.calibration("short", config.check_estimator)
        fitted = cal.provenance.get("sampling") or {}
        return config.replace(check_temperature=float(fitted.get("temperature", config.temperature)))

    def _settle(self, config: SeaKRConfig) -> SeaKRConfig:
        """``gate="auto"``: the probe where one is fitted for this model (and it has states), else the
        paper's step gate, in either mode (each chosen on decision data); ``reasoning="auto"``: the final-choice rule
        chosen for this model on tuning data where there is one (``reasoning.json``), else the calibrated choice where
        both final forms' maps are fitted, else the paper's raw U; ``rerank="auto"``: the rule chosen for this model
        on decision data where there is one (``decisions.json``), else the candidate probe where one is fitted
        (multi-hop), else the paper's lowest U; ``query_from="auto"``: the model's decided query where its gate is a
        knowledge check, else the paper's pseudo-step; ``keep_p=None``: the model's decided level where the query is
        the accepted step, else the paper's 0.9. The run's configuration records the settled values."""
        self._auto = {k for k in ("gate", "reasoning", "rerank", "query_from") if getattr(config, k) == "auto"} | (
            {"keep_p"} if config.keep_p is None else set())
        if not self._auto:
            return config
        bank = SelfKnowledge(str(self.lm.info().get("model")), config.probes)
        gate, reasoning = config.gate, config.reasoning
        if gate == "auto":
            gate = "probe" if STATES in getattr(self.lm, "capabilities", ()) and bank.has_probe("short") else "step"
        if reasoning == "auto":
            fitted = all(bank.has_calibration(f, config.estimator) for f in ("final-rationale", "final-knowledge"))
            rules = [r for r in REASONING if r != "auto"]
            chosen, self.reasoning_source = bank.reasoning(rules) if config.mode == "multihop" else (None, "auto")
            reasoning = chosen or ("calibrated" if fitted and config.mode == "multihop" else "self-aware")
        rerank = config.rerank
        query_from = config.query_from
        if query_from == "auto":  # the model's decided query where a check gates, else the paper's pseudo-step
            decided = bank.decided("query_from", [q for q in QUERY_FROM if q != "auto"])[0]
            query_from = decided if decided and gate in ("check", "probe") and config.mode == "multihop" else "pseudo"
        keep_p = config.keep_p
        if keep_p is None:  # the level decided for the step's query, else the paper's (for its pseudo-step)
            decided = bank.decided_level("keep_p") if query_from == "step" else None
            keep_p = PAPER_KEEP_P if decided is None else decided
        if rerank == "auto":  # the rule chosen for the model on decision data, else its probe, else the paper's
            multihop = config.mode == "multihop"
            chosen = bank.decided("rerank", [r for r in RERANK if r != "auto"])[0] if multihop else None
            probe = STATES in getattr(self.lm, "capabilities", ()) and bank.has_probe("candidate") and multihop
            rerank = chosen or ("probe" if probe else "self-aware")
        settled = config.replace(gate=gate, reasoning=reasoning, rerank=rerank, query_from=query_from, keep_p=keep_p)
        if config.probes and _found_nothing(config, settled):  # a folder fitted for another model, or a typo
            warn(f"probes={config.probes} holds nothing fitted for model {bank.model}: gate, rerank and reasoning "
                 "follow the paper's rules", once=True)
        return settled

    def _signals(self) -> None:
        c, info = self.config, self.lm.info()
        if c.gate == "check":
            self.knowledge.calibration("short", c.check_estimator)
        if c.gate == "probe":
            self.knowledge.probe("short").check(info)
        if c.reasoning == "calibrated":
            for form in ("final-rationale", "final-knowledge"):
                self.knowledge.calibration(form, c.estimator)
        if c.reasoning == "probe":
            for form in ("final-rationale", "final-knowledge"):
                self.knowledge.probe(form).check(info)
        if c.rerank == "probe":
            self.knowledge.probe("candidate").check(info)

    def requires(self) -> set[str]:
        c = self.config
        extra = estimator_needs(c.check_estimator) if c.gate == "check" else set()
        return super().requires() | extra | ({STATES} if "probe" in (c.gate, c.reasoning, c.rerank) else set())

    def describe(self) -> dict:
        d = super().describe()
        d["delta"] = None if math.isinf(self.delta) else self.delta
        d["delta_source"] = self.delta_source
        if self.config.gate != "step" or self.config.reasoning in ("calibrated", "probe"):
            d["gate_p"], d["gate_p_source"] = self.gate_p, self.gate_p_source
        if self.reasoning_source != "auto":  # "auto" settled by a rule chosen on tuning data
            d["reasoning_source"] = self.reasoning_source
        return d

    def decisions(self) -> dict:
        """Which rule makes each of Algorithm 1's three decisions once the configuration has settled, and which of
        them read a U of k sampled continuations (the paper's EigenScore decisions; with the 0.5B's defaults,
        none: its probe gate reads one greedy state, the top-1 and the knowledge answer read nothing)."""
        c = self.config
        gate = (f"knowledge check ({c.gate}) at P(correct) >= {self.gate_p:g}" if self.gate.checks else
                "every step" if c.retrieval == "always" else f"U > delta ({self.delta:g})")
        said = {"gate": gate, "rerank": self.reranker.name, "final": self.final.name}
        return {**said, "sampled_u": [k for k, rule in (("gate", self.gate), ("rerank", self.reranker),
                                                          ("final", self.final)) if rule.scored]}

    def should_retrieve(self, u: float | None) -> bool:
        """Self-aware retrieval (paper §3.1): retrieve when the step's U exceeds delta. Past a knowledge
        check (gate=check|probe) that found the model unsure, every step retrieves."""
        return self.gate.retrieve(u)

    # ------------------------------------------------------------------ the knowledge check
    def check(self, tr: Tracer, question: str) -> FinalAnswer:
        """Ask for a short closed-book answer and read how likely it is right: P(correct) from the check's U
        through the short form's calibration map (gate=check), or 1 - the short-form probe's P(wrong) on
        the answer's state (gate=probe) and, for a stacked probe, on the scores of the check's k samples."""
        c = self.config
        prompt, prefix = self.prompts.render_short(question)
        reads = self._check_reads()
        sampled = any(U.NEEDS[e] == "samples" for e in reads)
        cfg = dataclasses.replace(self.gen_config(SHORT_STOPS, False, SHORT_TOKENS), n=c.k if sampled else 0,
                                  with_states=sampled and any(e.startswith("eigen") for e in reads),
                                  greedy_state=c.gate == "probe", temperature=self.check_temperature,
                                  greedy_trail="hidden-score" in reads)
        self._cancelled(tr)
        t = time.perf_counter()
        gen = self.lm.generate([prompt], cfg, prefix=prefix)[0]
        text = gen.greedy.text if gen.greedy else ""
        if c.gate == "check":
            u = U.score(c.check_estimator, gen, c.alpha) if text.strip() else U.UNCERTAIN
            p = self.knowledge.calibration("short", c.check_estimator)(u)
        else:
            scores = {e: U.score(e, gen, c.alpha) for e in reads} if text.strip() else {}
            u = self.knowledge.probe("short").score_check(gen.greedy.state if text.strip() else None, scores)
            p = 1.0 - u
        tr.model_call("check", prompt, gen, u, time.perf_counter() - t)
        ans = short_answer(text)
        return FinalAnswer(ans, u, text, False, p=p)

    def knows(self, question: str, cancel=None) -> FinalAnswer:
        """The knowledge check alone, without the chain: the closed-book answer, its P(correct), the level it is
        held to (``gate_p``) and whether it is ``sure`` (answer now) -- what a router in front of any pipeline
        reads. Needs the check (gate=check or probe, or auto where the model has a fitted probe)."""
        self.require_check()
        check_question(question)
        tr = Tracer(question, self.name, None, cancel)
        with cancellable(cancel):
            return self._gate(tr, without_controls(question))

    def require_check(self) -> None:
        """Refuse where the settled configuration has no knowledge check (its signal is not fitted)."""
        if self.config.gate not in ("check", "probe"):
            raise ValueError(f"the knowledge check needs gate=check or gate=probe with files fitted for model "
                             f"{self.lm.info().get('model')}; here gate settled to {self.config.gate!r} (fit them with "
                             "seakr probe fit, or give probes=DIR)")

    @property
    def check_temperature(self) -> float:
        """The temperature the knowledge check samples at: its own where set (or settled), else the method's."""
        c = self.config
        return c.temperature if c.check_temperature is None else c.check_temperature

    def _check_reads(self) -> list[str]:
        """The estimators the knowledge check computes: its own (gate=check), the stacked probe's features."""
        if self.config.gate == "check":
            return [self.config.check_estimator]
        return list(self.knowledge.probe("short").features) if self.config.gate == "probe" else []

    # ------------------------------------------------------------------ multi-hop (Algorithm 1)
    def _run(self, question: str, tr: Tracer) -> str:
        if self.config.mode == "simple":
            return self._simple(question, tr)
        known = self._gate(tr, question) if self.gate.checks else None  # the knowledge check, where it decides
        if known is not None and known.sure:
            tr.stop("known")
            return tr.finish(known.answer, "check", {"check": known}, rule=f"gate={self.gate.name}",
                             scored=True)
        chain = Chain()  # R, K, the queries asked, the accepted step's generation
        for i in range(self.config.max_steps):
            with tr.step(i, self.gate.threshold) as st:
                reason = self._iteration(tr, question, chain, st)
            if reason:
                break
        else:
            tr.stop("max_steps")
        return self._reason(question, tr, chain.steps, chain.kept, known)

    def _gate(self, tr: Tracer, question: str) -> FinalAnswer:
        """The knowledge check and its decision: ``sure`` when P(correct) reaches gate_p with a real answer."""
        known = self.check(tr, question)
        known.gate_p, known.sure = self.gate_p, self.gate.sure(known)
        tr.decision("no-retrieve" if known.sure else "retrieve", step=-1, rule=f"gate={self.config.gate}",
                    u=known.u, p_correct=known.p, gate_p=self.gate_p)
        return known

    def _iteration(self, tr, question: str, chain: Chain, st) -> str | None:
        """One step: pseudo-generate (or, query_from=step, take the last step), maybe retrieve and re-rank, accept
        the step into ``chain``. Returns why the chain stops here, if it does (``st``: the step's trace line)."""
        c, steps, kept = self.config, chain.steps, chain.kept
        step, text, u = None, "", None  # the generation of the step this iteration accepts, its text and U
        if c.query_from == "pseudo" or len(kept) >= c.max_passages:
            with tr.timed("pseudo"):
                prompt, prefix = self.render(tr, question, steps, kept)
                step, = self.call(tr, "pseudo-step", [prompt], prefix, STEP_STOPS, scored=self.gate.scored)
            st.pseudo, st.u = text, u = step.text, step.u
        retrieve = self.gate.retrieve(None if step is None else step.u)
        tr.decision("retrieve" if retrieve else "no-retrieve", step=st.index, u=st.u, **self.gate.said())
        goes_on = c.stopping == "ircot"  # IRCoT's chain ends only at an answer, an empty step or max_steps
        if retrieve and len(kept) < c.max_passages:
            source = step if step is not None else chain.last
            st.query = question if source is None else self.query(source, question,
                                                                  steps[:-1] if step is None else steps)
            if st.query in chain.queries and not goes_on:
                st.note = "repeated query: stop"
                return tr.stop("repeated_query", query=st.query)
            chain.queries.add(st.query)
            hits = [h for h in self.search(tr, st.query, c.n_candidates) if h.id not in {p.id for p in kept}]
            if not hits and not goes_on:
                st.note = "no new passage: stop"
                return tr.stop("no_new_passage", query=st.query)
            if hits:
                with tr.timed("rerank"):
                    best, st.candidates = self.rerank(tr, question, steps, kept, hits)
                kept.append(hits[best])
                st.retrieved = True
                st.kept = {"id": hits[best].id, "title": hits[best].title, "score": hits[best].score}
                step, text, u = st.candidates[best].scored, st.candidates[best].step, st.candidates[best].u
            elif step is None:  # nothing new to read, and the chain goes on: the step with the passages kept
                prompt, prefix = self.render(tr, question, steps, kept)
                step, = self.call(tr, "step", [prompt], prefix, STEP_STOPS, scored=False)
                text, u = step.text, step.u
        chain.last, st.text, st.u_step = step, text, u
        if stop := take_step(tr, steps, text, c.marker):
            return stop
        return tr.stop("max_passages") if len(kept) >= c.max_passages and not goes_on else None

    def query(self, pseudo: Scored, question: str, steps: list[str]) -> str:
        """The pseudo-step minus its low-probability words (paper §3.1; stop words dropped)."""
        g = pseudo.gen.greedy
        words = align_words(self.lm.token_strings(g.token_ids), g.logprobs)
        query, _ = build_query(words, question, steps[-1] if steps else "", self.config.keep_p,
                               self.config.query_max_words)
        return query

    def score_candidates(self, tr, question, steps, kept, hits, scored: bool | None = None) -> list[Candidate]:
        """The next step generated with each candidate added to K, and (``scored``; default: what the re-ranker
        reads) its U; the N x k samples go through the model in one batched call."""
        scored = self.reranker.scored if scored is None else scored
        rendered = [self.render(tr, question, steps, kept + [h]) for h in hits]
        res = self.call(tr, "rerank", [p for p, _ in rendered], rendered[0][1], STEP_STOPS, scored=scored)
        cand = [Candidate(h.id, h.title, r, x.text, U.UNCERTAIN if x.u is None else x.u, score=h.score,
                          state=x.gen.greedy.state if x.gen.greedy is not None else None, scored=x)
                for r, (h, x) in enumerate(zip(hits, res))]
        if self.config.estimator == "eigen" and scored:  # the noise of each U (the guarded rule's input)
            for c, x in zip(cand, res):
                states = [s.state for s in x.gen.samples if s.state is not None]
                c.u_se = U.jackknife_se(np.stack(states)) if states else U.UNCERTAIN  # < 3 samples: it says so
        return cand

    def rerank(self, tr, question, steps, kept, hits) -> tuple[int, list[Candidate]]:
        """Self-aware re-ranking (paper §3.2) by the configured re-ranker (:mod:`~seakr.methods.decisions`)."""
        cand = self.score_candidates(tr, question, steps, kept, hits[:1] if self.reranker.only_top else hits)
        best = self.reranker.choose(cand)
        cand[best].chosen = True
        tr.decision("rerank", rule=self.reranker.name, chosen=cand[best].id, us=[c.u for c in cand])
        return best, cand

    def _reason(self, question, tr, steps, kept, known: FinalAnswer | None = None) -> str:
        """Self-aware reasoning (paper §3.3): an answer from the rationales and one from all of K, and the
        configured final choice among them (and the knowledge check's answer, where it takes part)."""
        rule = self.final
        with tr.timed("final"):
            cands = {}
            if "rationale" in rule.forms:
                cands["rationale"] = self.from_rationales(tr, question, steps, rule.scored)
            if "knowledge" in rule.forms:
                cands["knowledge"] = self.answer_prompt(tr, question, [], kept, "final/knowledge", rule.scored)
            if "steps" in rule.forms:
                cands["steps"] = self.from_steps(tr, question, steps, kept)
            choice, read = rule.choose(cands, known)
            if read:
                tr.decision("final-choice", rule=self.config.reasoning, **read)
        if known is not None:  # the check that sent the question to the chain: a candidate, or for the record
            cands["check"] = known
        return tr.finish(cands[choice].answer, choice, cands, rule=self.config.reasoning, passages=kept,
                         scored=rule.scored)

    def from_rationales(self, tr, question, steps, scored: bool = True) -> FinalAnswer:
        """Paper B.3: '<demos> Question: q Answer: <step>. <step>. So the answer is' -> the answer."""
        body = steps[:-1] + ([drop_answer_sentence(steps[-1], self.config.marker)] if steps else [])
        body = [s for s in body if s.strip()]
        return self.forced_answers(tr, question, [(body, [])], "final/rationale", scored)[0]

    def from_steps(self, tr, question, steps, kept) -> FinalAnswer:
        """IRCoT's answer reading: the answer a step says, else one forced after the steps, the kept passages
        as context."""
        said = final_from_steps(steps, self.config.marker)
        if said is not None:
            return FinalAnswer(said, text=steps[-1])
        return self.forced_answers(tr, question, [([s for s in steps if s.strip()], kept)], "final/steps", False)[0]

    # ------------------------------------------------------------------ simple QA
    def answer_with_passages(self, tr, question: str, hits) -> tuple[int, list[FinalAnswer]]:
        """Simple-QA re-rank: an answer with each single passage as context (one batched call), and
        the one the re-ranker keeps (by the answers' U)."""
        hits = hits[:1] if self.reranker.only_top else hits
        res = self.answer_prompts(tr, question, [([], [h]) for h in hits], "rerank", scored=self.reranker.scored)
        return self.reranker.choose([Candidate(h.id, h.title, r, x.answer, x.u, score=h.score)
                                     for r, (h, x) in enumerate(zip(hits, res))]), res

    def _simple(self, question: str, tr: Tracer) -> str:
        """Simple QA (NQ, TriviaQA, SQuAD): a closed-book answer, given where the gate trusts it (its U against
        delta, or the knowledge check's P(correct)); else one search with the question and the answer from the
        passage the re-ranker keeps. The closed-book answer stays the fallback where the search finds nothing."""
        c = self.config
        if self.gate.checks:
            closed, form = self._gate(tr, question), "check"
            if closed.sure:
                tr.stop("known")
                return tr.finish(closed.answer, form, {form: closed}, rule=f"gate={self.gate.name}", scored=True)
        with tr.step(0, self.gate.threshold) as st:
            if not self.gate.checks:
                closed, form = self.answer_prompt(tr, question, [], [], "direct"), "direct"
                st.pseudo, st.u = closed.text.strip(), closed.u
                st.text, st.u_step = st.pseudo, closed.u
                retrieve = self.gate.retrieve(closed.u)
                tr.decision("retrieve" if retrieve else "no-retrieve", step=0, u=closed.u, delta=self.delta)
                if not retrieve:
                    return tr.finish(closed.answer, form, {form: closed}, rule=c.retrieval, scored=True)
            st.retrieved, st.query = True, question
            hits = self.search(tr, question, c.n_candidates)
            if not hits:
                return tr.finish(closed.answer, form, {form: closed}, rule=c.retrieval, scored=True,
                                 note="no passage found")
            best, res = self.answer_with_passages(tr, question, hits)
            st.candidates = [Candidate(h.id, h.title, r, x.answer, x.u, chosen=r == best, score=h.score)
                             for r, (h, x) in enumerate(zip(hits, res))]
            st.kept = {"id": hits[best].id, "title": hits[best].title, "score": hits[best].score}
            st.text, st.u_step = res[best].text.strip(), res[best].u
        return tr.finish(res[best].answer, "passage", {form: closed, "passage": res[best]}, rule=c.rerank,
                         passages=[hits[best]], scored=True)


__all__ = ["SeaKR", "SeaKRConfig"]

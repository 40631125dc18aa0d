"""SeaKR's options (:class:`SeaKRConfig`): the shared ones, the three decisions (gate, re-rank, final choice) and
their signals, and the rules between them, each a model validator checked before any model loads."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import model_validator

from ..probes.bank import check_folder
from ..common.schema import Folder, NonNegative, Probability, Threshold, schema
from .config import MODES, Estimator, MethodConfig, unknown_options
from .. import uncertainty as U

RETRIEVAL = ("self-aware", "always")
RERANK = ("self-aware", "engine", "guarded", "probe", "auto")
REASONING = ("self-aware", "rationales", "knowledge", "steps", "calibrated", "probe", "auto")
#: When the chain ends: ``seakr`` also at a repeated query, a search with no new passage and ``max_passages``;
#: ``ircot`` (IRCoT's) only where a step says the answer, is empty, or ``max_steps`` is reached.
STOPPING = ("seakr", "ircot")
#: What decides retrieval: ``step`` (the paper: the pseudo-step's U against delta, at every step), or a
#: knowledge check before the chain (a short closed-book answer): ``check`` reads its U (``check_estimator``)
#: through the short form's calibration map, ``probe`` reads its greedy state through the short-form probe.
#: Either way, P(correct) >= gate_p answers with the short answer at once; below it the chain retrieves at
#: every step (the pseudo-step's U carries no signal there: docs/design-notes.md).
GATES = ("step", "check", "probe", "auto")
#: Where a step's query comes from: ``pseudo`` (the paper: a pseudo-step generated before retrieving, minus its
#: low-probability words), or ``step`` (IRCoT's: the step accepted last, minus the same words; the question for
#: the first), which decodes each step once. ``step`` needs a gate that does not read the pseudo-step's U; ``auto``
#: takes what was chosen for the model on decision data where its gate is a knowledge check, else ``pseudo``.
QUERY_FROM = ("pseudo", "step", "auto")

#: The paper's level for the query's words (§3.1): a word whose tokens fell below it is dropped. The chain that
#: searches with its accepted step reads the level decided for the model (``decisions.json``; 0.9 for the 0.5B).
PAPER_KEEP_P = 0.9


@schema("option", unknown_options)
class SeaKRConfig(MethodConfig):
    delta: Threshold | None = None  # None: calibration file -> packaged measurement -> paper's -6
    # query: keep words whose tokens all have p >= keep_p; None: the model's decided level where the chain searches
    # with its accepted step, else the paper's 0.9
    keep_p: Probability | None = None
    retrieval: Literal[RETRIEVAL] = "self-aware"  # | always        (ablation "- S.A. retrieval")
    # self-aware (paper) | engine (ablation: top-1) | guarded | probe; auto: the model's decided rule, else its probe
    rerank: Literal[RERANK] = "auto"
    # guarded: leave the engine's top-1 only when its U exceeds by z standard errors
    rerank_z: NonNegative = 1.645
    # self-aware (paper) | rationales | knowledge | steps (IRCoT's) | calibrated | probe; auto: fitted
    reasoning: Literal[REASONING] = "auto"
    mode: Literal[MODES] = "multihop"  # | simple (one retrieval, NQ/TriviaQA/SQuAD)
    # step (paper) | check | probe: the knowledge check decides (GATES); auto: probe where fitted
    gate: Literal[GATES] = "auto"
    check_estimator: Estimator = "eigen"  # the check's U (gate=check); any sample- or greedy-based estimator
    # the check's sampling (gate=check); None: its short-form map's, else temperature
    check_temperature: NonNegative | None = None
    # gate=check|probe: answer at once when P(correct) >= gate_p; None: packaged, else 0.5
    gate_p: Probability | None = None
    probes: Folder | None = None  # folder of fitted probes/calibration maps; None: the package's (probes/data)
    # past a knowledge check (gate=check|probe), its closed-book answer joins the final choice by its P(correct)
    # beside the chain's two answers (reasoning=calibrated|probe), rather than being dropped once the chain runs
    final_check: bool = False
    # pseudo (paper) | step (IRCoT's: the last accepted step; no pseudo-step decode) | auto
    query_from: Literal[QUERY_FROM] = "auto"
    stopping: Literal[STOPPING] = "seakr"  # seakr | ircot (STOPPING)

    #: Options added after runs were recorded, with the value that reproduces a run recorded without them
    #: (so ``--resume`` of such a run compares like with like).
    ADDED: ClassVar[dict] = {**MethodConfig.ADDED, "gate": "step", "check_estimator": "eigen", "gate_p": None,
                             "probes": None, "check_temperature": None, "final_check": False,
                             "query_from": "pseudo", "stopping": "seakr"}

    @model_validator(mode="after")
    def _query_needs_no_pseudo_step(self):
        """query_from=step decodes no pseudo-step, so the step gate would have no U to read."""
        if (self.query_from, self.gate, self.retrieval, self.mode) == ("step", "step", "self-aware", "multihop"):
            raise ValueError("query_from=step drops the pseudo-step, whose U gate=step reads: use a knowledge check "
                             "(gate=check|probe) or retrieval=always")
        return self

    @model_validator(mode="after")
    def _check_estimator_samples(self):
        if self.check_estimator == "prompt":
            raise ValueError("check_estimator=prompt is not a check: choose a sample- or greedy-based estimator")
        return self

    @model_validator(mode="after")
    def _rerank_fits(self):
        """The probe re-ranks multi-hop step candidates; the guarded re-rank's noise is EigenScore's jackknife."""
        if self.rerank == "probe" and self.mode == "simple":  # "auto" settles to self-aware there
            raise ValueError("rerank=probe reads multi-hop step candidates; simple mode re-ranks answers (use "
                             "self-aware or engine)")
        if self.rerank == "guarded" and self.estimator != "eigen":
            raise ValueError(f"rerank=guarded needs estimator=eigen, not {self.estimator!r}")
        return self

    @model_validator(mode="after")
    def _fitted_files_readable(self):
        """A missing folder or a damaged fitted file fails here, not after the model loads."""
        check_folder(self.probes, contents=True)
        return self

    @model_validator(mode="after")
    def _sampling_measures(self):
        """Sampling that leaves a sample-based U something to measure: k >= 2 samples (else U is +inf at every
        decision: always retrieve, the engine's order) at temperature > 0 (else k copies of the greedy answer)."""
        for decision, est, temp in self.sampled_reads():
            if self.k < 2:
                raise ValueError(f"option k: {self.k} sample(s), but {decision} reads estimator {est}, which compares "
                                 "k >= 2 samples (the paper: 20); set k, or a decision that reads no samples")
            if temp == 0:
                own = decision == "gate=check" and self.check_temperature is not None
                what = "check_temperature" if own else "temperature"
                raise ValueError(f"option {what}: 0 draws k copies of the greedy answer, and {decision} reads "
                                 f"estimator {est}, which would see no spread; sample at temperature > 0 (the paper: "
                                 "1.0)")
        return self

    def sampled_reads(self) -> list[tuple[str, str, float]]:
        """(decision, estimator, temperature) of each decision that reads a U computed from k samples; an
        ``auto`` decision counts once the method has settled it (the model decides what it becomes)."""
        reads = []
        if self.retrieval == "self-aware" and self.gate == "step":
            reads.append((f"retrieval ({'gate=step' if self.mode == 'multihop' else 'simple mode'})", self.estimator,
                          self.temperature))
        if self.rerank in ("self-aware", "guarded"):
            reads.append((f"rerank={self.rerank}", self.estimator, self.temperature))
        if self.reasoning in ("self-aware", "calibrated") and self.mode == "multihop":
            reads.append((f"reasoning={self.reasoning}", self.estimator, self.temperature))
        if self.gate == "check":
            t = self.temperature if self.check_temperature is None else self.check_temperature
            reads.append(("gate=check", self.check_estimator, t))
        return [r for r in reads if U.NEEDS[r[1]] == "samples"]

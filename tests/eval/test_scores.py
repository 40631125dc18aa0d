"""Committable score rows: a run writes, beside results.jsonl, the same rows without any text from
the data, and --resume on a machine that has only those continues the run without loss."""

import json
import re
import shutil
import time

import pytest

from seakr.eval.example import Example
from seakr.common.runs import SCORES
from seakr.eval.compare import _choice_signal, compare, final_stage_table
from seakr.eval.merge import export_predictions, merge_runs
from seakr.eval.rowlog import run_rows
from seakr.eval.runner import run_eval
from seakr.eval.summary import throughput
from seakr.methods.trace import Answer


class ScriptedMethod:
    """Answers from a table, with a trace of the shape every method writes (the runner is under test)."""

    name = "scripted"

    def __init__(self, answers):
        self.answers, self.asked = answers, []

    def describe(self):
        return {"method": "scripted", "config": {"k": 3}, "model": {"model": "none"}}

    def answer(self, question):
        self.asked.append(question)
        a = self.answers[question]
        trace = {"question": question, "method": "scripted",
                 "steps": [{"u": -1.5, "threshold": -1.0, "retrieved": True, "text": "SECRET step text",
                            "kept": {"id": "p7", "title": "T", "text": "SECRET passage"}}],
                 "final": {"answer": a, "choice": "knowledge", "rule": "lower U", "stop_reason": "answered",
                           "candidates": {"knowledge": {"answer": a, "u": -2.0, "text": "SECRET"},
                                          "rationales": {"answer": "x", "u": -1.0, "text": "SECRET"}},
                           "passages": [{"id": "p7", "title": "T"}], "note": ""},
                 "events": [{"type": "retrieval", "query": "SECRET query"}],
                 "totals": {"model_calls": 4, "sampled_sequences": 21, "generated_tokens": 30, "prompt_tokens": 500,
                            "retrievals": 1, "seconds": {"total": 0.1}}}
        return Answer(question, a, "scripted", trace, {})


EXS = [Example(f"q{i}", f"SECRET question {i}?", [f"ans{i}"]) for i in range(5)]
ANSWERS = {ex.question: (ex.answers[0] if i % 2 == 0 else "wrong") for i, ex in enumerate(EXS)}


def test_score_rows_hold_no_text_from_the_data_and_resume_a_run_on_another_machine(tmp_path):
    first = tmp_path / "machine1"
    m = ScriptedMethod(ANSWERS)
    run_eval(m, EXS[:3], first)
    scores = (first / SCORES).read_text()
    assert "SECRET" not in scores and "SECRET" in (first / "results.jsonl").read_text()
    row = json.loads(scores.splitlines()[0])
    assert row["prediction"] == "ans0" and row["f1"] == 1.0 and row["totals"]["model_calls"] == 4
    assert row["steps"] == [{"u": -1.5, "threshold": -1.0, "retrieved": True, "kept": "p7"}]
    assert row["final"]["candidates"]["knowledge"] == {"answer": "ans0", "u": -2.0, "em": 1.0, "f1": 1.0}

    # what a commit carries: the config and the score rows, not results.jsonl
    second = tmp_path / "machine2"
    second.mkdir()
    for name in ("config.json", SCORES):
        shutil.copy(first / name, second / name)
    m2 = ScriptedMethod(ANSWERS)
    s = run_eval(m2, EXS, second, resume=True)
    assert m2.asked == [ex.question for ex in EXS[3:]]  # only the two questions not yet answered
    assert s["n"] == 5 and s["em"] == 3 / 5 and s["model_calls_per_question"] == 4
    assert len((second / SCORES).read_text().splitlines()) == 5
    assert "| scripted | 5 |" in compare([str(second)])

    merged = merge_runs(tmp_path / "merged", [str(second)])
    assert merged["n"] == 5 and len((tmp_path / "merged" / SCORES).read_text().splitlines()) == 5


def test_timing_adds_up_over_resumed_runs_and_a_finished_resume_keeps_it(tmp_path):
    run_eval(ScriptedMethod(ANSWERS), EXS[:2], tmp_path, concurrency=2)
    first = json.loads((tmp_path / "summary.json").read_text())
    assert first["timed_questions"] == 2 and first["concurrency"] == 2 and first["wall_seconds"] >= 0
    s = run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path, resume=True)
    assert s["timed_questions"] == 5 and s["wall_seconds"] >= first["wall_seconds"] and s["concurrency"] == [2, 1]
    again = run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path, resume=True)  # nothing left: keeps the timing
    assert {k: again[k] for k in ("timed_questions", "wall_seconds", "concurrency")} == \
           {k: s[k] for k in ("timed_questions", "wall_seconds", "concurrency")}


def test_a_resume_with_a_smaller_limit_keeps_the_folders_summary_of_every_row(tmp_path, capsys):
    """`eval --resume --limit 2` over a run of 5 wrote the summary of its 2 questions over the run's, while
    `compare` and `report` read all 5 rows: the folder said n 2 beside 5 rows. The table returned (printed) is of
    the 2 asked for; the summary files stay of every row, and a warning says which is which."""
    whole = run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path)
    two = run_eval(ScriptedMethod(ANSWERS), EXS[:2], tmp_path, resume=True)
    assert two["n"] == 2 and two["em"] == 0.5
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["n"] == 5 and on_disk["em"] == whole["em"] and "| 5 |" in (tmp_path / "summary.md").read_text()
    assert "holds 5 answered questions, 3 beyond these 2" in capsys.readouterr().err
    assert "| 5 |" in compare([str(tmp_path)])


def test_throughput_arithmetic_and_summaries_written_before_it_was_counted():
    assert throughput({}, 0, 5.0, 4) == {}
    assert throughput({}, 10, 60.0, 4) == {"wall_seconds": 60.0, "timed_questions": 10,
                                           "questions_per_minute": 10.0, "concurrency": 4}
    old = {"wall_seconds": 120.0, "questions_per_minute": 6.0, "concurrency": 4}  # 12 questions, no count
    assert throughput(old, 12, 120.0, 4) == {"wall_seconds": 240.0, "timed_questions": 24,
                                             "questions_per_minute": 6.0, "concurrency": 4}
    assert throughput(old, 0, 3.0, 1) == old


def test_a_run_with_score_rows_only_still_refuses_to_restart_without_resume(tmp_path):
    import pytest

    run_eval(ScriptedMethod(ANSWERS), EXS[:1], tmp_path)
    (tmp_path / "results.jsonl").unlink()
    with pytest.raises(ValueError, match="pass --resume"):
        run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path)


def test_compare_pairs_each_run_with_the_first_on_their_common_questions(tmp_path):
    run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path / "a")  # right on q0, q2, q4
    better = {q: ex.answers[0] for q, ex in zip(ANSWERS, EXS)}  # right on all five
    run_eval(ScriptedMethod(better), EXS[:4], tmp_path / "b")  # ... of the first four
    out = compare([str(tmp_path / "a"), str(tmp_path / "b")])
    # on q0..q3 run a is right on 2, run b on 4: +50 points, every resample the same sign; two runs of one
    # name ("scripted") are told apart by their folders (the table showed "scripted - scripted")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert f"- {b} - {a}: +50.0 (CI +" in out and "n=4)" in out and f"| {a} | 5 |" in out
    assert "paired" not in compare([a]) and "| scripted | 5 |" in compare([a])
    assert f"- {a} #2 - {a} #1: +0.0" in compare([a, a])


class SearchesIndex(ScriptedMethod):
    """The scripted method, recording the index it searched, as every real method's describe() does."""

    def __init__(self, answers, checksum, docs):
        super().__init__(answers)
        self.engine = {"engine": "tantivy", "doc_count": docs, "checksum": checksum}

    def describe(self):
        return {**super().describe(), "engine": self.engine}


def test_compare_says_when_two_runs_searched_different_indexes_or_read_different_data(tmp_path, capsys):
    run_eval(SearchesIndex(ANSWERS, "c3a16a7f11dc41c6", 2000), EXS, tmp_path / "with-filler", name="a",
             extra_config={"data": "/d/hotpot.jsonl", "data_sha256": "11"})
    run_eval(SearchesIndex(ANSWERS, "c3a16a7f11dc41c6", 2000), EXS, tmp_path / "same", name="b",
             extra_config={"data": "/d/hotpot.jsonl", "data_sha256": "11"})
    run_eval(SearchesIndex(ANSWERS, "8bc540427c7e3899", 1000), EXS, tmp_path / "no-filler", name="c",
             extra_config={"data": "/d/hotpot.jsonl", "data_sha256": "22"})
    assert "Not like for like" not in compare([str(tmp_path / "with-filler"), str(tmp_path / "same")])
    out = compare([str(tmp_path / "with-filler"), str(tmp_path / "same"), str(tmp_path / "no-filler")])
    assert ("- c searched another index than a (1000 passages, 8bc540427c7e against 2000, c3a16a7f11dc): "
            "its paired difference mixes the method with the corpus") in out
    assert "- c read another data file than a" in out and "- b " not in out.split("Not like for like")[1].split("F1 paired")[0]
    assert "c searched another index than a" in capsys.readouterr().err  # also said where a terminal sees it
    # the pairs are still there: the note qualifies them, it does not hide them
    assert "- c - a: +0.0" in out


class TwoAnswers(ScriptedMethod):
    """A self-aware final stage: a rationale and a knowledge answer, the lower U returned."""

    def __init__(self, cands):
        super().__init__({q: "" for q in cands})
        self.cands = cands

    def answer(self, question):
        a = super().answer(question)
        (ra, ru), (ka, ku) = self.cands[question]
        choice, answer = ("rationale", ra) if ru <= ku else ("knowledge", ka)
        a.trace["final"].update(answer=answer, choice=choice, rule="self-aware",
                                candidates={"rationale": {"answer": ra, "u": ru}, "knowledge": {"answer": ka, "u": ku}})
        return Answer(question, answer, "scripted", a.trace, {})


def test_the_reasoning_ablations_are_read_off_a_self_aware_run_even_from_score_rows_alone(tmp_path):
    g = [ex.answers[0] for ex in EXS]
    cands = {EXS[0].question: ((g[0], -2.0), ("no", -1.0)),  # picks the right rationale answer
             EXS[1].question: (("no", -2.0), (g[1], -1.0)),  # picks the wrong rationale answer
             EXS[2].question: (("no", -1.0), (g[2], -2.0)),  # picks the right knowledge answer
             EXS[3].question: ((g[3], -1.0), (g[3], -3.0)),  # both right
             EXS[4].question: (("no", -1.0), ("no", -3.0))}  # both wrong
    run_eval(TwoAnswers(cands), EXS, tmp_path / "full")
    (tmp_path / "full" / "results.jsonl").unlink()  # the committed rows must suffice
    t = final_stage_table(run_rows(tmp_path / "full"))
    assert t["n"] == 5 and t["chose_rationale"] == 2 / 5
    assert t["f1"] == {"self-aware": 3 / 5, "rationale": 2 / 5, "knowledge": 3 / 5, "oracle": 4 / 5}
    assert t["self_aware_minus"]["oracle"]["mean_difference"] == -1 / 5
    out = compare([str(tmp_path / "full")])
    assert "rationales only 40.0, knowledge only 60.0, oracle choice 80.0" in out
    # the answers' F1 differ on q0..q2; lower U picks the better on q0 and q2; U(r) - U(k) is -1, -1, +1
    # with the knowledge answer better on q1, q2: one tie and one win of two pairs; gaps +1 +1 -1 -2 -2
    assert t["choice_signal"] == {"n": 5, "differ": 3, "lower_u_better": 2, "auroc": 0.75, "gap": -1.0}
    assert "F1 differ (n=3): the lower-U one is the better on 2;" in out and "for \"knowledge is better\" 0.75;" in out
    # equal U: the self-aware rule (methods.base.pick) returns the knowledge answer, so a tie counts for it
    assert _choice_signal([(-1.0, -1.0, 0.0, 1.0)])["lower_u_better"] == 1
    assert _choice_signal([(-1.0, -1.0, 1.0, 0.0)])["lower_u_better"] == 0
    # a run whose final stage is not the self-aware choice adds nothing
    run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path / "plain")
    assert final_stage_table(run_rows(tmp_path / "plain")) is None
    assert "final stage" not in compare([str(tmp_path / "plain")])


class TwoProbableAnswers(TwoAnswers):
    """The two final answers chosen by P(correct) (reasoning=probe): the more probable wins."""

    def answer(self, question):
        a = super().answer(question)
        (ra, rp), (ka, kp) = self.cands[question]
        choice, answer = ("rationale", ra) if rp > kp else ("knowledge", ka)
        a.trace["final"].update(answer=answer, choice=choice, rule="probe", candidates={
            "rationale": {"answer": ra, "u": None, "p": rp}, "knowledge": {"answer": ka, "u": None, "p": kp}})
        return Answer(question, answer, "scripted", a.trace, {})


def test_a_probed_final_choice_is_read_off_its_rows_by_its_probabilities(tmp_path):
    g = [ex.answers[0] for ex in EXS]
    cands = {EXS[0].question: ((g[0], 0.8), ("no", 0.3)),  # the more probable (rationale) is right
             EXS[1].question: (("no", 0.6), (g[1], 0.4)),  # the more probable is wrong
             EXS[2].question: (("no", 0.2), (g[2], 0.7)),  # the more probable (knowledge) is right
             EXS[3].question: ((g[3], 0.5), (g[3], 0.9)),
             EXS[4].question: (("no", 0.1), ("no", 0.2))}
    run_eval(TwoProbableAnswers(cands), EXS, tmp_path / "probe")
    t = final_stage_table(run_rows(tmp_path / "probe"))
    assert t["rule"] == "probe" and t["f1"]["self-aware"] == 3 / 5 and t["chose_rationale"] == 2 / 5
    # P(k) - P(r) on the differing q0..q2: -0.5, -0.2, +0.5, knowledge better on q1 and q2: both above q0,
    # so AUROC 1.0, though the 0.5 rule gets q1 wrong (2 of 3)
    s = t["choice_signal"]
    assert (s["differ"], s["lower_u_better"], s["auroc"]) == (3, 2, 1.0)
    out = compare([str(tmp_path / "probe")])
    assert "F1 probe 60.0" in out and "the more probable one is the better on 2;" in out
    assert "AUROC of P(knowledge) - P(rationale) for \"knowledge is better\" 1.00;" in out


class SometimesRetrieves(ScriptedMethod):
    """Retrieves (and is right) on the even questions only: an adaptive method's two kinds of rows."""

    def answer(self, question):
        a = super().answer(question)
        if EXS[[ex.question for ex in EXS].index(question)].id in ("q1", "q3"):
            a.trace["totals"]["retrievals"] = 0
        return a


def test_compare_splits_an_adaptive_run_by_its_retrieval_decision(tmp_path):
    everyone_wrong = {q: "wrong" for q in ANSWERS}
    run_eval(ScriptedMethod(everyone_wrong), EXS, tmp_path / "base")
    run_eval(SometimesRetrieves(ANSWERS), EXS, tmp_path / "adaptive")  # right on q0, q2, q4 (it retrieved)
    adaptive = str(tmp_path / "adaptive")  # both runs are named "scripted": each is labelled by its folder
    out = compare([str(tmp_path / "base"), adaptive])
    assert f"  - where {adaptive} retrieved: +100.0 (CI +100.0..+100.0, n=3)" in out
    assert f"  - where {adaptive} did not retrieve: +0.0 (CI +0.0..+0.0, n=2)" in out
    # against an always-retrieve run, the split is the first run's: what its skipped retrievals cost
    run_eval(ScriptedMethod(everyone_wrong), EXS, tmp_path / "always", name="always")
    run_eval(SometimesRetrieves(ANSWERS), EXS, tmp_path / "self-aware", name="self-aware")
    out = compare([str(tmp_path / "self-aware"), str(tmp_path / "always")])
    assert "  - where self-aware retrieved: -100.0 (CI -100.0..-100.0, n=3)" in out
    assert "  - where self-aware did not retrieve: +0.0 (CI +0.0..+0.0, n=2)" in out
    assert "where always" not in out
    # a run against itself splits once, by its own decision
    assert compare([str(tmp_path / "self-aware")] * 2).count(" retrieved: ") == 1


def test_a_question_beyond_the_context_is_refused_before_the_first_is_answered(tmp_path):
    """It ended the run where it stood, and every --resume again at the same question."""
    import pytest
    from scripted import Reply, ScriptedLM, engine
    from seakr.methods.baselines import IRCoT

    class Short(ScriptedLM):
        def info(self):
            return {**super().info(), "context_tokens": 400}

    idx = engine(tmp_path, {"Vienna": "Vienna is the capital of Austria."})
    method = IRCoT(Short(lambda v: Reply("Vienna. So the answer is Vienna.")), idx, config={"max_steps": 1, "n_shot": 0})
    exs = [Example("ok", "What is the capital of Austria?", ["Vienna"]),
           Example("long", "Which city " + "really " * 500 + "is it?", ["Vienna"])]
    with pytest.raises(ValueError, match=r"^question long: question too long: its prompt is \d+ tokens.*nothing more was run"):
        run_eval(method, exs, tmp_path / "run")
    assert not (tmp_path / "run" / SCORES).read_text()  # not even the first: the run stops before it starts
    assert run_eval(method, exs[:1], tmp_path / "run", resume=True)["n"] == 1


def test_max_new_tokens_as_long_as_the_context_is_named_when_the_method_is_built(tmp_path):
    """max_new_tokens = 2**63 - 1 in a TOML grid failed at the first question, after the model had loaded, as
    "question too long ... (shorten it, or leave it out)", blaming a question of 544 tokens."""
    from scripted import Reply, ScriptedLM, engine
    from seakr.methods.baselines import IRCoT

    class Short(ScriptedLM):
        def info(self):
            return {**super().info(), "context_tokens": 400}

    idx = engine(tmp_path, {"Vienna": "Vienna is the capital of Austria."})
    lm = Short(lambda v: Reply("Vienna."))
    for n in (400, 2**63 - 1):
        with pytest.raises(ValueError, match=rf"^option max_new_tokens: {n} leaves no room for a prompt in the model's "
                                             r"400-token context; lower it$"):
            IRCoT(lm, idx, config={"max_new_tokens": n})
    IRCoT(lm, idx, config={"max_new_tokens": 399})


@pytest.mark.parametrize("edit,field", [
    (lambda r: r.update(em="1"), "field em: expected a number from 0 to 1 or null, got '1'"),
    (lambda r: r.pop("f1"), "field em and f1: both scores, or both null"),
    (lambda r: r.update(f1=7.0), "field f1: expected a number from 0 to 1 or null, got 7.0"),
    (lambda r: r["totals"].update(retrievals="two"), "field totals.retrievals: expected a number >= 0 or null, got 'two'"),
    (lambda r: r.update(steps=["a step"]), "field steps[0]: expected an object, got 'a step'"),
    (lambda r: r.update(final={"candidates": {"knowledge": "x"}}), "field final.candidates.knowledge: expected an object, got 'x'"),
    (lambda r: r.update(id=None), "field id: expected a question id (text or a whole number), got None"),
    # each step's and candidate's U and score, and the order, are read as numbers (float([]) / int([5]) failed)
    (lambda r: r.update(steps=[{"u": -1.0}, {"u": []}]), "field steps[1].u: expected an uncertainty (a number) or null, got []"),
    (lambda r: r.update(final={"candidates": {"knowledge": {"answer": "x", "u": {}}}}),
     "field final.candidates.knowledge.u: expected an uncertainty (a number) or null, got {}"),
    (lambda r: r.update(final={"candidates": {"knowledge": {"answer": "x", "em": [None]}}}),
     "field final.candidates.knowledge.em: expected a number from 0 to 1 or null, got [None]"),
    (lambda r: r.update(order=[5]), "field order: expected a number >= 0 or null, got [5]"),
])
def test_a_row_seakr_did_not_write_is_named_by_file_line_and_field_at_every_reader(tmp_path, edit, field):
    """A hand-edited score row reached the summary as a KeyError traceback (compare, report, merge) or, in a
    resumed run, only after every new question had been answered."""
    from seakr.eval.rows import check_row
    from seakr.eval.rowlog import RowLog, score_row
    from seakr.serve.render import report_html

    run_eval(ScriptedMethod(ANSWERS), EXS[:2], tmp_path / "run")
    scores = tmp_path / "run" / SCORES
    rows = [json.loads(x) for x in scores.read_text().splitlines()]
    edit(rows[1])
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "run" / "results.jsonl").unlink()
    where = f"{scores}:2: {field}"
    for read in (lambda: compare([str(tmp_path / "run")]), lambda: report_html(str(tmp_path / "run")),
                 lambda: merge_runs(tmp_path / "m", [str(tmp_path / "run")]),
                 lambda: RowLog(tmp_path / "run", "results.jsonl", json.loads((tmp_path / "run" / "config.json").read_text()),
                                resume=True, companion=(SCORES, score_row), check=check_row)):
        with pytest.raises(ValueError) as e:
            read()
        assert str(e.value).startswith(where), str(e.value)
    asked = ScriptedMethod(ANSWERS)
    with pytest.raises(ValueError, match="field"):
        run_eval(asked, EXS, tmp_path / "run", resume=True)
    assert asked.asked == []  # refused before the first question, not after the last


def test_rows_made_by_hand_without_costs_give_no_cost_figures_rather_than_zeros(tmp_path):
    d = tmp_path / "hand"
    d.mkdir()
    (d / SCORES).write_text("".join(json.dumps({"id": f"q{i}", "em": 1.0, "f1": 1.0}) + "\n" for i in range(3)))
    table = compare([str(d)])
    assert "| hand | 3 | 100.0 ± 0.0 | 100.0 ± 0.0 | – | – | – | – |" in table, table
    (d / SCORES).write_text("".join(json.dumps({"id": f"q{i}", "em": 1.0, "f1": 1.0, "totals": dict.fromkeys(
        ("retrievals", "model_calls", "sampled_sequences", "generated_tokens"))}) + "\n" for i in range(3)))
    assert "| hand | 3 | 100.0 ± 0.0 | 100.0 ± 0.0 | – | – | – | – |" in compare([str(d)])  # null costs: none either


def test_a_run_whose_searches_all_found_nothing_says_so(tmp_path, capsys):
    """An index of other passages: every search of an IRCoT run found nothing, and the table said "retrieval rate
    1.00" as if passages had been read. The trace counts the searches that found nothing; the summary gives
    their share and warns when it is all of them."""
    from seakr.methods.trace import Tracer
    from seakr.search.base import Passage

    tr = Tracer("Q?", "x")
    tr.retrieval("q1", [], 0.0)
    tr.retrieval("q2", [Passage("p", "T", "x", 1.0)], 0.0)
    assert (tr.totals["retrievals"], tr.totals["empty_retrievals"]) == (2, 1)

    def row(i, empty):
        return {"id": f"q{i}", "em": 0.0, "f1": 0.0, "totals": {"retrievals": 2, "empty_retrievals": empty,
                                                                  "model_calls": 2, "sampled_sequences": 2,
                                                                  "generated_tokens": 9}}
    from seakr.eval.summary import _summary

    assert _summary(tmp_path, [row(0, 2), row(1, 2)], "ircot", False, 2, 1.0, 1)["empty_retrieval_rate"] == 1.0
    assert capsys.readouterr().err == ("seakr: warning: ircot: none of its 4 searches found a passage: does the index "
                                       "hold these questions' passages? (leave --index out for the pooled index of "
                                       "the data file's own paragraphs)\n")
    assert _summary(tmp_path, [row(0, 1), row(1, 2)], "ircot", False, 2, 1.0, 1)["empty_retrieval_rate"] == 0.75
    old = {k: v for k, v in row(2, 0)["totals"].items() if k != "empty_retrievals"}  # a row before the count
    assert _summary(tmp_path, [row(0, 2), {**row(2, 0), "totals": old}], "ircot", False, 2, 1.0, 1)[
        "empty_retrieval_rate"] is None
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("field,value", [("method", 5), ("method.engine", "x"), ("shard", 5), ("shard", "x")])
def test_a_run_config_of_another_shape_is_named_by_compare_report_and_merge(tmp_path, field, value):
    """`"method": 5` in a run's config.json was an AttributeError in compare, `"shard": 5` one in merge."""
    from seakr.serve.render import report_html

    run_eval(ScriptedMethod(ANSWERS), EXS[:2], tmp_path / "run")
    p = tmp_path / "run" / "config.json"
    cfg = json.loads(p.read_text())
    if field == "method.engine":
        cfg["method"]["engine"] = value
    else:
        cfg[field] = value
    p.write_text(json.dumps(cfg))
    for read in (lambda: compare([str(tmp_path / "run"), str(tmp_path / "run")]), lambda: report_html(str(tmp_path)),
                 lambda: merge_runs(tmp_path / "m", [str(tmp_path / "run")])):
        with pytest.raises(ValueError, match=rf"^{re.escape(str(p))}: field {re.escape(field)}: "):
            read()


def test_a_question_that_fails_among_concurrent_ones_stops_the_rest_at_once(tmp_path):
    """With --concurrency, a failure (or Ctrl-C, which arrives the same way, in the waiting main thread) left the
    pool's exit answering every queued question first. Now the questions in flight are told to stop (their
    ``cancel`` event) and the queued ones never start; the rows finished before stay on disk."""
    import threading

    from seakr.eval.runner import answer_concurrently, takes_cancel
    from seakr.models.base import Cancelled

    started, lock = [], threading.Lock()

    class Stoppable(ScriptedMethod):
        def answer(self, question, listener=None, cancel=None):
            with lock:
                started.append(question)
            if question == EXS[0].question:
                return super().answer(question)  # one finishes
            if question == EXS[1].question:
                raise RuntimeError("boom")  # one fails
            if cancel.wait(10):  # the rest would take long: in flight until told to stop
                raise Cancelled()
            return super().answer(question)

    many = EXS + [Example(f"x{i}", f"extra {i}?", ["a"]) for i in range(40)]
    assert takes_cancel(Stoppable(ANSWERS)) and not takes_cancel(ScriptedMethod(ANSWERS))
    with pytest.raises(RuntimeError, match="boom"):
        run_eval(Stoppable(ANSWERS), many, tmp_path, concurrency=2)
    assert len(started) <= 4, started  # not 45
    assert [json.loads(line)["id"] for line in (tmp_path / "results.jsonl").read_text().splitlines()] == ["q0"]
    done = []  # without a cancel parameter, the queued questions are still dropped

    def fails(ex):
        done.append(ex)
        time.sleep(0.2)  # a question takes a while: the queue is dropped long before it could drain
        raise RuntimeError("late")
    with pytest.raises(RuntimeError, match="late"):
        answer_concurrently(fails, list(range(40)), 2, cancel=False)
    assert len(done) < 10


def test_questions_without_gold_answers_are_answered_and_written_without_scores(tmp_path):
    """A test split (no gold answers) was refused whole at load; answered now, its rows carry null EM/F1 and the
    tables a dash, every reader (resume, compare, report's summary, merge) takes them, and what needs F1 (a
    calibration, the gate's tuning) refuses the run in one line."""
    from seakr.eval.summary import summary_markdown

    bare = [Example(ex.id, ex.question, []) for ex in EXS]
    s = run_eval(ScriptedMethod(ANSWERS), bare, tmp_path / "test")
    assert (s["n"], s["scored"], s["em"], s["f1"], s["retrievals_per_question"]) == (5, 0, None, None, 1)
    assert "| scripted | 5 (5 without gold) | – | – | 1.00 |" in summary_markdown([s])
    rows = [json.loads(line) for line in (tmp_path / "test" / SCORES).read_text().splitlines()]
    assert {(r["em"], r["f1"]) for r in rows} == {(None, None)} and rows[0]["prediction"] == "ans0"
    assert all("em" not in c and "f1" not in c for c in rows[0]["final"]["candidates"].values())
    assert [r.f1 for r in run_rows(tmp_path / "test")] == [None] * 5
    s = run_eval(ScriptedMethod(ANSWERS), bare, tmp_path / "test", resume=True)  # nothing left to answer
    assert s["n"] == 5 and s["f1"] is None
    run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path / "dev")
    dev, test = str(tmp_path / "dev"), str(tmp_path / "test")
    out = compare([dev, test])
    assert f"| {dev} | 5 | 60.0 ±" in out and f"| {test} | 5 (5 without gold) | – | – |" in out
    assert f"- {test}: no question with a gold answer in common" in out
    assert merge_runs(tmp_path / "merged", [str(tmp_path / "test")])["f1"] is None
    with pytest.raises(ValueError, match=r"test: question 'q0' was answered without a gold answer \(no F1\); a "
                                         r"calibration needs a run of questions with answers$"):
        run_rows(tmp_path / "test", scored="a calibration")  # as calibrate --from-runs and probe gate read runs


def test_export_writes_a_runs_predictions_as_the_official_scripts_read_them(tmp_path):
    """An unscored run (a test split) is made to be submitted: its predictions sat in results.jsonl among traces,
    in no format a leaderboard or an official script reads."""
    bare = [Example(ex.id, ex.question, []) for ex in EXS]
    run_eval(ScriptedMethod(ANSWERS), bare, tmp_path / "test")
    (tmp_path / "test" / "results.jsonl").unlink()  # from the committed score rows alone, as on another machine
    want = {ex.id: ANSWERS[ex.question] for ex in EXS}
    lines = export_predictions(tmp_path / "test").splitlines()
    assert [json.loads(line) for line in lines] == [{"id": k, "prediction": v} for k, v in want.items()]
    assert json.loads(export_predictions(tmp_path / "test", "squad")) == want
    assert json.loads(export_predictions(tmp_path / "test", "hotpotqa")) == {"answer": want, "sp": {k: [] for k in want}}
    empty = {k: [] for k in want}  # 2WikiMultihopQA's script reads evidence triples too (KeyError without them)
    assert json.loads(export_predictions(tmp_path / "test", "2wiki")) == {"answer": want, "sp": empty, "evidence": empty}
    with pytest.raises(ValueError, match=r"export: format 'csv'; choose from jsonl, squad, hotpotqa, 2wiki"):
        export_predictions(tmp_path / "test", "csv")
    with pytest.raises(ValueError, match=re.escape("export: format 'HotpotQA' (did you mean 'hotpotqa'?); choose from")):
        export_predictions(tmp_path / "test", "HotpotQA")
    with pytest.raises(ValueError, match=r"no answered question here .*; it holds the runs test: export one$"):
        export_predictions(tmp_path)


def test_export_from_the_command_line_to_stdout_or_a_file(tmp_path):
    from helpers import run_cli

    run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path / "dev")
    cmd = ["export", str(tmp_path / "dev"), "--format", "squad"]
    r = run_cli(*cmd)
    assert r.returncode == 0 and json.loads(r.stdout)["q0"] == "ans0", r.stderr
    r = run_cli(*cmd, "--out", str(tmp_path / "preds.json"))
    assert r.returncode == 0 and json.loads((tmp_path / "preds.json").read_text())["q1"] == "wrong"
    r = run_cli("export", str(tmp_path / "none"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "none: no such folder" in r.stderr  # was "no answered question"
    (tmp_path / "empty").mkdir()
    r = run_cli("export", str(tmp_path / "empty"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "empty: no answered question here" in r.stderr


def test_no_output_is_written_over_a_runs_record_an_index_or_a_file_named_dash(tmp_path):
    """`seakr export RUN --out RUN/results.jsonl` replaced the run's rows with its predictions (the run was lost);
    `report --out` over config.json, a probe saved over summary.json (the timing of every sitting) the same;
    `--out -` wrote a file named "-". Every door refuses the run's, a study's states' and an index's own files;
    export and report write to standard output for "-"."""
    from helpers import run_cli

    from seakr.probes.calibration import Calibration
    from seakr.serve.render import write_report

    run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path / "dev")
    before = {f.name: f.read_bytes() for f in (tmp_path / "dev").iterdir()}
    for name in ("results.jsonl", "scores.jsonl", "config.json", "summary.json"):
        target = tmp_path / "dev" / name
        r = run_cli("export", str(tmp_path / "dev"), "--out", str(target))
        assert r.returncode == 2 and r.stderr == (f"seakr: error: --out {target}: is the record of the seakr run or "
                                                  f"study in {tmp_path / 'dev'}, which writing over it would lose; "
                                                  "name another file\n"), r.stderr
        r = run_cli("report", str(tmp_path / "dev"), "--out", str(target))
        assert r.returncode == 2 and "is the record of the seakr run" in r.stderr, r.stderr
        with pytest.raises(ValueError, match=r"^report .*: is the record of the seakr run or study in "):
            write_report(str(tmp_path / "dev"), str(target))
        with pytest.raises(ValueError, match=r"^calibration .*: is the record of the seakr run or study in "):
            Calibration("short", "eigen", "platt", a=-1.0, b=0.0).save(target)
    assert {f.name: f.read_bytes() for f in (tmp_path / "dev").iterdir()} == before
    r = run_cli("export", str(tmp_path / "dev"), "--out", "-", "--format", "squad", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["q0"] == "ans0" and not (tmp_path / "-").exists()
    r = run_cli("report", str(tmp_path / "dev"), "--out", "-", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("<!doctype html>") and not (tmp_path / "-").exists()
    r = run_cli("probe", "fit", str(tmp_path / "dev"), "--form", "short", "--out", "-", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("seakr: error: --out -: this command writes a file here")
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "seakr-index.json").write_text("{}")
    (tmp_path / "idx" / "sub").mkdir()  # deeper inside: `index build --overwrite` deletes it with the index
    for inside in (tmp_path / "idx" / "preds.json", tmp_path / "idx" / "sub" / "preds.json"):
        r = run_cli("export", str(tmp_path / "dev"), "--out", str(inside))
        assert r.returncode == 2 and f"is inside the seakr index {tmp_path / 'idx'}" in r.stderr, r.stderr
    assert run_cli("export", str(tmp_path / "dev"), "--out", str(tmp_path / "dev" / "preds.json")).returncode == 0


def test_an_output_through_a_link_is_judged_by_what_it_points_to(tmp_path):
    """`export RUN --out link.jsonl`, a link to the run's scores (or a path through a link to the run's folder),
    wrote the predictions over them: the write follows the link, the check read the link's own name."""
    from helpers import run_cli

    from seakr.common.runs import check_not_a_record

    run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path / "dev")
    before = {f.name: f.read_bytes() for f in (tmp_path / "dev").iterdir()}
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "dev" / "scores.jsonl")
    (tmp_path / "dir").symlink_to(tmp_path / "dev")
    for out in (tmp_path / "link.jsonl", tmp_path / "dir" / "config.json"):
        with pytest.raises(ValueError, match=rf"^--out {re.escape(str(out))} \(a link to .*dev/\w+\.jsonl?\): is the "
                                             "record of the seakr run or study in "):
            check_not_a_record(out, "--out")
        r = run_cli("export", str(tmp_path / "dev"), "--out", str(out))
        assert r.returncode == 2 and "is the record of the seakr run" in r.stderr, r.stderr
    assert {f.name: f.read_bytes() for f in (tmp_path / "dev").iterdir()} == before
    assert run_cli("export", str(tmp_path / "dev"), "--out", str(tmp_path / "dir" / "preds.json")).returncode == 0


@pytest.mark.parametrize("examples,error,said", [
    ([{"id": "q0", "question": "Q?", "answers": ["a"]}], TypeError, "examples[0]: expected a seakr Example"),
    ("What is it?", TypeError, "examples: a list of seakr Examples (seakr.eval.datasets.load_dataset reads them), got str"),
    ((ex for ex in EXS), TypeError, "examples: a list of seakr Examples (seakr.eval.datasets.load_dataset reads them), "
                                    "got generator"),
    ([EXS[0], EXS[0]], ValueError, "examples[1]: id 'q0' repeats the question at examples[0]"),
    ([EXS[0], Example("q9", "Q?", [])], ValueError, "examples[1]: question 'q9' has no gold answer, but 1 other(s) have"),
])
def test_run_eval_refuses_questions_it_cannot_answer_once_each(tmp_path, examples, error, said):
    """Dicts or a string were an AttributeError at the first question; a generator was read up by the resume check,
    so the run answered nothing and said nothing; an id given twice was answered and counted twice (n=2)."""
    with pytest.raises(error, match="^" + re.escape(said)):
        run_eval(ScriptedMethod(ANSWERS), examples, tmp_path / "r")
    assert not (tmp_path / "r").exists()
    with pytest.raises(TypeError, match=r"^method: expected a seakr method \(seakr.methods.build_method\), got NoneType$"):
        run_eval(None, EXS, tmp_path / "r")


@pytest.mark.parametrize("args,said", [
    ((1, "Q?", ["a"]), "example id: expected text, got 1"),
    ((" ", "Q?", ["a"]), "example id: empty (no visible text)"),
    (("q", "\u200b", ["a"]), "example question: empty (no visible text)"),
    (("q", "Q?", "a"), "example answers: expected a list of texts, got 'a'"),
    (("q", "Q?", [1]), "example answers[0]: expected text, got 1"),
])
def test_an_example_is_held_to_what_the_files_readers_give_when_it_is_made(args, said):
    """An int id, an empty one or a string of answers went into the rows as given; an empty question failed at its
    turn, naming no example: now the Example is refused as it is made, in the words the loaders use."""
    with pytest.raises(ValueError, match="^" + re.escape(said)):
        Example(*args)


def test_the_run_folder_functions_take_one_path_alone_and_name_a_wrong_one(tmp_path):
    """compare("runs/x") read the string letter by letter ("/: not an eval run directory"), as merge_runs did;
    export_predictions(None) was pathlib's "expected str, bytes or os.PathLike object"."""
    run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path / "r")
    assert compare(str(tmp_path / "r")) == compare([str(tmp_path / "r")])
    assert merge_runs(tmp_path / "m", tmp_path / "r")["n"] == len(EXS)
    for call, said in ((lambda: compare([]), "compare: no run folder given"),
                       (lambda: compare([5]), "compare: expected a folder's path, got int"),
                       (lambda: export_predictions(None), "export: expected a folder's path, got NoneType")):
        with pytest.raises((TypeError, ValueError), match="^" + re.escape(said) + "$"):
            call()


def test_a_run_keeps_the_options_its_method_does_not_read_beside_the_method(tmp_path):
    """The options a method took and never read were said once when the run began and kept nowhere: the run's
    folder (config.json) now names them, beside the method, so a resume still compares the method alone."""

    class Unreading(ScriptedMethod):
        def unread(self):
            return [("k", "scripted decodes greedily")]

    run_eval(Unreading(ANSWERS), EXS[:2], tmp_path / "a")
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    assert cfg["unread_options"] == {"k": "scripted decodes greedily"} and "unread_options" not in cfg["method"]
    run_eval(ScriptedMethod(ANSWERS), EXS, tmp_path / "a", resume=True)  # the same method: it resumes
    run_eval(ScriptedMethod(ANSWERS), EXS[:2], tmp_path / "b")
    assert "unread_options" not in json.loads((tmp_path / "b" / "config.json").read_text())


def test_a_merged_run_records_the_questions_of_every_shard(tmp_path):
    """The merged config.json kept the first shard's `examples` (its own question count) as the whole run's."""
    for i in range(2):
        run_eval(ScriptedMethod(ANSWERS), EXS[i::2], tmp_path / f"s{i}", extra_config={"shard": f"{i}/2"})
    merge_runs(tmp_path / "m", [str(tmp_path / "s0"), str(tmp_path / "s1")])
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["examples"] == len(EXS) and "shard" not in cfg and cfg["missing_shards"] == []
    with pytest.raises(ValueError, match=r"s0/m: inside the shard .*s0; merge into a folder outside the shards"):
        merge_runs(tmp_path / "s0" / "m", [str(tmp_path / "s0"), str(tmp_path / "s1")])
    assert not (tmp_path / "s0" / "m").exists()

"""One rule for what is a question, at every door: the Python API, HTTP (the request model, before any
work), a data file (named by file and line) and the command line (tests/reliability/test_inputs.py)."""

import pytest
from pydantic import ValidationError

from scripted import Reply, ScriptedLM
from seakr.common.layouts import DatasetError
from seakr.eval.datasets import load_dataset
from seakr.methods import build_method
from seakr.serve.app import AnswerRequest

NOT_QUESTIONS = ["", "   ", "\n\t", "\x00", "\x00\x01 \x7f",
                 "\x1b[0m", "\u200b\ufeff"]  # a console's escape, zero-width characters: asked as "" before


@pytest.mark.parametrize("q", NOT_QUESTIONS)
def test_a_blank_or_control_only_question_is_refused_at_every_door(tmp_path, q):
    m = build_method("cot", ScriptedLM(lambda v: Reply("So the answer is x.")), None)
    with pytest.raises(ValueError, match=r"^question: empty \(no visible text\)$"):  # one rule, one wording
        m.answer(q)
    with pytest.raises(ValidationError, match=r"question\n.*empty \(no visible text\)"):
        AnswerRequest(question=q)
    f = tmp_path / "qa.jsonl"
    f.write_text('{"id": "a", "question": "Who?", "golden_answers": ["x"]}\n'
                 + '{"id": "b", "question": %s, "golden_answers": ["x"]}\n' % __import__("json").dumps(q))
    with pytest.raises(DatasetError, match=r"qa.jsonl:2: example question: empty \(no visible text\)"):
        load_dataset(str(f), "flashrag")


@pytest.mark.parametrize("q,said", [(b"Who?", "bytes (decode it: question.decode('utf-8'))"), (["Who?"], "list"),
                                    (None, "NoneType")])
def test_a_question_that_is_not_text_is_named_by_its_type(q, said):
    m = build_method("cot", ScriptedLM(lambda v: Reply("So the answer is x.")), None)
    with pytest.raises(TypeError, match=r"^question: expected text, got " + __import__("re").escape(said) + "$"):
        m.answer(q)


def test_a_question_with_a_visible_character_is_taken():
    m = build_method("cot", ScriptedLM(lambda v: Reply("So the answer is x.")), None)
    assert m.answer("\x00 ?").answer == "x" and AnswerRequest(question=" é ").question == " é "


def test_the_answer_call_checks_its_listener_and_cancel_before_any_work():
    calls = []
    m = build_method("cot", ScriptedLM(lambda v: calls.append(v) or Reply("So the answer is x.")), None)
    with pytest.raises(TypeError, match="^cancel: expected a threading.Event \\(or None\\), got bool$"):
        m.answer("Who?", cancel=True)
    with pytest.raises(TypeError, match="^listener: expected a callable that takes each trace event, got int$"):
        m.answer("Who?", listener=5)
    assert not calls  # refused before the model was called


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, 100000])
def test_a_model_refuses_a_thread_count_before_loading(threads):
    """Beyond the CPUs the process may use, threads only contend (1000 on 2 CPUs: no output in 2 minutes)."""
    from seakr.models.hf import HFLanguageModel

    with pytest.raises(ValueError, match="^option threads: (expected a whole number in \\[1, inf\\) or null|100000: this "
                                         "process may use)"):
        HFLanguageModel("no-such-model", threads=threads)


def test_seakr_threads_is_checked_like_the_flag(monkeypatch):
    from seakr.eval.specs import ModelSpec, PlanError
    from seakr.models.hf import default_threads

    for bad in ("abc", "0", "100000"):
        monkeypatch.setenv("SEAKR_THREADS", bad)
        with pytest.raises(ValueError, match=f"SEAKR_THREADS='{bad}': expected a whole number from 1 to the"):
            default_threads()
        with pytest.raises(PlanError, match="SEAKR_THREADS"):  # at the plan's check, before the load
            ModelSpec("smollm2-135m").check()
    monkeypatch.setenv("SEAKR_THREADS", "1")
    assert default_threads() == 1
    with pytest.raises(PlanError, match="^model.threads 100000: this process may use"):
        ModelSpec("smollm2-135m", threads=100000).check()
    ModelSpec("smollm2-135m", threads=64).check(here=False)  # a remote Ray cluster's workers: their CPUs bound it


def test_a_method_that_searches_without_an_engine_is_refused_before_any_model_call():
    calls = []
    m = build_method("ircot", ScriptedLM(lambda v: calls.append(v) or Reply("So the answer is x.")), None)
    with pytest.raises(ValueError, match="^method 'ircot' searches: give it a search engine"):
        m.answer("Who directed Jaws?")
    assert not calls
    assert build_method("cot", ScriptedLM(lambda v: Reply("So the answer is x.")), None).answer("Who?").answer == "x"

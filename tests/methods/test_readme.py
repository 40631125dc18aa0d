"""The README's library example, run as written (the packaged default model, two passages of its own)."""

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.slow
def test_the_readme_library_example_runs_as_written(tmp_path, monkeypatch, capsys):
    text = README.read_text()
    block = re.search(r"## Use it as a library\s+```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)  # the example writes nothing where it runs: its passages are indexed for the process
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - our own documentation
    ans = scope["ans"]
    assert scope["qa"].engine.count() == 2 and not os.listdir(tmp_path)
    assert isinstance(ans.answer, str) and ans.answer
    assert set(ans.to_dict()) >= {"question", "answer", "method", "trace", "config"}
    printed = capsys.readouterr().out.splitlines()
    assert "model_call" in printed and ans.answer in printed  # the listener's events, then print(ans.answer)
    assert printed[printed.index(ans.answer) + 1].startswith("Q: ")  # ans.summary()


def test_the_readme_openai_call_is_one_the_service_answers():
    """The Serving section's OpenAI call, as written, by the real client against the app (a scripted model): the
    model id, the extra option and the decisions it names are the service's own."""
    from fastapi.testclient import TestClient
    from openai import OpenAI

    from scripted import Reply, ScriptedLM
    from seakr.search import passages_engine
    from seakr.serve.app import AnswerService, create_app

    block = re.search(r"## Serving, and the tools you already use\s+```python\n(.*?)```", README.read_text(), re.S).group(1)
    call = block.split("\npipe.", 1)[0]  # the first statement: the OpenAI client's call
    lm = ScriptedLM(lambda v: Reply("So the answer is Ridley Scott."))
    lm.info = lambda: {"model": "qwen2.5-coder-0.5b", "state_layer": 0, "state_source": "mlp"}
    paper = {"gate": "step", "rerank": "self-aware", "reasoning": "self-aware", "k": 3}  # not the 0.5B's fitted files
    svc = AnswerService(lm, passages_engine(["Alien is a 1979 film directed by Ridley Scott."]), defaults=paper)
    http = TestClient(create_app(svc), base_url="http://127.0.0.1:8000")
    scope = {"OpenAI": lambda **kw: OpenAI(**kw, http_client=http), "TOKEN": "unused", "q": "Who directed Alien?"}
    r = eval(compile(call, "README.md", "eval"), scope)  # noqa: S307 - our own documentation
    assert r.choices[0].message.content == "Ridley Scott" and r.model == "qwen2.5-coder-0.5b/seakr"
    assert r.model_extra["seakr"]["final"]["answer"] == "Ridley Scott"


@pytest.mark.slow
def test_the_own_states_example_runs_with_transformers_alone(capsys):
    """docs/your-model.md's example, with its hub id swapped for the packaged SmolLM2's converted folder (no hub
    here): bfloat16 states from transformers reach the estimators as they are."""
    from seakr.models.registry import resolve

    doc = (README.parent / "docs" / "your-model.md").read_text()
    block = re.search(r"## The estimators on states you collect yourself.*?```python\n(.*?)```", doc, re.S).group(1)
    folder, _ = resolve("smollm2-135m")
    block = block.replace('"HuggingFaceTB/SmolLM2-135M-Instruct"', repr(str(folder)))
    exec(compile(block, "your-model.md", "exec"), {})  # noqa: S102 - our own documentation
    eigen, entropy = map(float, capsys.readouterr().out.split())
    assert -10 < eigen < 20 and 0 <= entropy < 12  # finite: the bf16 states and the entropies were read

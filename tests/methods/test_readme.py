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


def test_the_readme_request_is_one_the_service_answers():
    """The Serving section's curl line, its header and body as written, against the app (a scripted model)."""
    import json
    import shlex

    from fastapi.testclient import TestClient

    from scripted import Reply, ScriptedLM
    from seakr.serve.app import AnswerService, create_app

    line = re.search(r"## Serving\s+```bash\n(curl .*?)\n```", README.read_text(), re.S).group(1)
    args = shlex.split(line)
    header, body, url = args[args.index("-H") + 1], args[args.index("-d") + 1], args[-1]
    name, _, value = header.partition(": ")
    svc = AnswerService(ScriptedLM(lambda v: Reply("So the answer is Ridley Scott.")), None, method="cot")
    r = TestClient(create_app(svc)).post(url.split("localhost:8000", 1)[1], content=body.encode(), headers={name: value})
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == "Ridley Scott" and r.json()["question"] == json.loads(body)["question"]


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

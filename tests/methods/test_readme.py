"""The README's library example, run as written (the packaged default model, a two-passage index of its own)."""

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.slow
def test_the_readme_library_example_runs_as_written(tmp_path, monkeypatch, capsys):
    text = README.read_text()
    block = re.search(r"## Use it as a library\s+```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)  # the example writes "my-index" where it runs
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - our own documentation
    ans = scope["ans"]
    assert os.path.isdir(tmp_path / "my-index") and isinstance(ans.answer, str) and ans.answer
    assert set(ans.to_dict()) >= {"question", "answer", "method", "trace", "config"}
    printed = capsys.readouterr().out.splitlines()
    assert "model_call" in printed and ans.answer in printed  # the listener's events, then print(ans.answer)
    assert printed[printed.index(ans.answer) + 1].startswith("Q: ")  # ans.summary()

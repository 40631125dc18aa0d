"""The eval runner with the real smollm2: JSONL per question, resume after kill -9, compare, TOML."""

import json
import os
import signal
import subprocess
import time

import pytest

from helpers import HOTPOT, SEAKR_CLI, fixture_path, run_cli as seakr

pytestmark = pytest.mark.slow


def test_eval_resume_after_kill9_and_compare(tmp_path):
    data = HOTPOT
    out = tmp_path / "run"
    args = ["eval", "--model", "smollm2-135m", "--data", data, "--limit", "3", "--method", "cot",
            "--option", "max_new_tokens=24", "--out", str(out)]
    p = subprocess.Popen([*SEAKR_CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res = out / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (res.exists() and res.read_text().count("\n") >= 1):
        time.sleep(0.2)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    n_before = res.read_text().count("\n")
    assert 1 <= n_before <= 3
    r = seakr(*args)
    assert r.returncode == 2 and "pass --resume" in r.stderr
    r = seakr(*args, "--resume")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(l) for l in res.read_text().splitlines()]
    assert len(rows) == 3 and len({x["id"] for x in rows}) == 3
    assert {"prediction", "golds", "em", "f1", "trace", "seconds"} <= set(rows[0])
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 3 and 0 <= s["f1"] <= 1
    assert (out / "summary.md").exists() and json.loads((out / "config.json").read_text())["versions"]["torch"]
    c = seakr("compare", str(out), str(out))
    assert c.returncode == 0 and f"| {out} #1 | 3 |" in c.stdout and f"| {out} #2 | 3 |" in c.stdout


@pytest.mark.parametrize("sig,code,said", [(signal.SIGTERM, 143, "stopped (SIGTERM)"), (signal.SIGINT, 130, "interrupted")])
def test_a_stopped_run_says_what_it_kept_and_resumes(tmp_path, sig, code, said):
    """SIGTERM (a scheduler's preemption, ``timeout``) ended the process at once and silently, and Ctrl-C exited
    130 without a word; with --concurrency, Ctrl-C waited for every queued question (122 s on 6). Both now stop
    the questions in flight, close the rows, and say where they are and how to go on."""
    out = tmp_path / "run"
    data = tmp_path / "hotpot_many.json"  # the fixture's 12 questions ten times over: far more than a signal's wait
    recs = json.loads(open(HOTPOT, encoding="utf-8").read())
    data.write_text(json.dumps([{**r, "_id": f"{r['_id']}-{i}"} for i in range(10) for r in recs]))
    # short chains: what is checked is the stop and the resume, not the answers (the defaults took ~50 s a run
    # of this test on an AVX2 CPU running float32)
    args = ["eval", "--model", "smollm2-135m", "--data", str(data), "--method", "ircot", "--concurrency", "2",
            "--option", "max_new_tokens=16", "--option", "max_steps=2", "--out", str(out)]
    # a suite started in the background (nohup, CI) has SIGINT ignored, and a child inherits that: put Ctrl-C back
    p = subprocess.Popen([*SEAKR_CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    res = out / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (res.exists() and res.read_text().count("\n") >= 1):
        time.sleep(0.1)
    p.send_signal(sig)
    err = p.communicate(timeout=300)[1]
    assert p.returncode == code, err[-2000:]
    assert err.strip().splitlines()[-1] == (f"seakr: {said}; the questions finished are kept in {out}: the same "
                                            "command with --resume goes on from them"), err[-2000:]
    text = res.read_text()
    assert text.endswith("\n") and all(json.loads(line)["id"] for line in text.splitlines())  # rows closed whole
    assert 1 <= text.count("\n") < 60  # the queued questions were dropped, not answered on the way out
    if sig == signal.SIGTERM:  # the resume reads rows alike after either stop (a process each: ~15 s on a slow CPU)
        r = seakr(*args, "--limit", "2", "--resume")
        assert r.returncode == 0, r.stderr


def test_toml_runs_methods_and_ablations(tmp_path):
    data = HOTPOT
    conf = tmp_path / "runs.toml"
    conf.write_text(f'''
data = "{data}"
model = "smollm2-135m"
limit = 1
out = "{tmp_path / 'grid'}"
[[run]]
name = "seakr-energy"
method = "seakr"
options = {{ estimator = "energy", delta = 0.0, max_new_tokens = 16, max_steps = 2, n_shot = 1 }}
[[run]]
method = "ircot"
options = {{ max_new_tokens = 16, max_steps = 2, n_shot = 1 }}
''')
    r = seakr("eval", "--config", str(conf))
    assert r.returncode == 0, r.stderr
    assert "| seakr-energy | 1 |" in r.stdout and "| ircot | 1 |" in r.stdout
    assert (tmp_path / "grid" / "seakr-energy" / "results.jsonl").exists()
    cfg = json.loads((tmp_path / "grid" / "ircot" / "config.json").read_text())
    assert cfg["method"]["model"]["model"] == "smollm2-135m"  # the TOML's model, not the CLI default


def test_bad_input_is_one_line_and_nonzero(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "q", "answer": {"text": "x"}}\n')
    r = seakr("eval", "--data", str(bad), "--layout", "hotpotqa", "--out", str(tmp_path / "o"), "--model", "smollm2-135m")
    assert r.returncode == 2 and "bad.jsonl:1: field answer: dict is no answer" in r.stderr
    bad.write_text('{"id": "1", "question": "q"}\n')  # no answer: a test split, but nothing to pool: one line still
    r = seakr("eval", "--data", str(bad), "--layout", "hotpotqa", "--out", str(tmp_path / "o"), "--model", "smollm2-135m")
    assert r.returncode == 2 and "bad.jsonl: its questions carry no context paragraphs to pool; pass --index" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    table = fixture_path("qa_mini.qa.csv")  # questions and answers: the pooling's bar was drawn above the line
    for argv in (("eval", "--method", "ircot"), ("rerank-study",)):
        r = seakr(*argv, "--data", table, "--out", str(tmp_path / "t"), "--model", "smollm2-135m")
        assert r.returncode == 2 and r.stderr.strip() == f"seakr: error: {table}: its questions carry no context " \
            "paragraphs to pool; pass --index", r.stderr


def test_a_file_of_questions_without_answers_is_answered_by_eval(tmp_path):
    """A test split or one's own questions (no gold answers): refused whole before; answered now, said so once,
    the table's scores a dash."""
    data = tmp_path / "mine.jsonl"
    data.write_text('{"id": "t1", "question": "Who wrote Hamlet?"}\n{"id": "t2", "question": "What is the capital of Peru?"}\n')
    out = tmp_path / "run"
    r = seakr("eval", "--model", "smollm2-135m", "--data", str(data), "--method", "cot", "--option", "max_new_tokens=16",
              "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("mine.jsonl: no question has a gold answer: answers are written, without EM or F1") == 1
    assert "| cot | 2 (2 without gold) | – | – |" in r.stdout
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(x["id"], x["em"], x["f1"], x["golds"]) for x in rows] == [("t1", None, None, []), ("t2", None, None, [])]
    assert all(x["prediction"] for x in rows)
    assert json.loads((out / "summary.json").read_text())["f1"] is None

"""``seakr fit`` end to end on a scripted model (given texts and states, the real studies, fitting, index and
files): every fitted file a run reads, the report, the resume after a stop, and the refusals before any model
loads (a dev question, a folder of an earlier fit, an option no stage passes on, a budget too small)."""

import json
import re

import numpy as np
import pytest

from helpers import HOTPOT, run_cli
from scripted import Reply, ScriptedLM
from seakr.eval.fit import fit
from seakr.eval.fitplan import FitPlan
from seakr.eval.specs import PlanError
from seakr.prompts import SHORT_INSTRUCTION

N = 40  # questions: half A the even ones, half B the odd ones, each half right and wrong alike


def right(n: int) -> bool:
    return n % 4 in (0, 1)


def answer(n: int) -> str:
    return f"Town{n}" if right(n) else "Nowhere"


def script(v):
    """Right where ``right(n)``: a certain answer (agreeing samples, a state on one side); else a wrong, unsure one."""
    n = int(re.search(r"country (\d+)", v.question).group(1))
    spread = 0.05 if right(n) else 2.0
    state = [1.0 if right(n) else -1.0, *np.random.default_rng(n).normal(size=15) * 0.3]
    if v.forced or SHORT_INSTRUCTION in v.prompt:
        return Reply(answer(n), spread, state=state)
    if v.answer:
        return Reply(f"So the answer is {answer(n)}", spread, state=state)
    return Reply(f"The capital of country {n} is {answer(n)}", spread, state=state)


def train_file(tmp_path, n=N, prefix="tr"):
    rows = [{"_id": f"{prefix}-{i}", "question": f"What is the capital of country {i}?", "answer": f"Town{i}",
             "supporting_facts": [[f"Country {i}", 0]],
             "context": [[f"Country {i}", [f"The capital of country {i} is Town{i}."]],
                         [f"Other {i}", [f"Country {i} has rivers and hills."]]]} for i in range(n)]
    f = tmp_path / f"{prefix}.official.json"
    f.write_text(json.dumps(rows))
    return f


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SEAKR_DEV_IDS", raising=False)


def plan(tmp_path, **kw):
    return FitPlan(**{"train": [str(train_file(tmp_path))], "out": str(tmp_path / "fitted"), "limit": N, "folds": 3,
                      "options": {"k": 4}, **kw})


def test_a_fit_writes_every_file_a_run_reads_and_a_report(tmp_path, cache):
    lm, said = ScriptedLM(script), []
    report = fit(plan(tmp_path), lm, progress=False, say=said.append)
    out = tmp_path / "fitted"
    names = {p.name for p in out.iterdir()}
    assert {"scripted-short.probe.json", "scripted-short-eigen.calibration.json", "gates.json", "fit-report.md",
            "scripted-final-rationale-eigen.calibration.json", "scripted-final-knowledge-eigen.calibration.json",
            "gate-probe.json", "gate-check.json"} <= names
    # 20 answers a map: Platt's two parameters, not isotonic steps on single answers
    assert {json.loads((out / f).read_text())["kind"] for f in names if f.endswith(".calibration.json")} == {"platt"}
    gates = json.loads((out / "gates.json").read_text())["scripted"]
    assert set(gates) == {"probe", "check"} and all(0 <= g["gate_p"] <= 1 for g in gates.values())
    # the probe separates the scripted right and wrong answers, on half A out of fold and on half B unseen
    sig = report["signals"]
    b = sig["check probe (half B, unseen)"]
    assert b["auroc"] > 0.9 and report["probe"]["cv_auroc"] > 0.9 and b["n"] == N // 2 and b["wrong"] == N // 4
    lo, hi = sig["check eigen (half A)"]["ci95"]
    assert lo <= sig["check eigen (half A)"]["auroc"] <= hi
    assert set(report["seconds_per_question"]) == {"check", "chain", "check2", "chain2"}
    # projected from the first questions before the rest, and again from every question timed after each stage
    assert [s for s in said if s.startswith("fit: about")] == [s for s in said if "s a question for the check" in s]
    assert len([s for s in said if s.startswith("fit: about")]) == 4
    page = (out / "fit-report.md").read_text()
    assert "check probe (half B, unseen)" in page and "gate=probe" in page
    # the halves are disjoint: the gate's questions are the odd ones, the probe's the even ones
    a = {json.loads(x)["id"] for x in next((out / "runs").glob("check-0-*")).joinpath("detect_rows.jsonl").read_text().splitlines()}
    b = {json.loads(x)["id"] for x in next((out / "runs").glob("check2-0-*")).joinpath("detect_rows.jsonl").read_text().splitlines()}
    assert not a & b and len(a) == len(b) == N // 2
    # a SeaKR run with probes=OUT settles its automatic rules on these files
    from seakr.methods import SeaKR

    m = SeaKR(lm, None, probes=str(out), k=4)
    assert m.config.gate == "probe" and m.config.reasoning == "calibrated"


def test_a_stopped_fit_resumes_without_asking_again(tmp_path, cache, capsys):
    class Stop(Exception):
        pass

    lm, asked, first = ScriptedLM(script), [], set()

    def stopping(v):
        asked.append(v)
        if len(asked) == 30:  # a kill in the middle: the rows so far are on disk
            raise Stop
        if SHORT_INSTRUCTION in v.prompt:
            first.add(v.question)
        return script(v)

    with pytest.raises(Stop):
        fit(plan(tmp_path), ScriptedLM(stopping), progress=False, say=lambda s: None)
    with pytest.raises(PlanError, match="--resume"):  # an earlier fit's folder is not overwritten
        fit(plan(tmp_path), lm, progress=False, say=lambda s: None)
    capsys.readouterr()
    fit(plan(tmp_path, resume=True), lm, progress=False, say=lambda s: None)
    assert "warning" not in capsys.readouterr().err  # its own pilots and its several files are no earlier run's
    rows = next((tmp_path / "fitted" / "runs").glob("check-0-*")).joinpath("detect_rows.jsonl").read_text().splitlines()
    ids = [json.loads(x)["id"] for x in rows]
    assert len(ids) == len(set(ids)) == N // 2
    again = {v.question for v in lm.calls if SHORT_INSTRUCTION in v.prompt}
    half_a = {f"What is the capital of country {i}?" for i in range(0, N, 2)}
    assert first & half_a and not first & again & half_a  # what was checked before the stop is not asked again
    assert (first | again) >= half_a


def test_bad_plans_are_refused_before_any_model_loads(tmp_path, cache):
    with pytest.raises(PlanError, match="option max_step"):
        plan(tmp_path, options={"max_step": 2})
    with pytest.raises(PlanError, match="folds"):
        plan(tmp_path, folds=1)
    ids = tmp_path / "dev_ids.txt"
    ids.write_text("x-1\ntr-7\n")
    with pytest.raises(PlanError, match=r"question 'tr-7' is a dev question \(listed in .*dev_ids.txt\)"):
        fit(plan(tmp_path, dev_ids=[str(ids)]), ScriptedLM(script), progress=False)
    qa = tmp_path / "qa.csv"
    qa.write_text("question,answer\n" + "".join(f"What is the capital of country {i}?,Town{i}\n" for i in range(8)))
    with pytest.raises(PlanError, match="no train file carries paragraphs"):
        fit(plan(tmp_path, train=[str(qa)]), ScriptedLM(script), progress=False)
    with pytest.raises(PlanError, match="over the budget"):
        fit(plan(tmp_path, budget_minutes=1e-9), ScriptedLM(script), progress=False, say=lambda s: None)


def _folder(tmp_path, kind):
    """A folder a fit's --out may name, in one of the states a user's folders are in."""
    d = tmp_path / "out"
    d.mkdir()
    if kind == "eval run":
        (d / "config.json").write_text(json.dumps({"method": {"method": "cot", "config": {}}}))
        (d / "results.jsonl").write_text('{"id": "q1"}\n')
    elif kind == "detect study":
        (d / "config.json").write_text(json.dumps({"study": "detect", "method": {}}))
        (d / "detect_rows.jsonl").write_text('{"id": "q1"}\n')
    elif kind == "index":
        (d / "seakr-index.json").write_text("{}")
    elif kind == "other files":
        (d / "model.safetensors").write_bytes(b"\0")
    return d


@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("kind, said", [("eval run", "the folder of an eval run"),
                                        ("detect study", "the folder of a detect study"),
                                        ("index", "is a seakr index"), ("other files", "not a seakr run's")])
def test_a_fit_writes_only_into_a_new_folder_or_its_own(tmp_path, cache, kind, said, resume):
    """A fit's folder is new, one that holds only notes, or a fit's own: any other kind is refused by name, with or
    without --resume, before any model call, and left as it was."""
    out = _folder(tmp_path, kind)
    before = sorted((p.name, p.read_bytes()) for p in out.iterdir())
    lm = ScriptedLM(script)
    with pytest.raises(PlanError, match=f"fit: .*{said}"):
        fit(plan(tmp_path, out=str(out), resume=resume), lm, progress=False, say=lambda s: None)
    assert not lm.calls and sorted((p.name, p.read_bytes()) for p in out.iterdir()) == before


def test_a_fit_resumes_only_with_the_train_files_it_began_with(tmp_path, cache):
    """A begun fit (its stage folders) refuses a run without --resume, and a --resume with other train files,
    whose fitted files would replace the first fit's; a folder of notes takes a new fit."""
    out = tmp_path / "fitted"
    (out / "runs" / "check-0-tr").mkdir(parents=True)
    (out / "README.md").write_text("notes")
    lm = ScriptedLM(script)
    with pytest.raises(PlanError, match="holds an earlier fit; pass --resume"):
        fit(plan(tmp_path), lm, progress=False, say=lambda s: None)
    other = train_file(tmp_path, prefix="other")
    with pytest.raises(PlanError, match=r"--resume with other train files, or in another order, .*runs/check-0-tr\)"):
        fit(plan(tmp_path, train=[str(other)], resume=True), lm, progress=False, say=lambda s: None)
    assert not lm.calls
    from seakr.eval.fitplan import check_fit_home

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("notes")
    check_fit_home(plan(tmp_path, out=str(tmp_path / "notes")))  # notes only: a new fit goes in


@pytest.mark.parametrize("n, half, count", [(39, "B", 19), (10, "A", 5)])
def test_a_chain_too_small_for_its_maps_and_gate_level_is_refused_before_the_model_loads(tmp_path, cache, n, half,
                                                                                         count):
    """Half A's chain fits the final maps and half B's the gate level: each needs MIN_CHAIN questions, and the plan
    says so, with the count of each file, before any question is asked."""
    from seakr.eval.fitplan import MIN_CHAIN

    lm = ScriptedLM(script)
    fp = FitPlan(train=[str(train_file(tmp_path, n=n))], out=str(tmp_path / "fitted"), limit=n, options={"k": 4})
    with pytest.raises(PlanError, match=rf"chain has {count} question\(s\) in half {half} "
                                        rf"\(tr.official.json: {count}\).* at least {MIN_CHAIN} a half"):
        fit(fp, lm, progress=False, say=lambda s: None)
    assert not lm.calls


def test_the_command_refuses_a_dev_file_by_id_in_one_line(tmp_path):
    """A train file holding a question a dev-id list names (as ``exclusion_lists/*_dev_ids.txt`` do) is refused at
    the door, before any model loads."""
    from seakr.eval.datasets import load_dataset

    ids = tmp_path / "hotpotqa_dev_ids.txt"
    ids.write_text("".join(ex.id + "\n" for ex in load_dataset(HOTPOT)[1:3]))
    r = run_cli("fit", "--train", HOTPOT, "--out", str(tmp_path / "f"), "--dev-ids", str(ids))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "is a dev question" in r.stderr and "hotpotqa_dev_ids.txt" in r.stderr


@pytest.mark.slow
def test_the_command_projects_its_time_from_the_first_questions_and_keeps_to_a_budget(tmp_path):
    out = tmp_path / "f"
    args = ("fit", "--model", "smollm2-135m", "--train", str(train_file(tmp_path)), "--out", str(out), "--limit",
            str(N), "--option", "k=3", "--option", "max_new_tokens=16")
    r = run_cli(*args, "--budget", "0.001")
    assert r.returncode == 2, r.stderr
    said = r.stderr.strip().splitlines()
    assert said[0].startswith(f"fit: 1 train file(s), the first {N} questions")
    assert "seakr: error: fit: about" in said[-1] and "over the budget of 0.001 min" in said[-1]
    # the pilots (the first questions of the check, the first of the chain) are kept; the rest waits for --resume
    from seakr.eval.fit import PILOT

    check = next((out / "runs").glob("check-0-*")) / "detect_rows.jsonl"
    chain = next((out / "runs").glob("chain-0-*")) / "scores.jsonl"
    assert len(check.read_text().splitlines()) == PILOT["check"] > 1
    assert len(chain.read_text().splitlines()) == PILOT["chain"]


def test_the_documented_fit_commands_are_the_commands_flags():
    import shlex
    from pathlib import Path

    from seakr.cli.args import build_parser

    doc = (Path(__file__).resolve().parents[2] / "docs" / "your-model.md").read_text().replace("\\\n", " ")
    commands = [ln.split("#")[0] for ln in doc.splitlines() if ln.startswith("seakr fit ")]
    assert len(commands) >= 2
    for c in commands:
        args = build_parser().parse_args(shlex.split(c)[1:])
        assert args.cmd == "fit" and args.train and args.out


@pytest.mark.slow  # a whole fit under a real (random) model: ~20 s
def test_a_fit_runs_end_to_end_on_a_tiny_random_model(tmp_path, cache, tiny_lm):
    """The real generation, states, index and fitting under one model: a random Llama whose own greedy short answers
    are made the gold answers of half the questions, so both labels occur."""
    from seakr.eval.detect import _detect_answer
    from seakr.eval.studies import StudiedSeaKR

    m = StudiedSeaKR(tiny_lm, None, k=3)
    said = {i: _detect_answer(m, f"What is the capital of country {i}?", [], "short", [])[1] for i in range(N)}
    assert sum(bool(a.strip()) for a in said.values()) >= N // 2  # answers to be right with
    f = train_file(tmp_path)
    rows = json.loads(f.read_text())
    for i, r in enumerate(rows):
        r["answer"] = said[i] if right(i) and said[i].strip() else "Zanzibar Quux"
    f.write_text(json.dumps(rows))
    fp = FitPlan(train=[str(f)], out=str(tmp_path / "fitted"), limit=N, folds=3,
                 options={"k": 3, "max_new_tokens": 12, "n_shot": 0})
    report = fit(fp, tiny_lm, progress=False, say=lambda s: None)
    assert report["model"] == tiny_lm.info()["model"] and set(report["gates"]) == {"probe", "check"}
    assert (tmp_path / "fitted" / "gates.json").is_file() and report["seconds_per_question"]["chain"] > 0


def test_a_stage_killed_mid_write_is_timed_from_its_whole_rows(tmp_path):
    """The projection of a resumed fit reads a stage's rows as a resume does: a last line torn by a kill is skipped."""
    from seakr.eval.fitplan import stage_seconds

    (tmp_path / "detect_rows.jsonl").write_text('{"id": "a", "seconds": 2.0}\n{"id": "b", "seconds": 4.0}\n{"id": "c", "sec')
    assert stage_seconds(tmp_path) == [2.0, 4.0] and stage_seconds(tmp_path / "none") == []


def test_the_projection_pools_every_question_timed_and_holds_the_budget_at_each_stage(tmp_path):
    """The pace is the mean over every timed question of the check (both halves) and of the chain, so a stage that
    runs slower than its pilots re-projects the rest, and a budget the rest no longer fits stops the fit there."""
    from types import SimpleNamespace

    from seakr.eval.fit import project

    def stage(name, n, seconds):
        out = tmp_path / name
        out.mkdir()
        (out / "detect_rows.jsonl").write_text("".join(f'{{"id": "{i}", "seconds": {t}}}\n' for i, t in enumerate(seconds)))
        return SimpleNamespace(out=str(out), sel=SimpleNamespace(examples=[None] * n))

    stages = {"check": [stage("c", 10, [1.0] * 10)], "chain": [stage("h", 4, [60.0])],
              "check2": [stage("c2", 10, [5.0] * 2)], "chain2": [stage("h2", 4, [])]}
    fp = SimpleNamespace(budget_minutes=None, limit=10)
    # check: (10 * 1 + 2 * 5) / 12 s; left: 8 check questions, 3 + 4 chain questions at 60 s
    assert project(fp, stages) == "fit: about 7 min left on this machine (1.7 s a question for the check, 60.0 s for the chain)"
    with pytest.raises(PlanError, match="over the budget of 5 min: a limit of about 6 fits it"):
        project(SimpleNamespace(budget_minutes=5, limit=10), stages)

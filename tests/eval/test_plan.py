"""One set of defaults: ``seakr eval`` (flags or a TOML grid) and the Python API build the same plan and
the same effective method config from the same inputs; the per-dataset defaults live in the plan."""

import dataclasses
import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from helpers import HOTPOT, fixture_path, run_cli
from scripted import Reply, ScriptedLM
from seakr.cli.commands import plan_from_args
from seakr.cli.flags import CLIError
from seakr.cli.args import build_parser
from seakr.eval.datasets import load_dataset
from seakr.eval.grid import read_grid
from seakr.eval.plan import EvalPlan, run_plan
from seakr.eval.specs import ModelSpec, PlanError, RunSpec, method_options
from seakr.methods import build_method

NQ = fixture_path("nq_mini.oracle.jsonl")


def cli_plan(*argv):
    """The checked plan ``seakr eval ARGV`` runs (an output folder of its own where neither a flag nor a grid names
    one)."""
    out = [] if "--out" in argv or "--config" in argv else ["--out", tempfile.mkdtemp()]
    return plan_from_args(build_parser().parse_args(["eval", *argv, *out]))


@pytest.mark.parametrize("data", [HOTPOT, NQ])
def test_the_command_and_python_build_the_same_plan_and_effective_config(tmp_path, data):
    out = str(tmp_path / "run")
    cli = cli_plan("--data", data, "--out", out, "--method", "seakr", "--option", "k=5", "--option", "rerank=engine",
                   "--limit", "2", "--seed", "7", "--delta", "-3.5", "--model", "smollm2-135m", "--threads", "1")
    py = EvalPlan(data=data, out=out, runs=[RunSpec("seakr", {"k": 5, "rerank": "engine"})], limit=2, seed=7, delta=-3.5,
                  model=ModelSpec("smollm2-135m", threads=1))
    assert cli.to_dict() == py.to_dict()
    fam_cli, fam_py = cli.select().family, py.select().family
    assert fam_cli == fam_py
    assert cli.options_for(cli.runs[0], fam_cli) == py.options_for(py.runs[0], fam_py)
    # the method each builds, described as a run records it (config.json), is the same too
    lm = ScriptedLM(lambda v: Reply("x"))
    a = build_method("seakr", lm, None, **cli.options_for(cli.runs[0], fam_cli)).describe()
    b = build_method("seakr", lm, None, **py.options_for(py.runs[0], fam_py)).describe()
    assert a == b


def test_dataset_defaults_live_in_the_plan():
    hot = method_options("seakr", {}, "hotpotqa")
    assert hot["prompt_set"] == "hotpotqa" and "mode" not in hot and hot["seed"] == 42
    simple = method_options("seakr", {}, "simpleqa")
    assert simple["mode"] == "simple" and simple["prompt_set"] == "simpleqa"
    assert "mode" not in method_options("ircot", {}, "simpleqa")  # SeaKR's simple mode only
    assert method_options("seakr", {"mode": "multihop"}, "simpleqa")["mode"] == "multihop"  # the run wins
    assert method_options("seakr", {}, "hotpotqa", delta=-2.0)["delta"] == -2.0
    assert "delta" not in method_options("cot", {}, "hotpotqa", delta=-2.0)


def test_a_grid_fills_the_flags_left_at_their_defaults(tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "o"}"\nlimit = 3\nseed = 9\n'
                    '[[run]]\nname = "paper"\nmethod = "seakr"\noptions = { gate = "step" }\n'
                    '[[run]]\nmethod = "ircot"\n')
    p = cli_plan("--config", str(grid))
    assert (p.data, p.limit, p.seed, p.grid) == (HOTPOT, 3, 9, True)
    assert [(r.name, r.method, r.options) for r in p.runs] == [("paper", "seakr", {"gate": "step"}), ("ircot", "ircot", {})]
    assert p.out_for(p.runs[1]).endswith("o/ircot")
    assert cli_plan("--config", str(grid), "--limit", "1").limit == 1  # a flag given wins


def test_a_grid_path_beside_the_file_but_not_in_the_working_folder_says_where_it_is_read(tmp_path, monkeypatch):
    """A grid's paths are read from the working folder, as the flags' are; a config naming the data file beside
    it, run from elsewhere, was refused "q.jsonl: no such file" with the file in plain sight."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "q.jsonl").write_text(open(NQ, encoding="utf-8").read())
    (sub / "filler.jsonl").write_text(json.dumps({"id": "f1", "contents": '"T"\nsome text'}) + "\n")
    grid = sub / "g.toml"
    grid.write_text('data = "q.jsonl"\nout = "o"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PlanError, match=r"sub/g.toml: key 'data' names 'q.jsonl', which is beside this file but not in "
                                        r"the working folder .*: write 'sub/q.jsonl' or run from .*sub$"):
        cli_plan("--config", str(grid))
    assert cli_plan("--config", str(grid), "--data", NQ).data == NQ  # the flag's file is the one read: no word
    grid.write_text(f'data = "{NQ}"\nout = "o"\nfiller = ["filler.jsonl"]\n')
    with pytest.raises(PlanError, match=r"key 'filler' names 'filler.jsonl'"):
        cli_plan("--config", str(grid))
    monkeypatch.chdir(sub)  # from the config's folder the names are right
    assert cli_plan("--config", "g.toml").filler == ["filler.jsonl"]


def test_a_grid_with_runs_refuses_the_method_flags_and_an_empty_run_list(tmp_path):
    """`--method ircot --option max_steps=1` beside a grid's [[run]] tables were dropped without a word (the
    table was the grid's method), and `run = []` ran SeaKR, the flags' default, as if the key were absent."""
    from seakr.cli.flags import CLIError

    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "o"}"\n[[run]]\nmethod = "cot"\n')
    for flags, said in ((["--method", "ircot"], "--method"), (["--option", "max_steps=1"], "--option"),
                        (["--method", "cot", "--option", "k=2"], "--method and --option")):
        with pytest.raises(CLIError, match=f"^{said}: {re.escape(str(grid))} names its runs in \\[\\[run\\]\\] tables"):
            cli_plan("--config", str(grid), *flags)
    grid.write_text(f'data = "{HOTPOT}"\nrun = []\n')
    with pytest.raises(PlanError, match="'run' lists no runs"):
        cli_plan("--config", str(grid), "--out", str(tmp_path / "o"))
    for runs, said in (("5", "key run: expected a list of tables or null, got 5"),
                       ("[5]", r"key run\[0\]: expected a table, got 5")):
        grid.write_text(f'data = "{HOTPOT}"\nrun = {runs}\n')
        with pytest.raises(PlanError, match=said):
            cli_plan("--config", str(grid), "--out", str(tmp_path / "o"))
    grid.write_text(f'data = "{HOTPOT}"\nlimit = 2\n')  # settings only: the flags name the method
    p = cli_plan("--config", str(grid), "--out", str(tmp_path / "o"), "--method", "ircot", "--option", "max_steps=1")
    assert [(r.method, r.options) for r in p.runs] == [("ircot", {"max_steps": 1})] and p.limit == 2
    assert [r.method for r in cli_plan("--data", HOTPOT, "--out", str(tmp_path / "o")).runs] == ["seakr"]


def test_a_grid_holds_every_setting_a_flag_gives(tmp_path):
    """One place for a plan's knobs: a grid says its layout, filler, device... as the flags do (they were
    'unknown key' in a grid, so a GPU grid could not say its device)."""
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "o"}"\nlayout = "hotpotqa"\nfiller = ["{HOTPOT}"]\n'
                    'every = 2\nprompt_set = "2wikimultihopqa"\ndelta = -4\nconcurrency = 2\nprecision = "fp32"\n'
                    'device = "cpu"\nthreads = 1\nlayer = 3\nstate_source = "residual"\n[[run]]\nmethod = "cot"\n')
    p = cli_plan("--config", str(grid))
    assert (p.layout, p.filler, p.every, p.prompt_set, p.delta, p.concurrency) == (
        "hotpotqa", [HOTPOT], 2, "2wikimultihopqa", -4, 2)
    assert (p.model.precision, p.model.device, p.model.threads, p.model.layer, p.model.state_source) == (
        "fp32", "cpu", 1, 3, "residual")
    (tmp_path / "x.jsonl").write_text('{"id": "1", "title": "T", "text": "some text"}\n')
    flags = cli_plan("--config", str(grid), "--every", "3", "--precision", "bf16", "--filler", str(tmp_path / "x.jsonl"))
    assert (flags.every, flags.model.precision, flags.filler) == (3, "bf16", [str(tmp_path / "x.jsonl")])  # a flag wins
    # the tap was the Python API's only (state_source=): a model without an mlp module had no way out elsewhere
    assert cli_plan("--data", HOTPOT, "--out", str(tmp_path / "o"), "--state-source", "residual").model.state_source == "residual"


def test_data_and_out_are_asked_for_as_each_door_spells_them(tmp_path):
    """A Python caller read "--data and --out are required (or set them in --config)", flags it does not have;
    questions given as a list (as ``index=`` may be) were "data must be a path or text", and a DataFrame failed
    as "The truth value of a DataFrame is ambiguous"."""
    import pandas as pd

    for kw, said in ((dict(out="o"), "eval: data is required: EvalPlan(data="),
                     (dict(data=HOTPOT), "eval: out is required"), ({}, "eval: data and out are required"),
                     (dict(data=[{"question": "Who?", "answer": "x"}], out="o"), "eval: data: a file's path, not a list"),
                     (dict(data=pd.DataFrame({"question": ["Who?"]}), out="o"), "not a DataFrame of questions")):
        with pytest.raises(PlanError, match=re.escape(said)):
            EvalPlan(runs=["cot"], **kw).check()
    assert "eval: --data and --out are required (or set them in --config)" in run_cli("eval", "--out", str(tmp_path / "o")).stderr


def test_cpu_0_is_the_cpu_at_every_door(tmp_path):
    """torch names the one CPU ``cpu`` or ``cpu:0``; ``--device cpu:0`` was refused ("expected cpu, cuda, ..."), and
    ``cpu:3`` (which torch takes as the CPU, silently) is told there is one. A run records one spelling."""
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "o"}"\ndevice = "cpu:0"\n[[run]]\nmethod = "cot"\n')
    assert cli_plan("--config", str(grid)).model.device == "cpu"
    assert cli_plan("--data", HOTPOT, "--device", "cpu:0").model.device == "cpu"
    plan = EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"], model=ModelSpec(device="cpu:0"))
    plan.check()
    assert plan.model.device == "cpu"
    with pytest.raises(PlanError, match=re.escape("model.device 'cpu:3': there is one cpu device (cpu or cpu:0)")):
        EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"], model=ModelSpec(device="cpu:3")).check()


@pytest.mark.parametrize("line,said", [
    ('precision = "int4"', "key precision: 'int4': expected auto, float32"),
    ('device = "tpu"', "key device: 'tpu': expected cpu, cuda"),
    ('model = ""', "key model: empty; name a model"),
    ('model = "smollm2-135m"\nlayer = 99', "key layer: 99: expected a 0-based decoder layer in 0..29"),
    ("threads = 4096", "key threads: 4096: this process may use"),
])
def test_a_grid_s_model_keys_are_refused_naming_the_file_and_key(tmp_path, line, said):
    """They were refused naming a flag the grid does not have ("--precision 'int4': expected ...")."""
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "o"}"\n{line}\n[[run]]\nmethod = "cot"\n')
    with pytest.raises((PlanError, CLIError)) as e:
        cli_plan("--config", str(grid))
    assert str(e.value).startswith(f"{grid}: {said}"), str(e.value)
    if "threads" in line:  # a flag given wins, and a Ray launch's workers have CPUs of their own
        assert cli_plan("--config", str(grid), "--threads", "1").model.threads == 1


@pytest.mark.parametrize("change,match", [
    ({"runs": [lambda: RunSpec("seakr", {"k": -1})]}, "option k"),
    ({"runs": [lambda: RunSpec("nope")]}, "field method: unknown method"),
    ({"runs": [lambda: RunSpec("IRCoT")]}, re.escape("unknown method 'IRCoT' (did you mean 'ircot'?)")),
    ({"runs": [RunSpec("cot"), RunSpec("cot")]}, "second run"),
    ({"runs": [lambda: RunSpec("cot", name="a/b")]}, "field name: 'a/b' must be a file name"),
    ({"shard": "3/2"}, "shard '3/2': need 0 <= I < N"),
    ({"seed": -1}, re.escape("eval: seed: expected a whole number in [0, 4294967295], got -1")),
    ({"model": ModelSpec(model="qwen-tiny")}, "unknown model 'qwen-tiny': not a registry name"),  # before any pooling
])
def test_a_bad_plan_fails_in_one_line_before_any_model_loads(tmp_path, change, match):
    with pytest.raises(PlanError, match=match):  # a RunSpec refuses as it is made, the plan in its check
        runs = [r() if callable(r) else r for r in change.get("runs", [])]
        kw = {"data": HOTPOT, "out": str(tmp_path / "o"), **change, **({"runs": runs} if runs else {})}
        EvalPlan(**kw).check()


@pytest.mark.parametrize("python,flag,grid", [
    (lambda: dict(model=ModelSpec("smollm2-135m", precision="int4")), ["--precision", "int4"], 'precision = "int4"'),
    (lambda: dict(model=ModelSpec(state_source="ffn")), ["--state-source", "ffn"], 'state_source = "ffn"'),
    (dict(model=ModelSpec("smollm2-135m", layer=99)), ["--layer", "99"], "layer = 99"),
    (lambda: dict(model=ModelSpec(device="tpu")), ["--device", "tpu"], 'device = "tpu"'),
    (dict(model=ModelSpec("smollm2-135m", threads=4096)), ["--threads", "4096"], "threads = 4096"),
    (dict(seed=2 ** 40), ["--seed", str(2 ** 40)], f"seed = {2 ** 40}"),
])
def test_a_setting_is_named_as_each_door_spells_it(tmp_path, python, flag, grid):
    """One checker served the command line, the grid and the Python API, and named flags in all three: a Python
    caller read "--precision 'int4'" for ``ModelSpec(precision="int4")``. Each door now names its own."""
    name = flag[0][2:].replace("-", "_")
    with pytest.raises(PlanError) as e:  # a ModelSpec of a bad type refuses as it is made
        EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"], **(python() if callable(python) else python)).check()
    field, rest = str(e.value).removeprefix("eval: ").split(" ", 1)  # the plan's own field, or its model's
    assert field.rstrip(":") == ("" if name == "seed" else "model.") + name, str(e.value)
    r = run_cli("eval", "--data", HOTPOT, "--out", str(tmp_path / "o"), "--method", "cot", "--model", "smollm2-135m", *flag)
    if name in ("precision", "state_source"):  # the parser's own choices refuse these first
        assert r.returncode == 2 and f"argument {flag[0]}: invalid choice" in r.stderr, r.stderr
    else:
        assert (r.returncode, r.stderr) == (2, f"seakr: error: {flag[0]}{':' * field.endswith(':')} {rest}\n")
    (tmp_path / "g.toml").write_text(f'data = "{HOTPOT}"\n{grid}\n[[run]]\nmethod = "cot"\n')
    from seakr.cli.flags import CLIError

    with pytest.raises((ValueError, CLIError)) as e:
        cli_plan("--config", str(tmp_path / "g.toml"), "--out", str(tmp_path / "o")).check()
    assert str(e.value).startswith(f"{tmp_path / 'g.toml'}: key {name}: ") and "--" not in str(e.value), str(e.value)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="a Linux /proc")
def test_a_folder_the_system_refuses_fails_before_any_model_loads(tmp_path):
    """Root passes every permission check, yet /proc takes no new folder: ``--out /proc/x`` loaded the model,
    then failed with "[Errno 2] No such file or directory: '/proc/x'"."""
    for out in ("/proc/seakr-run", "/proc/seakr-run/a"):
        with pytest.raises(PlanError, match=rf"^out {out}: cannot create the folder \(/proc refuses new folders: "):
            EvalPlan(data=HOTPOT, out=out).check()


def test_the_python_doors_below_the_plan_name_a_folder_they_cannot_make(tmp_path):
    """``run_eval`` and the studies called from Python (no plan to check first) raised the system's own words:
    "[Errno 2] No such file or directory: '/proc/x'", "[Errno 20] Not a directory: 'a.csv/x'"."""
    from seakr.eval.rowlog import RowLog
    from seakr.eval.states import StateStore

    (tmp_path / "file").write_text("x")
    cases = [(tmp_path / "file" / "o", f"{tmp_path / 'file'} is not a directory"),
             (tmp_path / "file", f"{tmp_path / 'file'} is not a directory")]
    if os.path.isdir("/proc/self"):
        cases.append((Path("/proc/seakr-run/a"), "/proc refuses new folders: "))
    for out, why in cases:
        for make in (lambda o: RowLog(o, "results.jsonl", {}), lambda o: StateStore(o, ["L0:mlp"])):
            with pytest.raises(ValueError, match="^" + re.escape(f"{out}: cannot create the folder ({why}")):
                make(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_an_output_folder_that_cannot_be_made_fails_before_any_model_loads(tmp_path):
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "file" / "o", tmp_path / "file" / "o" / "p"):
        with pytest.raises(PlanError, match=rf"^out .*file/o.*: cannot create the folder \("
                                            rf"{tmp_path / 'file'} is not a directory\)$"):
            EvalPlan(data=HOTPOT, out=str(out)).check()
    (tmp_path / "locked").mkdir(mode=0o500)
    if os.geteuid() != 0:  # root writes anywhere
        with pytest.raises(PlanError, match=r"cannot create the folder \(.*locked is not writable\)$"):
            EvalPlan(data=HOTPOT, out=str(tmp_path / "locked" / "o")).check()
    EvalPlan(data=HOTPOT, out=str(tmp_path / "a" / "b")).check()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "locked"]  # the folder it tried is gone
    # made by the run's first write, not by the check: a run refused after it (its data, its model) left an
    # empty folder that the next command with that --out (an index build) refused as "already exists"
    assert not (tmp_path / "a").exists()


def test_a_plan_runs_from_python_with_any_generator(tmp_path):
    """The scripted model answers through the same run_plan the command calls: rows, config and summary."""
    lm = ScriptedLM(lambda v: Reply("So the answer is Stanley Kubrick."))
    plan = EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=[RunSpec("cot"), RunSpec("seakr", {"k": 2})], limit=2)
    sums = run_plan(plan, lm, progress=False, say=lambda _m: None)
    assert [s["name"] for s in sums] == ["cot", "seakr"] and all(s["n"] == 2 for s in sums)
    cfg = json.loads((tmp_path / "o" / "seakr" / "config.json").read_text())
    assert cfg["method"]["config"]["k"] == 2 and cfg["limit"] == 2
    assert cfg["method"]["config"]["prompt_set"] == "hotpotqa"  # the family default, from the plan


def test_the_runs_of_a_plan_search_one_opened_index(tmp_path, monkeypatch):
    """Each run opened the index again, and each opening reads every index file to compare it with its recorded
    digest: a grid of three runs over a given index read it four times (the check's, then one a run)."""
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    idx = str(TantivyEngine.build([Passage("p1", "Jaws", "Jaws was directed by Steven Spielberg.")],
                                  tmp_path / "idx").path)
    reads = []
    real = TantivyEngine.check_files
    monkeypatch.setattr(TantivyEngine, "check_files", staticmethod(lambda path: reads.append(path) or real(path)))
    lm = ScriptedLM(lambda v: Reply("So the answer is Steven Spielberg."))
    runs = [RunSpec("ircot", name="a"), RunSpec("ircot", {"max_steps": 1}, name="b"), RunSpec("single", name="c")]
    sums = run_plan(EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=runs, index=idx, limit=1), lm,
                    progress=False, say=lambda _m: None)
    assert [s["n"] for s in sums] == [1, 1, 1] and len(reads) == 2  # the plan's check, then the one all runs share


def test_a_plan_that_never_searches_needs_no_index_nor_paragraphs(tmp_path):
    """CoT over questions with no paragraphs (a FlashRAG file of questions and answers): nothing to pool and
    nothing to search, so no index; a method that searches still asks for one, in one line."""
    data = tmp_path / "qa.jsonl"
    data.write_text('{"id": "1", "question": "Who directed Jaws?", "golden_answers": ["Steven Spielberg"]}\n')
    lm = ScriptedLM(lambda v: Reply("So the answer is Steven Spielberg."))
    said = []
    (s,) = run_plan(EvalPlan(data=str(data), out=str(tmp_path / "o"), runs=[RunSpec("cot")]), lm, progress=False,
                    say=said.append)
    assert s["n"] == 1 and s["f1"] > 0.99 and said[0] == "index: none (no run searches)"
    with pytest.raises(ValueError, match="carry no context paragraphs to pool; pass --index"):
        run_plan(EvalPlan(data=str(data), out=str(tmp_path / "p"), runs=[RunSpec("ircot")]), lm, progress=False,
                 say=said.append)


def test_a_grid_saved_with_a_byte_order_mark_and_crlf_reads(tmp_path):
    g = tmp_path / "grid.toml"
    g.write_bytes(b'\xef\xbb\xbflimit = 1\r\n[[run]]\r\nmethod = "cot"\r\n')
    top, runs, _ = read_grid(str(g))
    assert top == {"limit": 1} and [r.method for r in runs] == ["cot"]


def test_the_python_api_takes_paths_method_names_and_a_model_name(tmp_path):
    plan = EvalPlan(data=Path(HOTPOT), out=tmp_path / "o", runs=["cot", RunSpec("ircot", name="i")],
                    model="smollm2-135m", filler=[Path(HOTPOT)]).check()
    assert plan.data == HOTPOT and plan.out == str(tmp_path / "o") and plan.filler == [HOTPOT]
    assert [r.method for r in plan.runs] == ["cot", "ircot"] and plan.model == ModelSpec("smollm2-135m")
    one = EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs="ircot", filler=Path(HOTPOT))  # not 'i', 'r', ...
    assert [r.method for r in one.runs] == ["ircot"] and one.filler == [HOTPOT]
    assert RunSpec("cot", None).options == {}  # it was "'NoneType' object is not iterable"
    with pytest.raises(PlanError, match="field options: expected a table, got \\[1\\]"):
        RunSpec("cot", [1])


def test_the_python_api_takes_numpy_numbers_from_a_sweep(tmp_path):
    """``limit=np.int64(50)`` (a frame's cell, ``np.arange``) was "limit must be a positive whole number, not
    np.int64(50)"; the numbers a plan holds are Python's own, so its config.json stays JSON."""
    import numpy as np

    plan = EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=[RunSpec("seakr", {"k": np.int64(4)})],
                    limit=np.int64(5), every=np.int32(2), concurrency=np.int64(1), seed=np.uint32(3),
                    delta=np.float32(-3.5), model=ModelSpec("smollm2-135m", threads=np.int64(1), layer=np.int64(3))).check()
    assert (plan.limit, plan.every, plan.seed, plan.delta, plan.model.threads, plan.model.layer) == (5, 2, 3, -3.5, 1, 3)
    assert all(type(v) is int for v in (plan.limit, plan.every, plan.concurrency, plan.seed, plan.model.layer))
    json.dumps(dataclasses.asdict(plan.model))
    with pytest.raises(PlanError, match=re.escape("eval: limit: expected a whole number in [1, inf) or null, got 2.5")):
        EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"], limit=np.float64(2.5)).check()


@pytest.mark.parametrize("kwargs,needle", [
    ({"limit": 1.5}, "eval: limit: expected a whole number in [1, inf) or null, got 1.5"),
    ({"limit": "5"}, "eval: limit: expected a whole number in [1, inf) or null, got '5'"),
    ({"every": 0}, "eval: every: expected a whole number in [1, inf)"),
    ({"concurrency": 0}, "eval: concurrency: expected a whole number in [1, inf), got 0"),
    ({"seed": "1"}, "eval: seed: expected a whole number in [0, 4294967295], got '1'"),
    ({"delta": float("nan")}, "eval: delta: expected a number (inf and -inf allowed) or null, got nan"),
    ({"layout": "nqq"}, "eval: layout: one of hotpotqa,"),
    ({"runs": [3]}, "eval: runs[0]: expected a RunSpec (or a method's name), got 3"),
    ({"runs": [lambda: RunSpec(["cot"])]}, "field method: expected text, got ['cot']"),
    ({"data": 5}, "eval: data: expected text or null, got 5"),
    ({"model": lambda: ModelSpec("smollm2-135m", precision="fp8")}, "model.precision 'fp8': expected auto"),
    ({"model": lambda: ModelSpec(device="gpu")}, "model.device 'gpu': expected cpu, cuda"),
    ({"model": lambda: ModelSpec("smollm2-135m", threads=0)}, "model.threads: expected a whole number in [1, inf) or null, got 0"),
    ({"model": lambda: ModelSpec("smollm2-135m", layer=2.5)}, "model.layer: expected a whole number in [0, inf) or null, got 2.5"),
    ({"model": lambda: ModelSpec("smollm2-135m", state_source="ffn")}, "model.state_source: one of mlp, residual, not 'ffn'"),
    ({"model": 3}, "eval: model: expected a ModelSpec or a model's name, got 3"),
    ({"model": lambda: ModelSpec([])}, "model: expected a registry name, a .gguf file or a model folder or null, got []"),
    ({"resume": "no"}, "eval: resume: expected true or false, got 'no'"),  # it resumed
    ({"grid": 1}, "eval: grid: expected true or false, got 1"),
    ({"filler": 5}, "eval: filler: expected a list of texts, got 5"),  # "'int' object is not iterable"
    ({"filler": [5]}, "eval: filler[0]: expected text, got 5"),  # os.path.isfile(5): a descriptor
    ({"runs": None}, "eval: runs: expected a list of RunSpecs (or methods' names), got None"),  # "'NoneType' object is not iterable"
    ({"runs": [lambda: RunSpec("cot", name="")]}, "field name: '' must be a file name"),  # not named after its method
    ({"runs": [lambda: RunSpec("cot", name=0)]}, "field name: expected text or null, got 0"),
    ({"runs": [lambda: RunSpec("cot", name="café")]}, "must be a file name of ASCII letters"),  # é: "letters" misled
    # a folder gr/results.jsonl: `report gr` and `compare gr` then said "[Errno 21] Is a directory"
    ({"runs": [lambda: RunSpec("cot", name="results.jsonl"), "single"]},
     "field name: 'results.jsonl' is the name of a file a run"),
    ({"runs": [lambda: RunSpec("cot", name="Config.JSON")]}, "field name: 'Config.JSON' is the name of a file a run keeps"),
])
def test_the_python_api_refuses_what_the_flags_refuse(tmp_path, kwargs, needle):
    """The command line's flags check their types; the Python API passed 1.5 to a slice, "5" onwards, 0 to a pool."""
    with pytest.raises(PlanError, match=re.escape(needle)):  # a RunSpec or a ModelSpec refuses as it is made
        kw = {k: [r() if callable(r) else r for r in v] if k == "runs" and isinstance(v, list) else v() if callable(v) else v
              for k, v in kwargs.items()}
        EvalPlan(**{"data": HOTPOT, "out": str(tmp_path / "o"), "runs": ["cot"], **kw}).check()


def test_ray_flags_without_ray_are_refused_not_dropped(tmp_path, capsys):
    """`seakr eval --shards 2` (no --ray) ran the whole file unsharded in one process, model loaded."""
    from seakr.cli import main

    for flags, said in ((["--shards", "2"], "--shards"),
                        (["--cpus-per-shard", "2", "--gpus-per-shard", "1"], "--cpus-per-shard, --gpus-per-shard")):
        assert main(["eval", "--data", HOTPOT, "--method", "cot", "--out", str(tmp_path / "o"), *flags]) == 2
        assert capsys.readouterr().err.startswith(f"seakr: error: {said}: with --ray only")
    assert not (tmp_path / "o").exists()  # refused before the plan made its folder


def test_a_ray_address_that_nothing_answers_is_refused_at_once(tmp_path):
    """A mistyped host or a stopped head made ray.init retry without end, logging a timeout every 40 s."""
    import socket

    from seakr.eval.cluster import check_address, run_shards

    with socket.socket() as s:  # a port nothing listens on: bound, never listened
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
        for address, why in ((f"127.0.0.1:{closed}", "Connection refused"), (f"ray://127.0.0.1:{closed}", "refused"),
                             ("nothost.invalid:6379", "no such host")):
            with pytest.raises(PlanError, match=f"--ray {re.escape(address)}: no Ray cluster answers there .*{why}"):
                check_address(address, timeout=2)
    for bad in ("localhost", "host:port", ":6379"):
        with pytest.raises(PlanError, match="expected HOST:PORT, ray://HOST:PORT or auto"):
            check_address(bad)
    with socket.create_server(("127.0.0.1", 0)) as srv:  # something answers: Ray is asked to join it
        check_address(f"127.0.0.1:{srv.getsockname()[1]}")
    plan = EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"])
    with pytest.raises(PlanError, match="no such host"):  # the Python API's door, before the plan's checks
        run_shards(plan, 2, address="nothost.invalid:6379")


@pytest.mark.parametrize("argv,said", [
    (["ask", "Who?", "--option", "k=5", "--option", "k=10"], "--option k: given twice (5, then 10); give it once"),
    (["ask", "Who?", "--delta", "-1", "--option", "delta=-2"], "--delta -1.0 and --option delta=-2: give one"),
    (["ask", "Who?", "--prompt-set", "hotpotqa", "--option", "prompt_set=simpleqa"], "--prompt-set hotpotqa and --option"),
    (["eval", "--data", HOTPOT, "--delta", "-1", "--option", "delta=-2"], "--delta -1.0 and --option delta=-2: give one"),
    (["eval", "--data", HOTPOT, "--option", "k=3", "--option", "k=4"], "--option k: given twice"),
    (["ask", "Who?", "--option", 'stop={"a": 1, "a": 2}'], "--option stop: the key 'a' is given twice in one object"),
    (["calibrate", "--data", NQ, "--k", "4", "--option", "k=5"], "--k 4 and --option k=5: give one"),
])
def test_one_option_given_two_values_is_refused(tmp_path, capsys, argv, said):
    """The last --option of a key won without a word, and a flag that is also an option won in `ask` while the
    option won in `eval`: the same two values gave two different runs."""
    from seakr.cli import main

    extra = ["--index", str(tmp_path)] if argv[0] == "ask" else ["--out", str(tmp_path / "o")]
    assert main([*argv, *extra]) == 2
    assert capsys.readouterr().err.startswith(f"seakr: error: {said}")


@pytest.mark.parametrize("argv,said", [
    (["eval", "--data", HOTPOT, "--data", NQ], f"seakr eval: argument --data: given twice ('{HOTPOT}', then '{NQ}')"),
    (["ask", "Who?", "--method", "cot", "--method", "ircot"], "seakr ask: argument --method: given twice ('cot', then"),
    (["calibrate", "--data", NQ, "--out", "o", "--k", "4", "--k", "5"],
     "seakr calibrate: argument --k: given twice (4, then 5)"),
    (["index", "build", HOTPOT, "--out", "a", "--out", "b"], "seakr index build: argument --out: given twice ('a',"),
])
def test_a_flag_of_one_value_given_two_is_refused(tmp_path, monkeypatch, capsys, argv, said):
    """argparse kept the last: `eval --data a.jsonl --data b.jsonl` ran b alone, and nothing said a was dropped."""
    from seakr.cli import main
    from seakr.cli.args import build_parser

    monkeypatch.chdir(tmp_path)  # the relative --out folders: were the check to fail, its outputs land here

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and capsys.readouterr().err.startswith(f"seakr: error: {said}")
    flag = argv[-2]
    once = build_parser().parse_args([*argv[:-1], argv[argv.index(flag) + 1]])  # the same value twice: taken
    assert "_seakr_flags_given" not in vars(once)


def test_a_filler_folder_pools_every_file_and_its_content_names_the_index(tmp_path, monkeypatch):
    """`index build FOLDER` reads a corpus folder; `--filler FOLDER` was refused ("a folder, not a corpus file").
    Its files join the pooled index, and a changed file makes another index (the digest covers each file)."""
    from seakr.eval.corpus import pooled_index
    from seakr.eval.datasets import load_dataset
    from seakr.search import open_engine

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    wiki = tmp_path / "wiki"
    (wiki / "AA").mkdir(parents=True)
    (wiki / "AA" / "a.jsonl").write_text('{"id": "f1", "title": "Zyxwv", "text": "Zyxwv is a filler passage."}\n')
    exs = load_dataset(HOTPOT)
    first = pooled_index(HOTPOT, exs, [str(wiki)])
    hits = open_engine(first).search("Zyxwv filler", 1)
    assert [h.id for h in hits] == ["f1"]
    assert pooled_index(HOTPOT, exs, [str(wiki)]) == first  # cached
    (wiki / "AA" / "a.jsonl").write_text('{"id": "f1", "title": "Zyxwv", "text": "Zyxwv, changed."}\n')
    assert pooled_index(HOTPOT, exs, [str(wiki)]) != first


def test_filler_beside_a_given_index_or_missing_is_refused_at_every_door(tmp_path, capsys):
    """Filler joins the pooled index of the data's paragraphs: beside --index it was dropped without a word
    (`--filler /nonexistent --index IDX` answered every question), and a missing file beside no index
    failed only once the data had been read."""
    from seakr.cli import main
    from seakr.search.tantivy_engine import TantivyEngine
    from seakr.search import Passage

    idx = str(TantivyEngine.build([Passage("p", "T", "text")], tmp_path / "idx").path)
    base = {"data": HOTPOT, "out": str(tmp_path / "o"), "runs": ["ircot"]}
    with pytest.raises(PlanError, match=r"^eval: filler adds passages to the pooled index .* index .*idx is given"):
        EvalPlan(**base, index=idx, filler=[HOTPOT]).check()
    with pytest.raises(PlanError, match=r"^eval: filler: .*nope\.jsonl: no such file$"):
        EvalPlan(**base, filler=[str(tmp_path / "nope.jsonl")]).check()
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.jsonl").write_text('{"id": "a", "text": "x"}\n')
    EvalPlan(**base, filler=[str(tmp_path / "corpus")]).check()  # a folder of corpus files, as `index build` reads it
    with pytest.raises(PlanError, match=r"^eval: filler: .*idx/gen-.*: a file of the seakr index .*idx, not a corpus"):
        EvalPlan(**base, filler=[str(tmp_path)]).check()  # an index among them: said before the pooling
    (tmp_path / "w1.jsonl").write_text('{"id": "w", "text": "x"}\n')
    assert EvalPlan(**base, filler=[str(tmp_path / "w*.jsonl")]).check().filler == [str(tmp_path / "w1.jsonl")]
    with pytest.raises(PlanError, match=r"^eval: filler: .*nope\*.jsonl: no file matches this pattern$"):
        EvalPlan(**base, filler=[str(tmp_path / "nope*.jsonl")]).check()
    EvalPlan(**base, filler=[HOTPOT]).check()  # filler of the pooled index: kept
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "g"}"\nindex = "{idx}"\nfiller = ["{HOTPOT}"]\n'
                    '[[run]]\nmethod = "ircot"\n')
    for argv in (["eval", "--data", HOTPOT, "--method", "ircot", "--out", str(tmp_path / "c"), "--index", idx,
                  "--filler", "/nonexistent/x"],
                 ["eval", "--config", str(grid)],
                 ["rerank-study", "--data", HOTPOT, "--out", str(tmp_path / "r"), "--index", idx, "--filler", HOTPOT]):
        assert main(argv) == 2
        assert "filler adds passages to the pooled index" in capsys.readouterr().err


def test_a_filler_file_that_is_no_corpus_is_named_by_its_flag_or_key_before_any_work(tmp_path, capsys):
    """A filler file whose corpus format cannot be told was found only by the pooling, after the data had been read
    and digested, and its message said to pass --format, which `eval` does not take."""
    from seakr.cli import main

    notes = tmp_path / "notes.txt"
    notes.write_text("a line of notes, not passages\n")
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "g"}"\nfiller = ["{notes}"]\n')
    for argv, where in ((["eval", "--data", HOTPOT, "--method", "ircot", "--out", str(tmp_path / "c"), "--filler",
                          str(notes)], "--filler: "),
                        (["eval", "--config", str(grid)], f"{grid}: key filler: ")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"seakr: error: {where}{notes}: cannot guess the corpus format; it reads dpr, table, ")
        assert err.count("\n") == 1 and "--format" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.toml", "notes.txt"]


def test_a_missing_file_is_named_by_the_setting_that_names_it_at_every_door(tmp_path, capsys):
    """`--data /nope` said "/nope: no such file" and `--train /nope` the same, naming neither the flag nor, in a grid,
    the key: the file was first opened by the loader, which knows no setting."""
    from seakr.cli import main
    from seakr.eval.fitplan import FitPlan, plan_stages

    gone = str(tmp_path / "gone.jsonl")
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{gone}"\nout = "{tmp_path / "g"}"\n')
    for argv, said in ((["eval", "--data", gone, "--out", str(tmp_path / "o")], "--data: "),
                       (["eval", "--config", str(grid)], f"{grid}: key data: "),
                       (["detect", "--data", gone, "--out", str(tmp_path / "d")], "--data: "),
                       (["fit", "--train", gone, "--out", str(tmp_path / "f")], "--train: "),
                       (["fit", "--train", HOTPOT, "--dev-ids", gone, "--out", str(tmp_path / "f")], "--dev-ids: ")):
        assert main(argv) == 2
        assert capsys.readouterr().err == f"seakr: error: {said}{gone}: no such file\n"
    with pytest.raises(PlanError, match=rf"^eval: data: {re.escape(gone)}: no such file$"):
        EvalPlan(data=gone, out=str(tmp_path / "o")).check()
    with pytest.raises(PlanError, match=rf"^fit: train: {re.escape(gone)}: no such file$"):
        plan_stages(FitPlan(train=[HOTPOT, gone], out=str(tmp_path / "f")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.toml"]


def test_a_resume_with_other_options_method_or_data_is_refused_before_the_model_loads(tmp_path):
    """The run's recorded method, options and data were compared only by the row log, once the model had
    loaded (10.8 s with the 1.5B); what the plan sets itself is compared when the questions are read.
    Options the model settles (auto, unset) are left to the row log, and a plan that matches resumes."""
    run_plan(EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=[RunSpec("ircot", {"max_steps": 1})], limit=1),
             lm=ScriptedLM(lambda v: Reply("Paris. So the answer is Paris.")), progress=False, say=lambda s: None)

    def resumed(runs, data=HOTPOT, **kw):  # the model given loaded, as run_plan(plan, lm) does
        plan = EvalPlan(data=data, out=str(tmp_path / "o"), runs=runs, resume=True, **kw).check()
        plan.check_folders(plan.select(), ScriptedLM(lambda v: Reply("x")))

    resumed([RunSpec("ircot", {"max_steps": 1, "temperature": 1, "prompt_style": "auto"})])  # the same run
    for runs, data, needle in (([RunSpec("ircot", {"max_steps": 2})], HOTPOT, "method.config.max_steps: 1 recorded, 2 now"),
                               ([RunSpec("cot", name="ircot")], HOTPOT, 'method.method: "ircot" recorded, "cot" now'),
                               ([RunSpec("ircot", {"max_steps": 1})], fixture_path("2wiki_mini.flashrag.jsonl"),
                                "--resume with different data")):
        with pytest.raises(PlanError, match=re.escape(needle)):
            resumed(runs, data)
    with pytest.raises(PlanError, match=re.escape("--resume with shard 1/2 but the run recorded no shard (the whole run)")):
        resumed([RunSpec("ircot", {"max_steps": 1})], shard="1/2")


@pytest.mark.parametrize("change, runs, kw", [
    ({"method": {"config": {"max_steps": 2}}}, [RunSpec("ircot", {"max_steps": 2})], {}),
    ({"method": {"method": "cot"}}, [RunSpec("cot", name="ircot")], {}),
    ({"shard": "1/2"}, [RunSpec("ircot", {"max_steps": 1})], {"shard": "1/2"}),
    ({"every": 2}, [RunSpec("ircot", {"max_steps": 1})], {"every": 2})])
def test_the_plan_and_the_row_log_refuse_a_resume_by_one_rule(tmp_path, change, runs, kw):
    """Before the model loads the plan compares the part of the run's record it knows; the row log compares the
    whole record after. Both are the one rule (resume.check_same_run), so both say the same."""
    from seakr.eval.rowlog import RowLog

    out = tmp_path / "o"
    run_plan(EvalPlan(data=HOTPOT, out=str(out), runs=[RunSpec("ircot", {"max_steps": 1})], limit=1),
             lm=ScriptedLM(lambda v: Reply("Paris. So the answer is Paris.")), progress=False, say=lambda s: None)
    recorded = json.loads((out / "config.json").read_text())
    now = {**recorded, **{k: v for k, v in change.items() if k != "method"},
           "method": {**recorded["method"], **{k: v for k, v in change.get("method", {}).items() if k != "config"},
                      "config": {**recorded["method"]["config"], **change.get("method", {}).get("config", {})}}}
    plan = EvalPlan(data=HOTPOT, out=str(out), runs=runs, resume=True, **kw).check()
    with pytest.raises(PlanError) as before:
        plan.check_folders(plan.select(), ScriptedLM(lambda v: Reply("x")))
    with pytest.raises(ValueError) as after:
        RowLog(out, "results.jsonl", now, resume=True)
    assert str(before.value) == str(after.value)


def test_a_finished_run_resumed_is_summarised_without_loading_the_model(tmp_path, monkeypatch):
    """A resume with nothing left to answer (a job resubmitted, a grid run again) loaded the model first, to find
    nothing to do. It now writes each run's summary again from its rows; a run with a question left, or one
    recorded with another model is refused before it loads."""
    class Named(ScriptedLM):  # the model a ModelSpec names, as its info() says
        def __init__(self, name):
            super().__init__(lambda v: Reply("Paris. So the answer is Paris."))
            self.model_name = name

        def info(self):
            return {**super().info(), "model": self.model_name}

    lm = Named("smollm2-135m")
    runs = [RunSpec("cot"), RunSpec("ircot", {"max_steps": 1})]
    plan = EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=runs, limit=3, model=ModelSpec("smollm2-135m"))
    first = run_plan(plan, lm, progress=False, say=lambda s: None)
    loads, said = [], []
    monkeypatch.setattr(ModelSpec, "load", lambda self: loads.append(self.model) or Named(self.model))
    again = run_plan(dataclasses.replace(plan, resume=True), progress=False, say=said.append)
    assert loads == [] and said[0].startswith("nothing left to answer") and again == first
    assert json.loads((tmp_path / "o" / "ircot" / "summary.json").read_text()) == json.loads(json.dumps(first[1]))
    fewer = run_plan(dataclasses.replace(plan, resume=True, limit=2), progress=False, say=said.append)
    assert loads == [] and [s["n"] for s in fewer] == [2, 2]  # the table of the two; the folder's of all three:
    assert json.loads((tmp_path / "o" / "ircot" / "summary.json").read_text()) == json.loads(json.dumps(first[1]))
    rows = tmp_path / "o" / "ircot" / "results.jsonl"
    rows.write_text("".join(rows.read_text().splitlines(keepends=True)[:-1]))  # the committed row stands for it
    assert run_plan(dataclasses.replace(plan, resume=True), progress=False, say=lambda s: None) == first
    for f in (rows, rows.with_name("scores.jsonl")):  # the last question's rows lost: it runs again
        f.write_text("".join(f.read_text().splitlines(keepends=True)[:2]))
    run_plan(dataclasses.replace(plan, resume=True), progress=False, say=lambda s: None)
    assert loads == ["smollm2-135m"] and len(rows.read_text().splitlines()) == 3
    with pytest.raises(ValueError, match='method.model.model: "smollm2-135m" recorded, "qwen2.5-coder-0.5b" now'):
        run_plan(dataclasses.replace(plan, resume=True, model=ModelSpec("qwen2.5-coder-0.5b")), progress=False,
                 say=lambda s: None)
    assert loads == ["smollm2-135m"]  # refused before the model loads


def test_a_grid_nested_past_the_parser_is_one_line(tmp_path):
    """`a = [[[[...` thousands deep in a grid was a RecursionError's traceback from inside tomllib."""
    from seakr.eval.grid import read_grid
    from seakr.eval.specs import PlanError

    (tmp_path / "g.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(PlanError, match=rf"^{tmp_path / 'g.toml'}: nested too deeply to read"):
        read_grid(str(tmp_path / "g.toml"))
    (tmp_path / "g.toml").write_text("limit = " + "9" * 5000 + "\n")
    with pytest.raises(PlanError, match=rf"^{tmp_path / 'g.toml'}: a number of over 4,300 digits$"):
        read_grid(str(tmp_path / "g.toml"))


@pytest.mark.parametrize("given", [{"index": "IDX"}, {"filler": ["FILLER"]}])
def test_an_index_or_filler_no_run_searches_is_said(tmp_path, given, capsys):
    """`eval --method cot --index X` printed "index: X" and never read it; `--filler F` was dropped without a
    word. It is said as unread, as delta without a SeaKR run is."""
    from helpers import HOTPOT
    from seakr.common import console
    from seakr.eval.plan import EvalPlan
    from seakr.eval.specs import RunSpec
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    TantivyEngine.build([Passage("a", "Alpha", "Alpha is a city.")], tmp_path / "idx")
    (tmp_path / "f.jsonl").write_text('{"id": "f", "title": "F", "text": "filler"}\n')
    paths = {"IDX": str(tmp_path / "idx"), "FILLER": str(tmp_path / "f.jsonl")}
    given = {k: [paths[x] for x in v] if isinstance(v, list) else paths[v] for k, v in given.items()}
    name = next(iter(given))
    console._WARNED.clear()
    EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=[RunSpec("cot"), RunSpec("cot", {"k": 2}, "cot2")], **given).check()
    assert (f"eval: {name} is not read: it is searched only by methods that retrieve, and no run of the plan does (cot)"
            in capsys.readouterr().err)  # said, not refused: one loop of the same flags over several methods runs
    EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=[RunSpec("cot"), RunSpec("ircot")], **given).check()
    assert "is not read" not in capsys.readouterr().err


def test_a_path_with_a_tilde_is_the_home_folders_in_a_grid_and_the_python_api(tmp_path, monkeypatch):
    """A TOML grid passes through no shell: ``data = "~/dev.json"`` was "no such file", and ``out = "~/runs"``
    would have made a folder named "~" in the working folder."""
    import shutil

    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copy(HOTPOT, tmp_path / "dev.json")
    plan = EvalPlan(data="~/dev.json", out="~/runs/x", runs=["cot"], filler=["~/dev.json"], model="~/m.gguf")
    assert (plan.data, plan.out, plan.filler, plan.model.model) == (
        str(tmp_path / "dev.json"), str(tmp_path / "runs" / "x"), [str(tmp_path / "dev.json")], str(tmp_path / "m.gguf"))
    assert len(EvalPlan(data="~/dev.json", out="~/o", runs=["cot"]).select().examples) == len(load_dataset(HOTPOT))
    assert len(load_dataset("~/dev.json")) == len(load_dataset(HOTPOT))  # the Python API's door too
    assert ModelSpec("~/m.gguf").model == str(tmp_path / "m.gguf") and ModelSpec("smollm2-135m").model == "smollm2-135m"
    grid = tmp_path / "g.toml"
    grid.write_text('data = "~/dev.json"\nout = "~/g"\n[[run]]\nmethod = "cot"\n')
    top, runs, _ = read_grid(str(grid))
    assert EvalPlan(**top, runs=runs).data == str(tmp_path / "dev.json")
    from importlib import resources

    from seakr.methods.seakr import SeaKRConfig

    (tmp_path / "set.json").write_text(resources.files("seakr.prompts").joinpath("data", "hotpotqa.json").read_text())
    (tmp_path / "probes").mkdir()
    c = SeaKRConfig.from_dict({"prompt_set": "~/set.json", "probes": "~/probes"})  # options naming files or folders
    assert (c.prompt_set, c.probes) == (str(tmp_path / "set.json"), str(tmp_path / "probes"))


def test_the_model_is_loaded_with_the_spec_s_tap(monkeypatch):
    """``--state-source`` reaches the model: a spec's every setting is a load_model argument."""
    import seakr.eval.specs

    seen = {}
    monkeypatch.setattr(seakr.eval.specs, "load_model", lambda name, **kw: seen.update(kw, name=name))
    ModelSpec("smollm2-135m", threads=1, layer=2, state_source="residual").load()
    assert seen == {"name": "smollm2-135m", "precision": "auto", "device": "cpu", "threads": 1, "state_layer": 2,
                    "state_source": "residual"}


def test_every_shard_takes_the_file_s_prompt_family_an_empty_one_too(tmp_path):
    """A shard with no question took its prompt family from the file's name (a QA table named data.csv ->
    hotpotqa) while its siblings took simpleqa from their questions: `merge` then refused the shards as
    different runs."""
    data = tmp_path / "data.jsonl"  # NQ questions under a name that says nothing
    data.write_text(Path(fixture_path("nq_mini.oracle.jsonl")).read_text())
    n = len(data.read_text().splitlines())
    fams = [EvalPlan(data=str(data), out=str(tmp_path / "o"), runs=["single"], shard=f"{i}/{n + 1}").select()
            for i in range(n + 1)]
    assert [len(s.examples) for s in fams] == [1] * n + [0]
    assert [s.family for s in fams] == ["simpleqa"] * (n + 1)


def test_a_runs_or_an_indexs_own_file_as_filler_is_refused_before_any_work(tmp_path):
    """`--filler RUN/results.jsonl` failed "missing field 'text'" once pooling began, and `--filler IDX` "IDX/....fast:
    cannot guess the corpus format": the plan's check names what each is, as `index build` does."""
    from seakr.eval.plan import EvalPlan
    from seakr.eval.specs import PlanError
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"method": {"method": "cot"}}))
    (run / "results.jsonl").write_text(json.dumps({"id": "q1", "question": "Who?"}) + "\n")
    idx = tmp_path / "idx"
    TantivyEngine.build([Passage("p1", "T", "some text")], idx)
    for filler, said in ((run / "results.jsonl", f"a file of the seakr run or study {run} (its config and rows), not a "
                          "corpus"), (idx, f"the seakr index {idx}, not a corpus; give the corpus files it was built from")):
        with pytest.raises(PlanError, match="^" + re.escape(f"eval: filler: {filler}: {said}")):
            EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["single"], filler=[str(filler)]).check()


@pytest.mark.parametrize("key, value, text", [
    ("layer", -1, ": expected a whole number in [0, inf) or null, got -1"),
    ("threads", 0, ": expected a whole number in [1, inf) or null, got 0"),
    ("state_source", "x", ": one of mlp, residual, not 'x'"),
    ("precision", "int4", " 'int4': expected auto, float32, bfloat16, float16, int8 (or fp32, bf16, fp16) (did you "
                          "mean 'int8'?)"),
    ("device", "gpu", " 'gpu': expected cpu, cuda, cuda:N (N a GPU number), mps or auto")])
def test_a_model_setting_is_refused_by_one_schema_named_as_each_door_spells_it(tmp_path, capsys, key, value, text):
    """ModelSpec is the one schema of the model settings: Python names the field ``model.KEY`` and a grid its key,
    with the same words after it; the command line refuses the same value naming its flag."""
    from seakr.cli.main import main

    with pytest.raises(PlanError) as py:
        ModelSpec(**{key: value}).check(here=False)
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "o"}"\n{key} = {json.dumps(value)}\n[[run]]\nmethod = "cot"\n')
    with pytest.raises(PlanError) as toml:
        cli_plan("--config", str(grid))
    assert str(py.value) == f"model.{key}{text}"
    assert str(toml.value) == f"{grid}: key {key}: {text.lstrip(': ')}"
    argv = ["eval", "--data", HOTPOT, "--method", "cot", "--out", str(tmp_path / "o"), f"--{key.replace('_', '-')}"]
    try:
        rc = main([*argv, str(value)])
    except SystemExit as e:  # argparse's own refusal of a value its flag parses
        rc = e.code
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and f"--{key.replace('_', '-')}" in err, err


def test_settings_are_checked_together_wherever_each_was_given(tmp_path):
    """The plan's one check reads every setting with the others it depends on: a flag's layer against the grid's
    model (the default model's depth refused a layer the grid's model has), and --threads against the CPUs of the
    machine that loads the model (a remote Ray cluster's, not this one's)."""
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nout = "{tmp_path / "o"}"\nmodel = "smollm2-135m"\n[[run]]\nmethod = "cot"\n')
    plan = cli_plan("--config", str(grid), "--layer", "26")  # SmolLM2-135M has 30 layers, the default model 24
    assert (plan.model.model, plan.model.layer) == ("smollm2-135m", 26)
    with pytest.raises(PlanError, match=r"^model.layer 30: expected a 0-based decoder layer in 0\.\.29"):
        cli_plan("--config", str(grid), "--layer", "30")
    many = str(os.cpu_count() * 8)
    assert cli_plan("--data", HOTPOT, "--method", "cot", "--threads", many, "--ray", "10.0.0.1:6379").model.threads == int(many)
    with pytest.raises(PlanError, match=f"^model.threads {many}: this process may use"):
        cli_plan("--data", HOTPOT, "--method", "cot", "--threads", many)


@pytest.mark.parametrize("kw,field,said", [
    ({"runs": []}, None, "eval: the plan has no runs"),
    ({"index": "idx", "filler": [HOTPOT]}, None, "eval: filler adds passages to the pooled index"),
    ({"shard": "4/4"}, "shard", "eval: shard '4/4': need 0 <= I < N"),
    ({"shard": "one/4"}, "shard", "eval: shard 'one/4': expected I/N, e.g. 0/4"),
    ({"model": lambda: ModelSpec("  ")}, "model", "model: empty; name a model, or leave it out for the default"),
])
def test_a_rule_between_a_plan_s_fields_refuses_it_as_it_is_made(kw, field, said):
    """The rules that need neither the machine nor the files are the schema's: the plan (or its model) is refused as
    it is made, at every door alike, not in a check run later; a refused value names its field."""
    from seakr.eval.specs import SettingError

    with pytest.raises(PlanError) as e:
        EvalPlan(data=HOTPOT, out="o", **{k: v() if callable(v) else v for k, v in kw.items()})
    assert str(e.value).startswith(said) and (e.value.name if isinstance(e.value, SettingError) else None) == field


def test_a_shard_is_recorded_in_one_spelling():
    assert EvalPlan(data=HOTPOT, out="o", shard=" 1 / 4 ").shard == "1/4"
    assert EvalPlan(data=HOTPOT, out="o").for_shard(2, 4).shard == "2/4"


def test_the_plan_refuses_a_run_folder_of_another_kinds_rows_at_every_door(tmp_path):
    """Each run's folder holds its own kind of rows: the check is the plan's, so Python and a grid's runs reach it
    before the model loads, as the command line and the studies do; a study's plan names its own kind."""
    (tmp_path / "o" / "b").mkdir(parents=True)
    (tmp_path / "o" / "b" / "detect_rows.jsonl").write_text('{"id": "q"}\n')
    plan = EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=[RunSpec("cot", name="a"), RunSpec("cot", name="b")])
    with pytest.raises(PlanError, match=r"o/b: holds the rows of a detect study \(detect_rows.jsonl\); an eval run"):
        plan.check()
    study = EvalPlan(data=HOTPOT, out=str(tmp_path / "o" / "b"), runs=["seakr"], rows="detect_rows.jsonl")
    assert study.check() is study
    with pytest.raises(PlanError, match="^eval: rows: one of results.jsonl, detect_rows.jsonl"):
        EvalPlan(data=HOTPOT, out=str(tmp_path / "x"), rows="answers.jsonl")

"""Faults on disk: torn and duplicated result lines, resuming onto other data, damaged index files,
builds killed with SIGKILL and the orphans they leave. Numbers refer to the items of the reliability probe."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from helpers import HOTPOT, SEAKR_CLI, fixture_path, run_cli as seakr
from seakr.eval.resume import data_identity
from seakr.eval.rowlog import RowLog, read_results
from seakr.search.base import Passage, SearchError
from seakr.search.tantivy_engine import TantivyEngine, remove_orphans

CFG = {"method": {"config": {"k": 20}, "model": {"model": "m"}}}


def test_07_a_torn_line_in_the_middle_keeps_every_later_row(tmp_path, capsys):
    rows = tmp_path / "results.jsonl"
    good = [json.dumps({"id": str(i), "f1": 1.0}) for i in range(6)]
    rows.write_text("\n".join(good[:3] + ['{"id": "3", "tr'] + good[4:]) + "\n")
    (tmp_path / "config.json").write_text(json.dumps(CFG))
    with RowLog(tmp_path, "results.jsonl", CFG, resume=True) as log:
        assert [r["id"] for r in log.rows] == ["0", "1", "2", "4", "5"]  # only the torn one runs again
    assert "results.jsonl:4: unreadable line skipped (a torn or foreign write); question '3' will run again" \
        in capsys.readouterr().err
    assert [r["id"] for r in read_results(rows)] == ["0", "1", "2", "4", "5"]  # rewritten clean


def test_07_duplicated_lines_count_once(tmp_path):
    rows = tmp_path / "results.jsonl"
    rows.write_text("\n".join(json.dumps({"id": i}) for i in ("a", "b", "a")) + "\n")
    (tmp_path / "config.json").write_text(json.dumps(CFG))
    with RowLog(tmp_path, "results.jsonl", CFG, resume=True) as log:
        from types import SimpleNamespace as Ex

        assert [e.id for e in log.todo([Ex(id="a"), Ex(id="b"), Ex(id="c")])] == ["c"]
        assert [r["id"] for r in log.rows_for([Ex(id="a"), Ex(id="b")])] == ["a", "b"]  # n is not inflated


def test_04_resume_refuses_other_data(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(open(HOTPOT).read().replace("fx-01", "fx-XX"))
    with RowLog(tmp_path / "run", "results.jsonl", {**CFG, **data_identity(HOTPOT)}) as log:
        log.append({"id": "fx-01"})
    with pytest.raises(ValueError, match="--resume with different data"):
        RowLog(tmp_path / "run", "results.jsonl", {**CFG, **data_identity(str(other))}, resume=True)
    moved = tmp_path / "moved" / os.path.basename(HOTPOT)  # the same file elsewhere (a new machine) is fine
    moved.parent.mkdir()
    moved.write_bytes(open(HOTPOT, "rb").read())
    RowLog(tmp_path / "run", "results.jsonl", {**CFG, **data_identity(str(moved))}, resume=True).close()


@pytest.fixture
def small(tmp_path):
    from seakr.search.corpora import read_corpus

    return TantivyEngine.build(read_corpus(fixture_path("filler.flashrag.jsonl")), tmp_path / "idx")


def damage(path, offset_frac=0.5, n=64):
    """Flip n bytes in place. Never truncate-and-rewrite: the open engine has the file mapped, and a
    mapped page past a (momentarily) shorter file is SIGBUS for whichever thread touches it."""
    with open(path, "r+b") as f:
        data = f.read()
        at = int(len(data) * offset_frac)
        f.seek(at)
        f.write(bytes((b ^ 0xFF) for b in data[at: at + n]))


@pytest.mark.parametrize("suffix", [".store", ".term", ".idx"])
def test_08_verify_checks_every_segment_file(small, suffix):
    assert small.verify()
    f = next(p for p in small.files.iterdir() if p.name.endswith(suffix))
    damage(f)
    with pytest.raises(SearchError, match=f"differ from the build: .*{suffix}"):
        TantivyEngine.check_files(small.path)  # the index may be too damaged to open: files first
    r = seakr("index", "info", str(small.path), "--verify")
    assert r.returncode == 2 and "differ from the build" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_08_a_panicking_search_is_a_one_line_search_error(small, capfd):
    f = next(p for p in small.files.iterdir() if p.name.endswith(".store"))
    damage(f, 0.0, n=f.stat().st_size)  # every stored byte
    r = seakr("search", str(small.path), "film director")  # refused when opened: its files differ
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "differ from the build" in r.stderr

def test_10_a_search_panic_shows_one_line_not_rusts_panic_text(tmp_path, capfd):
    """Which flipped bytes make tantivy panic (rather than refuse to open, or rank garbage) depends on the
    segment layout: with several writer threads the passages split by timing, so a fixed offset panicked on
    one build and not the next. One writer gives one segment, the same each build; every 8-byte window of
    its postings file is flipped in turn, and every window that panics must come out as the one line."""
    from seakr.search.corpora import read_corpus

    eng = TantivyEngine.build(read_corpus(fixture_path("filler.flashrag.jsonl")), tmp_path / "built", threads=1)
    built = eng.path
    idx = next(p.relative_to(built) for p in eng.files.iterdir() if p.name.endswith(".idx"))
    panics = 0
    for at in range(0, (built / idx).stat().st_size, 8):
        copy = tmp_path / f"at{at}"
        shutil.copytree(built, copy)
        with open(copy / idx, "r+b") as f:  # in place: never truncate a file an engine may have mapped
            f.seek(at)
            head = f.read(8)
            f.seek(at)
            f.write(bytes(b ^ 0xFF for b in head))
        capfd.readouterr()
        try:
            TantivyEngine(copy, check=False).search("film director")
        except SearchError as e:  # refused on open, or failed in the search: one line either way
            assert len(str(e).splitlines()) == 1
            if type(e.__context__).__name__ == "PanicException":  # on open (near the footer) or in the search
                assert "failed, the index looks damaged" in str(e)
                panics += "search failed" in str(e)
        assert "panicked" not in capfd.readouterr().err  # Rust's own panic text is held back: the one line is all
        shutil.rmtree(copy, ignore_errors=True)  # tantivy may still be writing its reader's lock file there
    assert panics > 0  # the search's guard was exercised (5 windows of this fixture with tantivy 0.27)


@pytest.mark.parametrize("suffix", [".fieldnorm", ".pos", ".store"])
def test_04_a_damaged_index_is_refused_when_opened_not_searched_with_another_ranking(small, suffix):
    f = next(p for p in small.files.iterdir() if p.name.endswith(suffix))
    damage(f, 0.3, n=8)
    with pytest.raises(SearchError, match=f"differ from the build: .*{suffix}"):
        TantivyEngine(small.path)
    r = seakr("search", str(small.path), "film director")
    assert r.returncode == 2 and "differ from the build" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_16_orphans_of_killed_builds_are_removed(tmp_path):
    out = tmp_path / "idx"
    dead = tmp_path / ".idx.building-999999"  # no such process
    dead.mkdir()
    mine = tmp_path / f".idx.building-{os.getpid()}"  # a live build (this process): left alone
    mine.mkdir()
    assert remove_orphans(out) == [dead] and mine.exists()


def test_16_kill_9_during_a_build_leaves_the_old_index_and_the_next_build_cleans_up(tmp_path):
    big = tmp_path / "big.jsonl"
    with open(big, "w") as f:
        for i in range(400_000):
            f.write(json.dumps({"id": f"d{i}", "title": f"T{i}", "text": f"passage {i} about topic {i % 97} and more words"}) + "\n")
    out = tmp_path / "idx"
    TantivyEngine.build([Passage("a", "A", "the old index")], out)
    p = subprocess.Popen([*SEAKR_CLI, "index", "build", str(big), "--format", "jsonl", "--out",
                          str(out), "--overwrite"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "gen-000002").exists():  # the new generation, being written
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert (out / "gen-000002").exists(), "the build finished before it could be killed"
    assert TantivyEngine(out).count() == 1  # the old index is intact: its manifest still points at it
    new = TantivyEngine.build([Passage("b", "B", "the new index")], out, overwrite=True)
    assert new.search("new")[0].id == "b" and [p.name for p in out.glob("gen-*")] == [new.files.name]
    assert not list(tmp_path.glob(".idx.*-*"))


def _engine_cfg(path, checksum="c0ffee", k=20, shard=None):
    return {"method": {"config": {"k": k}, "model": {"model": "m"},
                       "engine": {"engine": "tantivy", "path": path, "doc_count": 3, "checksum": checksum},
                       "delta_source": f"{path}/calibration/m-L1-mlp.json"},
            **({"shard": shard} if shard else {})}


def test_05_resume_knows_an_index_by_its_checksum_and_names_what_differs(tmp_path):
    run = tmp_path / "run"
    with RowLog(run, "results.jsonl", _engine_cfg("/home/a/idx")) as log:
        log.append({"id": "q1"})
    # the same index copied elsewhere (and another SEAKR_CACHE): the same run
    RowLog(run, "results.jsonl", _engine_cfg("/mnt/b/idx_moved"), resume=True).close()
    with pytest.raises(ValueError, match=r'method\.engine\.checksum: ".*" recorded, "other" now'):
        RowLog(run, "results.jsonl", _engine_cfg("/home/a/idx", checksum="other"), resume=True)
    with pytest.raises(ValueError, match=r"method\.config\.k: \d+ recorded, 5 now\)"):
        RowLog(run, "results.jsonl", _engine_cfg("/home/a/idx", k=5), resume=True)
    # every field that differs is named (a changed model was reported as its prompt style alone)
    with pytest.raises(ValueError, match=r"config\.k: \d+ recorded, 5 now; method\.engine\.checksum: .* recorded, \"x\" now\)"):
        RowLog(run, "results.jsonl", _engine_cfg("/home/a/idx", k=5, checksum="x"), resume=True)


def test_06_resume_refuses_another_shard_and_a_folder_without_its_config(tmp_path):
    run = tmp_path / "run"
    with RowLog(run, "results.jsonl", _engine_cfg("/i", shard="0/2")) as log:
        log.append({"id": "q1"})
    with pytest.raises(ValueError, match="shard 1/2 but the run recorded shard 0/2"):
        RowLog(run, "results.jsonl", _engine_cfg("/i", shard="1/2"), resume=True)
    (run / "config.json").unlink()
    with pytest.raises(ValueError, match="no config.json"):
        RowLog(run, "results.jsonl", _engine_cfg("/i", shard="0/2"), resume=True)


def test_06_a_torn_full_row_runs_again_even_when_its_score_row_survived(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(CFG))
    (run / "results.jsonl").write_text('{"id": "a", "f1": 1}\n{"id": "b", "tr\n{"id": "c", "f1": 0}\n')
    (run / "scores.jsonl").write_text("".join(json.dumps({"id": i, "f1": 1}) + "\n" for i in "abc"))
    with RowLog(run, "results.jsonl", CFG, resume=True, companion=("scores.jsonl", lambda r: r)) as log:
        assert sorted(r["id"] for r in log.rows) == ["a", "c"]  # b runs again, as the warning says
    assert "question 'b' will run again" in capsys.readouterr().err


def test_a_row_cut_off_between_the_two_files_reaches_the_committed_file_on_resume(tmp_path):
    """A run stopped between a row's two writes (disk full, kill -9) left the row in results.jsonl only; resumed,
    it counted as done and never reached scores.jsonl, so the committed file lacked it (11 of 12 rows after a
    disk-full run) and a resume from that file on another machine ran it again."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(CFG))
    (run / "results.jsonl").write_text("".join(json.dumps({"id": i, "f1": 1, "question": "q"}) + "\n" for i in "abc"))
    (run / "scores.jsonl").write_text(json.dumps({"id": "a", "f1": 1}) + "\n")
    slim = ("scores.jsonl", lambda r: {k: v for k, v in r.items() if k != "question"})
    with RowLog(run, "results.jsonl", CFG, resume=True, companion=slim) as log:
        assert [r["id"] for r in log.rows] == ["a", "b", "c"]
        log.append({"id": "d", "f1": 0, "question": "q"})
    assert [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()] == [
        {"id": i, "f1": f} for i, f in (("a", 1), ("b", 1), ("c", 1), ("d", 0))]
    RowLog(run, "results.jsonl", CFG, resume=True, companion=slim).close()  # nothing is added twice
    assert len((run / "scores.jsonl").read_text().splitlines()) == 4


def test_06_merge_refuses_shards_cut_with_another_limit(tmp_path):
    from seakr.eval.merge import merge_runs

    for i, limit in ((0, 10), (1, 20)):
        d = tmp_path / f"s{i}"
        with RowLog(d, "results.jsonl", {**_engine_cfg("/i", shard=f"{i}/2"), "limit": limit}) as log:
            log.append({"id": f"q{i}", "f1": 1.0, "em": 1.0})
    with pytest.raises(ValueError, match="limit 20 but"):
        merge_runs(tmp_path / "m", [str(tmp_path / "s0"), str(tmp_path / "s1")])


def test_a_merge_into_a_folder_another_is_writing_is_refused(tmp_path):
    """Two `seakr merge --out M` at once (two shard sets, or a retried job) each found M empty at its start and
    wrote its rows over the other's, both printing a table. A merge now holds M as a run does."""
    from seakr.eval.folders import run_lock
    from seakr.eval.merge import merge_runs

    for i in range(2):
        with RowLog(tmp_path / f"s{i}", "results.jsonl", _engine_cfg("/i", shard=f"{i}/2")) as log:
            log.append({"id": f"q{i}", "f1": 1.0, "em": 1.0})
    shards = [str(tmp_path / "s0"), str(tmp_path / "s1")]
    (tmp_path / "m").mkdir()  # made by the other merge, which is writing its rows
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from seakr.eval.folders import run_lock\n"
                               "with run_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)",
                               str(tmp_path / "m")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(ValueError, match=r"m: another seakr run \(pid \d+\) is writing here"):
            merge_runs(tmp_path / "m", shards)
    finally:
        holder.kill()
        holder.wait()
    assert merge_runs(tmp_path / "m", shards)["n"] == 2  # the folder free again: the merge goes through
    with run_lock(tmp_path / "m"):
        pass


def test_a_run_recorded_before_an_option_existed_resumes_with_that_options_old_value(tmp_path):
    """Committed runs predate gate/check_estimator/gate_p/probes/check_temperature: resuming one with today's code at the
    values that reproduce it is the same run; with another value it is not, and the field is named."""
    from pathlib import Path

    recorded = json.loads((Path(__file__).parents[2] / "benchmarks/results/table-qwen-2wiki100/seakr-multihop-delta50/config.json").read_text())
    assert "gate" not in recorded["method"]["config"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(recorded))
    (run / "scores.jsonl").write_text(json.dumps({"id": "q1", "f1": 1.0}) + "\n")
    now = json.loads(json.dumps(recorded))
    now["method"]["config"].update(gate="step", check_estimator="eigen", gate_p=None, probes=None, check_temperature=None)
    RowLog(run, "results.jsonl", now, resume=True, companion=("scores.jsonl", lambda r: r)).close()
    now["method"]["config"]["gate"] = "probe"
    with pytest.raises(ValueError, match=r'method\.config\.gate: "step" recorded, "probe" now'):
        RowLog(run, "results.jsonl", now, resume=True, companion=("scores.jsonl", lambda r: r))


def test_a_config_with_an_infinite_threshold_is_strict_json_and_resumes_as_either_spelling(tmp_path):
    """delta=-inf ("retrieve at every step") was written as the bare token -Infinity, which jq and JSON.parse
    refuse; it is the text "-inf" that options read back. A run written either way resumes with the same delta,
    at the row log (after the model) and at the plan's early check (before it), and not with another one."""
    from seakr.eval.plan import EvalPlan
    from seakr.eval.specs import PlanError, RunSpec

    cfg = {"method": {"method": "seakr", "config": {"k": 20, "delta": -float("inf")},
                      "model": {"model": "qwen2.5-coder-0.5b"}}}  # the plan's default model
    with RowLog(tmp_path, "results.jsonl", cfg):
        pass
    text = (tmp_path / "config.json").read_text()
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in config.json"))["method"]["config"]["delta"] == "-inf"
    for recorded in (text, text.replace('"-inf"', "-Infinity")):  # as written now, and as runs were written before
        (tmp_path / "config.json").write_text(recorded)
        RowLog(tmp_path, "results.jsonl", cfg, resume=True).close()
        other = json.loads(json.dumps(cfg))
        other["method"]["config"]["delta"] = float("inf")
        with pytest.raises(ValueError, match=r'method\.config\.delta: "-inf" recorded, "inf" now'):
            RowLog(tmp_path, "results.jsonl", other, resume=True)
        plan = EvalPlan(data=HOTPOT, out=str(tmp_path), runs=[RunSpec("seakr", {"delta": "-inf"})], resume=True)
        plan.check_folders(plan.select())
        plan.runs = [RunSpec("seakr", {"delta": "inf"})]
        with pytest.raises(PlanError, match=r'method\.config\.delta: "-inf" recorded, "inf" now'):
            plan.check_folders(plan.select())


def test_a_run_never_spreads_its_files_into_another_programs_folder(tmp_path):
    """`seakr eval --out /` wrote config.json, results.jsonl and the summaries among /bin and /etc, and
    `detect --out ~` among a home's dot-folders. A folder holding anything but runs, notes and hidden files
    (.DS_Store) is refused by every door, before the model loads, even with a run among its folders; a folder
    of committed runs, with its notes and plots, still takes a new run or a resume."""
    from pathlib import Path

    from seakr.eval.plan import EvalPlan
    from seakr.eval.specs import RunSpec
    from seakr.eval.merge import merge_runs
    from seakr.eval.rowlog import RowLog

    project, home, results = tmp_path / "project", tmp_path / "home", tmp_path / "results"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('mine')")
    (project / "README.md").write_text("mine")
    (home / ".cache").mkdir(parents=True)
    shutil.copytree(Path(__file__).parents[2] / "benchmarks/results/speed-qwen-2wiki20-probe-reasoning/ircot",
                    results / "ircot")  # a committed run
    (results / "compare.md").write_text("| run |")
    (results / "roc.png").write_bytes(b"png")
    shutil.copytree(results / "ircot", project / "run")  # a run inside it does not make the project seakr's (it made `/`)
    for folder, shown in ((project, "(src)"), (home, "(.cache)")):
        before = sorted(p.name for p in folder.iterdir())
        for door in (lambda: RowLog(folder, "results.jsonl", CFG), lambda: merge_runs(folder, [str(results / "ircot")]),
                     lambda: EvalPlan(data=HOTPOT, out=str(folder), runs=["cot"]).check(),
                     lambda: EvalPlan(data=HOTPOT, out=str(folder), runs=[RunSpec("ircot"), RunSpec("cot")]).check()):
            with pytest.raises(ValueError, match=rf"{folder}: holds files that are not a seakr run's \({shown[1:-1]}\)"):
                door()
        r = seakr("detect", "--data", fixture_path("nq_mini.oracle.jsonl"), "--out", str(folder))
        assert r.returncode == 2 and "holds files that are not a seakr run's" in r.stderr and "config:" not in r.stderr
        assert sorted(p.name for p in folder.iterdir()) == before
    EvalPlan(data=HOTPOT, out=str(results), runs=[RunSpec("ircot"), RunSpec("cot")]).check()  # a grid's folder
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    (quiet / ".DS_Store").write_bytes(b"")
    (quiet / "grid.toml").write_text('[[run]]\nmethod = "cot"\n')  # a grid kept beside its runs
    RowLog(quiet, "results.jsonl", CFG).close()
    study = tmp_path / "study"  # a study stores its states before its rows: its own folder, not another's
    (study / "states").mkdir(parents=True)
    (study / "states" / "taps.json").write_text('["L1:mlp"]')
    RowLog(study, "detect_rows.jsonl", {"study": "detect"}).close()


def test_a_run_never_writes_into_a_model_or_an_index_folder(tmp_path):
    """``--out`` naming a model folder replaced the model's config.json with the run's (the model no longer
    loaded); naming an index folder left files its manifest does not list ("damaged: rebuild it"). Both are
    refused before anything is written, for runs, studies and merges; a seakr run's own folder still resumes."""
    from seakr.eval.folders import check_not_foreign, check_rows_home
    from seakr.eval.merge import merge_runs
    from seakr.eval.rowlog import RowLog
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    model = tmp_path / "model"
    model.mkdir()
    hf = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    (model / "config.json").write_text(hf)
    idx = tmp_path / "idx"
    TantivyEngine.build([Passage("a", "Alpha", "Alpha is a city.")], idx)
    for folder, needle in ((model, "config.json: not a seakr run's configuration"), (idx, "is a seakr index")):
        for check in (lambda: check_rows_home([folder], "results.jsonl"), lambda: check_rows_home([folder], "detect_rows.jsonl"),
                      lambda: RowLog(folder, "results.jsonl", CFG), lambda: merge_runs(folder, [str(tmp_path / "shard")])):
            (tmp_path / "shard").mkdir(exist_ok=True)
            (tmp_path / "shard" / "config.json").write_text(json.dumps(CFG))
            with pytest.raises(ValueError, match=f"{needle}|holds config.json already; merge into a new directory"):
                check()
    assert (model / "config.json").read_text() == hf and TantivyEngine(idx).count() == 1
    for inside in (idx / "runs", idx / "runs" / "x"):  # `index build --overwrite` would delete the run with the index
        with pytest.raises(ValueError, match=f"inside the seakr index {re.escape(str(idx))}, which `seakr index build "
                                             "--overwrite` replaces whole"):
            RowLog(inside, "results.jsonl", CFG)
        assert not inside.exists()
    (model / "config.json").write_text("{broken")  # unreadable: not seakr's either
    with pytest.raises(ValueError, match="not a seakr run's configuration"):
        check_not_foreign(model)
    run = tmp_path / "run"
    with RowLog(run, "results.jsonl", CFG) as log:
        log.append({"id": "1", "f1": 1.0})
    with RowLog(run, "results.jsonl", CFG, resume=True) as log:
        assert [r["id"] for r in log.rows] == ["1"]


_CUT_WRITER = """
import json, resource, signal, sys
from pathlib import Path
import numpy as np
from seakr.probes.probe import fit_probe
from seakr.eval.calibrate import _write_calibration

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
tmp = Path(sys.argv[1])
rng = np.random.default_rng(0)
X = rng.normal(size=(60, 200))
probe = fit_probe(X, X[:, 0] > 0, model="m", tap="L3:mlp", form="short")
result = {"chosen": {"delta": -3.0, "f1": 0.5, "retrieval_rate": 0.5}, "estimator": "ln_entropy", "n": 10}
info = {"model": "m", "state_layer": 3, "state_source": "mlp"}
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
for write in (lambda: probe.save(tmp / "probe.json"), lambda: _write_calibration(result, info, "plain", "simple")):
    try:
        write()
        print("written")
    except OSError as e:
        print(e.strerror)
"""


def test_a_write_cut_off_keeps_the_file_it_was_replacing(tmp_path):
    """A fitted probe saved over an earlier one, and the model's calibration file (read, extended, written
    back), were truncated in place: a write cut off by a full disk or a file-size limit left half a JSON file,
    the earlier fit or thresholds lost, and every later SeaKR run refused the file."""
    from seakr.methods.deltas import calibration_path

    cache = tmp_path / "cache"
    old_probe = '{"earlier": "fit"}'
    (tmp_path / "probe.json").write_text(old_probe)
    cal = calibration_path({"model": "m", "state_layer": 3, "state_source": "mlp"})
    cal = cache / cal.relative_to(cal.parents[1])
    cal.parent.mkdir(parents=True)
    old_cal = json.dumps({"delta": {"eigen": -4.0}, "source": {"eigen": {"n": 5, "at": "then"}}}, indent=2)
    cal.write_text(old_cal)
    r = subprocess.run([sys.executable, "-c", _CUT_WRITER, str(tmp_path), str(len(old_cal) + 20)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "SEAKR_CACHE": str(cache)})
    assert r.stdout.split("\n")[:2] == ["File too large"] * 2, r.stdout + r.stderr
    assert (tmp_path / "probe.json").read_text() == old_probe and cal.read_text() == old_cal
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "probe.json"]  # no half-written file left
    assert sorted(p.name for p in cal.parent.iterdir()) == [cal.name]
    r = subprocess.run([sys.executable, "-c", _CUT_WRITER, str(tmp_path), str(1 << 30)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "SEAKR_CACHE": str(cache)})
    assert r.stdout.split("\n")[:2] == ["written"] * 2, r.stdout + r.stderr
    assert set(json.loads(cal.read_text())["delta"]) == {"eigen", "ln_entropy"}
    assert json.loads((tmp_path / "probe.json").read_text())["tap"] == "L3:mlp"


def test_a_damaged_row_a_table_leaves_out_is_said(tmp_path, capsys):
    """`seakr compare` and `report` read a run whose scores.jsonl had an unreadable line in the middle (a number
    of 5,000 digits, a hand edit) and counted 19 questions of 20 without a word; a row the run's other file
    still holds is not left out, and then nothing is said."""
    from pathlib import Path

    from seakr.eval.compare import compare

    committed = Path(__file__).parents[2] / "benchmarks/results/speed-qwen-2wiki20-probe-reasoning/ircot"
    run = tmp_path / "ircot"
    shutil.copytree(committed, run)
    lines = (run / "scores.jsonl").read_text().splitlines()
    qid = json.loads(lines[2])["id"]
    (run / "scores.jsonl").write_text("\n".join(lines[:2] + [lines[2].replace('"seconds": ', '"seconds": 9e', 1)]
                                                + lines[3:]) + "\n")
    assert "| 19 |" in compare([str(run)])
    assert capsys.readouterr().err == (f"seakr: warning: {run / 'scores.jsonl'}:3: unreadable line skipped (a torn or "
                                       f"foreign write); the row of question {qid!r} is left out\n")
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")  # the full rows hold it
    assert "| 20 |" in compare([str(run)]) and capsys.readouterr().err == ""

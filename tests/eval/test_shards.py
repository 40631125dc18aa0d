"""Sharded evaluation: 2 shards + merge give exactly the rows of one unsharded run (real SmolLM2,
fixture questions); merge refuses overlapping shards and shards of another run."""

import json
import os
import re
import subprocess
import sys

import pytest

from helpers import COT_ARGS as ARGS, HOTPOT, SEAKR_CLI, run_cli as seakr


def rows(d):
    return [json.loads(x) for x in (d / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_two_shards_and_merge_equal_one_run(tmp_path, whole_cot_run):
    # the two shards side by side, as on two machines (one thread each: the two cores are not oversubscribed)
    shards = [subprocess.Popen([*SEAKR_CLI, *ARGS, "--shard", f"{i}/2", "--out",
                                str(tmp_path / f"s{i}")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for i in (0, 1)]
    for p in shards:
        err = p.communicate(timeout=600)[1]
        assert p.returncode == 0, err
    assert [x["id"] for x in rows(tmp_path / "s0")] == ["fx-01", "fx-03"]
    r = seakr("merge", str(tmp_path / "s1"), str(tmp_path / "s0"), "--out", str(tmp_path / "merged"))
    assert r.returncode == 0, r.stderr
    key = lambda x: (x["id"], x["order"], x["prediction"], x["em"], x["f1"])  # noqa: E731
    assert [key(x) for x in rows(tmp_path / "merged")] == [key(x) for x in rows(whole_cot_run)]
    s = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert s["n"] == 4 == json.loads((whole_cot_run / "summary.json").read_text())["n"]
    again = seakr("merge", str(tmp_path / "s0"), str(tmp_path / "s0"), "--out", str(tmp_path / "m2"))
    assert again.returncode == 2 and "overlapping shards" in again.stderr


def _fake_run(d, shard, k=20, ids=("a",)):
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"name": "x", "method": {"config": {"k": k}}, "shard": shard,
                                               "data": "/data/h.json", "data_sha256": "abc"}))
    (d / "results.jsonl").write_text("".join(json.dumps({"id": i, "em": 0, "f1": 0, "seconds": 1, "prediction": "",
                                                          "trace": {"totals": {"retrievals": 0, "model_calls": 1,
                                                                               "sampled_sequences": 1, "generated_tokens": 1}}})
                                             + "\n" for i in ids))


def test_merge_refuses_other_runs_and_reports_missing_shards(tmp_path, capsys, monkeypatch):
    from seakr.eval.specs import parse_shard
    from seakr.eval.merge import merge_runs

    _fake_run(tmp_path / "a", "0/3", ids=("q1",))
    _fake_run(tmp_path / "b", "1/3", k=10, ids=("q2",))
    with pytest.raises(ValueError, match=r"a different run than .*a \(method\.config\.k: \d+ there, 10 here\)"):
        merge_runs(tmp_path / "m", [str(tmp_path / "a"), str(tmp_path / "b")])
    _fake_run(tmp_path / "c", "1/2", ids=("q3",))
    with pytest.raises(ValueError, match="another split"):
        merge_runs(tmp_path / "m", [str(tmp_path / "a"), str(tmp_path / "c")])
    _fake_run(tmp_path / "whole", None, ids=("q5",))  # was "shard None is of another split than 0/3"
    with pytest.raises(ValueError, match=r"whole: a whole run \(no --shard\) is of another split than 0/3$"):
        merge_runs(tmp_path / "m", [str(tmp_path / "a"), str(tmp_path / "whole")])
    _fake_run(tmp_path / "d", "2/3", ids=("q4",))
    s = merge_runs(tmp_path / "m", [str(tmp_path / "a"), str(tmp_path / "d")])
    assert s["n"] == 2 and "shards 1/3 missing" in capsys.readouterr().err
    (tmp_path / "study").mkdir()  # a study is not a shard: it "merged" into an empty run labelled a study
    (tmp_path / "study" / "config.json").write_text(json.dumps({"study": "detect"}))
    with pytest.raises(ValueError, match="study: a detect study, not a shard of an eval run"):
        merge_runs(tmp_path / "m2", [str(tmp_path / "study")])
    assert not (tmp_path / "m2").exists()
    # a folder with a run's or study's rows is never merged into: score rows alone (a run resumed on another
    # machine) and a study's folder were overwritten, since only results.jsonl was looked for
    for name in ("scores.jsonl", "detect_rows.jsonl", "config.json"):
        (tmp_path / name).mkdir()
        (tmp_path / name / name).write_text("{}\n")
        with pytest.raises(ValueError, match=f"holds {name} already; merge into a new directory"):
            merge_runs(tmp_path / name, [str(tmp_path / "a"), str(tmp_path / "d")])
        assert (tmp_path / name / name).read_text() == "{}\n"
    # the output folder is held to the run's rules whichever door merges (a file, a link to nothing)
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    for out, why in (("file", "exists and is not a directory"), ("dangling", "a symbolic link to nothing")):
        with pytest.raises(ValueError, match=why):
            merge_runs(tmp_path / out, [str(tmp_path / "a"), str(tmp_path / "d")])
    assert not (tmp_path / "nowhere").exists()
    # an index is refused as one before anything is tried in it (the writable-folder check makes a folder there)
    from seakr.eval import specs
    from seakr.search.tantivy_engine import TantivyEngine
    from seakr.search import Passage

    TantivyEngine.build([Passage("1", "T", "some text")], tmp_path / "idx")
    tried = []
    monkeypatch.setattr(specs, "place_refused", lambda where, *a, **k: tried.append(where))
    with pytest.raises(ValueError, match="is a seakr index, which a run's files would damage"):
        merge_runs(tmp_path / "idx", [str(tmp_path / "a"), str(tmp_path / "d")])
    assert tried == []
    for bad in ("3/3", "x", "1/0", "-1/2", "0/+2", "+0/2", "\u0660/\u0662", "0/2.0"):
        with pytest.raises(ValueError, match=f"^{re.escape(repr(bad))}: "):  # the plan's field names it
            parse_shard(bad)


def test_a_shard_is_recorded_as_i_over_n(tmp_path):
    """``--shard 00/02`` (a zero-padded array index) was recorded as given, and merge compared the split as
    text: its sibling 1/2 was "of another split than 00/02"; a --resume as 0/2 was "another shard"."""
    from seakr.eval.plan import EvalPlan
    from seakr.eval.merge import merge_runs
    from seakr.eval.resume import check_same_questions

    for given in ("00/02", " 0/2", "0 / 2"):
        assert EvalPlan(data=HOTPOT, out=str(tmp_path / "p"), runs=["cot"], shard=given).check().shard == "0/2"
    _fake_run(tmp_path / "a", "00/02", ids=("q1",))  # as runs before this recorded it
    _fake_run(tmp_path / "b", "1/2", ids=("q2",))
    assert merge_runs(tmp_path / "m", [str(tmp_path / "a"), str(tmp_path / "b")])["n"] == 2
    check_same_questions({"shard": "00/02"}, {"shard": "0/2"}, "r")
    with pytest.raises(ValueError, match="--resume with shard 1/2 but the run recorded shard 0/2"):
        check_same_questions({"shard": "0/2"}, {"shard": "1/2"}, "r")
    with pytest.raises(ValueError, match=r"--resume with no shard \(the whole run\) but the run recorded shard 0/2"):
        check_same_questions({"shard": "0/2"}, {"shard": None}, "r")  # it read "with shard None"


@pytest.mark.skipif(sys.platform == "win32", reason="flock: POSIX only")
def test_processes_started_together_build_a_pooled_index_once(tmp_path, monkeypatch):
    """Shards started together each built the same pooled index and swapped it under the others' open
    readers; the second now waits on the first's lock and reads what it built."""
    from seakr.search.build import build_once

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "cache" / "indexes" / "pooled"
    first = subprocess.Popen([sys.executable, "-c", "import time; from pathlib import Path; "
                              "from seakr.common.cache import cache_lock\n"
                              "with cache_lock('index-pooled'):\n"
                              "    print('building', flush=True); time.sleep(1.5)\n"
                              f"    Path({str(out)!r}).mkdir(parents=True); (Path({str(out)!r}) / 'seakr-index.json').write_text('{{}}')"],
                             env={**os.environ, "SEAKR_CACHE": str(tmp_path / "cache")}, stdout=subprocess.PIPE, text=True)
    assert first.stdout.readline().strip() == "building"
    built = []
    build_once(out, lambda: built.append(1))  # waits for the first process, then finds its index
    assert first.wait(30) == 0 and built == []
    build_once(tmp_path / "cache" / "indexes" / "other", lambda: built.append(2))
    assert built == [2]


@pytest.mark.parametrize("kw, needle", [({"n_shards": 13}, "--shards 13, but the plan selects 12 questions"),
                                        ({"n_shards": 0}, "--shards 0: expected a whole number >= 1"),
                                        ({"n_shards": 2, "num_cpus": float("nan")}, "--cpus-per-shard nan"),
                                        ({"n_shards": 2, "num_gpus": -1}, "--gpus-per-shard -1")])
def test_ray_shards_are_checked_before_ray_starts(tmp_path, kw, needle):
    """Every shard's worker loads the model: 1,000 shards of 12 questions started 1,000 workers on 2 CPUs."""
    from seakr.eval.cluster import run_shards
    from seakr.eval.plan import EvalPlan
    from seakr.eval.specs import PlanError

    plan = EvalPlan(data=HOTPOT, out=str(tmp_path / "out"), runs=["cot"], model="smollm2-135m")
    with pytest.raises(PlanError, match=re.escape(needle)):
        run_shards(plan, **kw)


def test_shards_are_given_the_cache_this_process_names(tmp_path, monkeypatch):
    """A relative SEAKR_CACHE reached Ray's workers as written: a worker starting in another folder named another
    cache there, and converted the model (and pooled the index) again."""
    from seakr.eval.cluster import worker_env

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEAKR_CACHE", "rel/cache")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert worker_env()["SEAKR_CACHE"] == str(tmp_path / "rel" / "cache")
    assert worker_env()["HF_HUB_OFFLINE"] == "1"
    monkeypatch.setenv("SEAKR_CACHE", "")  # set empty: unset, as shells write it; passed as it is
    assert worker_env()["SEAKR_CACHE"] == ""

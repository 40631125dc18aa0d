"""An index held as generations: a writer killed at any point leaves an index that opens and answers as before or as
after; files that are not the index's are never deleted or read; a read-only index opens; ``index info --repair``
clears what a killed writer left and rebuilds a damaged cached corpus index."""

import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

from helpers import SEAKR_CLI, run_cli, stalled_adder
from seakr.search import Passage, SearchError
from seakr.common.runs import MANIFEST
from seakr.search.generations import MARK
from seakr.search.tantivy_engine import TantivyEngine

BASE_N, ADDED_N = 50_000, 20_000


def passages(n: int, word: str, start: int = 0):
    for i in range(start, start + n):
        yield Passage(f"{word}{i}", f"{word.title()} {i}", f"{word} passage {i} about topic {i % 97} and more words")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A 50,000-passage index (v2 layout) and a corpus of 20,000 more, of words the base does not hold."""
    root = tmp_path_factory.mktemp("gens")
    TantivyEngine.build(passages(BASE_N, "old"), root / "base")
    with open(root / "add.jsonl", "w") as f:
        for p in passages(ADDED_N, "zzadded"):
            f.write(json.dumps(p.to_dict()) + "\n")
    return root


def state_of(path, after_n: int) -> str:
    """"before" or "after" (the index opens, its files check, and it answers as one of the two), else the error."""
    try:
        TantivyEngine.check_files(path)
        eng = TantivyEngine(path)
        n, hits = eng.count(), eng.search("zzadded", 3)
    except SearchError as e:
        return f"unusable: {e}"
    if n == BASE_N and not hits and eng.search("old passage 17", 1)[0].id.startswith("old"):
        return "before"
    if n == after_n and hits[0].id.startswith("zzadded"):
        return "after"
    return f"neither: {n} passages"


def killed_at(base, name: str, args: list[str], delay: float) -> str:
    after_n = BASE_N + ADDED_N if "--add" in args else ADDED_N
    copy = base / name
    shutil.copytree(base / "base", copy)
    p = subprocess.Popen([*SEAKR_CLI, "index", "build", str(base / "add.jsonl"), "--format", "jsonl", "--out",
                          str(copy), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        p.wait(timeout=delay)  # a run that ends first is "after"
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
    return state_of(copy, after_n)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["add", "overwrite"])
def test_a_writer_killed_at_any_point_leaves_the_index_as_before_or_as_after(base, how):
    args = ["--add"] if how == "add" else ["--overwrite"]
    t = time.perf_counter()
    whole = killed_at(base, f"{how}-whole", args, 60)  # not killed: how long a whole run takes
    took = time.perf_counter() - t
    assert whole == "after"
    # kill points spread over the whole run: the start, the reading, the writing, the switch, the clean-up; and past
    # its end by half its time, since one run on a shared machine may take longer than the one timed
    seen = [killed_at(base, f"{how}-{i}", args, took * (i + 0.5) / 20 * 1.5) for i in range(20)]
    assert all(s in ("before", "after") for s in seen), seen
    assert "before" in seen and "after" in seen  # the points did span the run
    # the next writer clears what the killed ones left: one generation, the current one
    copy = base / f"{how}-0"
    eng = TantivyEngine(copy)
    eng.add([Passage("last", "Last", "the last passage")])
    assert [p.name for p in copy.glob("gen-*")] == [eng.files.name]


def test_files_that_are_not_the_indexs_are_ignored_when_opened_and_kept_by_overwrite(tmp_path):
    idx = tmp_path / "idx"
    eng = TantivyEngine.build(passages(50, "old"), idx)
    user = {"notes.txt": "mine", ".DS_Store": "finder", "mynotes.lock": "mine too", "seakr-index.json.tmp": "a draft",
            "meta.json": "{}", "gen-000099/keep.txt": "a folder that looks like ours"}
    for name, text in user.items():
        (idx / name).parent.mkdir(exist_ok=True)
        (idx / name).write_text(text)
    (eng.files / "extra.txt").write_text("beside the segments")
    assert TantivyEngine(idx).search("old passage 7", 1)[0].id == "old7"  # an extra file does not stop an open
    assert run_cli("index", "info", str(idx), "--verify").returncode == 0
    TantivyEngine.build(passages(30, "new"), idx, overwrite=True)
    r = run_cli("index", "build", "-", "--format", "jsonl", "--out", str(idx), "--overwrite",
                input="".join(json.dumps(p.to_dict()) + "\n" for p in passages(10, "third")))
    assert r.returncode == 0, r.stderr
    assert {n: (idx / n).read_text() for n in user} == user
    assert (eng.files / "extra.txt").read_text() == "beside the segments"  # its generation stays, not ours now
    assert TantivyEngine(idx).count() == 10


def test_an_index_of_the_first_layout_opens_and_moves_to_generations_on_its_first_change(tmp_path):
    idx = tmp_path / "idx"
    eng = TantivyEngine.build(passages(40, "old"), idx)
    flat = {p.name for p in eng.files.iterdir() if p.name != MARK}
    for name in flat:  # the first layout: the generation's files at the top of the folder, format /1
        shutil.move(eng.files / name, idx / name)
    shutil.rmtree(eng.files)
    m = json.loads((idx / MANIFEST).read_text())
    for key in ("uid", "generation"):
        m.pop(key)
    (idx / MANIFEST).write_text(json.dumps(m | {"format": "seakr-tantivy/1"}))
    (idx / "notes.txt").write_text("mine")
    assert TantivyEngine(idx).count() == 40
    eng = TantivyEngine(idx)
    eng.add(passages(5, "new"))
    assert TantivyEngine(idx).count() == 45 and eng.files.name == "gen-000001"
    assert sorted(p.name for p in idx.iterdir() if not p.name.endswith(".lock")) == ["gen-000001", "notes.txt",
                                                                                    MANIFEST]


@pytest.mark.skipif(not shutil.which("unshare") or sys.platform != "linux", reason="needs Linux mount namespaces")
def test_a_read_only_index_opens_and_searches(tmp_path):
    idx = tmp_path / "idx"
    TantivyEngine.build(passages(50, "old"), idx)
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no mount namespace here: " + probe.stderr.decode()[:200])
    code = (f"from seakr.search.tantivy_engine import TantivyEngine; e = TantivyEngine({str(idx)!r}); "
            "print(e.search('old passage 7', 1)[0].id)")
    r = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro {idx} {idx} && touch {idx}/x 2>/dev/null; "
                        f"test ! -e {idx}/x && {sys.executable} -c \"{code}\""], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "old7", r.stderr


def test_repair_clears_a_killed_writers_generation(tmp_path):
    idx = tmp_path / "idx"
    TantivyEngine.build(passages(50, "old"), idx)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = idx / "gen-000002"
    stale.mkdir()
    uid = json.loads((idx / MANIFEST).read_text())["uid"]
    (stale / MARK).write_text(json.dumps({"index": uid, "pid": int(dead.stdout)}))
    (stale / "half.store").write_bytes(b"\0" * 100)
    r = run_cli("index", "info", str(idx), "--repair")
    assert r.returncode == 0 and json.loads(r.stdout)["removed"] == ["gen-000002"] and not stale.exists()


def damage(f):
    with open(f, "r+b") as h:  # in place, never truncated: this process has the file mapped (SIGBUS)
        h.write(b"\0" * f.stat().st_size)


def test_repair_rebuilds_a_damaged_cached_corpus_index_and_says_how_for_another(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in passages(30, "old")))
    from seakr.search import open_engine

    cached = open_engine(str(corpus)).path
    store = next(p for p in TantivyEngine(cached).files.iterdir() if p.name.endswith(".store"))
    damage(store)
    r = run_cli("search", str(corpus), "old passage 3", env={"SEAKR_CACHE": str(tmp_path / "cache")})
    assert r.returncode != 0 and "--repair" in r.stderr
    r = run_cli("index", "info", str(cached), "--repair", env={"SEAKR_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 0 and json.loads(r.stdout)["rebuilt"], r.stderr
    assert open_engine(str(corpus)).search("old passage 3", 1)[0].id == "old3"
    own = tmp_path / "own"
    eng = TantivyEngine.build(passages(20, "old"), own, sources=[str(corpus)])
    store = next(p for p in eng.files.iterdir() if p.name.endswith(".store"))
    damage(store)
    r = run_cli("index", "info", str(own), "--repair")
    assert r.returncode != 0 and "--overwrite" in r.stderr and str(corpus) in r.stderr


def test_a_file_or_device_as_the_index_folder_is_named_as_such_not_advised_to_overwrite():
    r = run_cli("index", "build", "-", "--format", "jsonl", "--out", "/dev/full",
                input=json.dumps({"id": "a", "text": "x"}) + "\n")
    assert r.returncode == 2 and "exists and is not a directory" in r.stderr and "--overwrite" not in r.stderr


def test_an_overwrite_during_an_add_is_told_another_process_is_writing(tmp_path):
    idx = tmp_path / "idx"
    TantivyEngine.build(passages(10, "old"), idx)
    adder = stalled_adder(idx)
    try:
        assert adder.stdout.readline().strip() == "adding"
        with pytest.raises(SearchError, match=rf"another process \(pid {adder.pid}\) is writing to this index"):
            TantivyEngine.build(passages(5, "new"), idx, overwrite=True)
    finally:
        adder.kill()
        adder.wait()
    assert TantivyEngine(idx).count() == 10


def test_a_clients_long_passages_log_no_advice_meant_for_python(capfd):
    from seakr.search import passages_engine

    long = ["word " * 1200]  # past LONG_PASSAGE words
    passages_engine(long, advise=False)
    assert "passages_engine(" not in capfd.readouterr().err
    passages_engine(long)
    assert "passages_engine(docs, passage_words=100)" in capfd.readouterr().err

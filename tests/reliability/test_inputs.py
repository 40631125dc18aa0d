"""Bad input at the command line: one line naming the problem, exit 2, before any slow work.

Numbers refer to the items of the reliability probe. Most of these fail before the model loads; the few
that need the model use the packaged SmolLM2."""

import gzip
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import HOTPOT, SEAKR_CLI, fixture_path, free_port, run_cli

CONFIG_LINE = "config: "  # printed once the model has loaded: its absence proves the check came first


def seakr(*args, **kw):
    return run_cli(*args, text=False, **kw)  # bytes: a check may print what is not UTF-8


def one_line_error(r, *needles):
    err = r.stderr.decode(errors="replace").strip()
    assert r.returncode == 2, (r.returncode, err[-2000:])
    assert len(err.splitlines()) == 1, err[-2000:]
    assert "Traceback" not in err and CONFIG_LINE not in err
    for n in needles:
        assert n in err, err
    return err


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    out = tmp_path_factory.mktemp("rel") / "idx"
    r = seakr("index", "build", HOTPOT, "--out", str(out))
    assert r.returncode == 0, r.stderr
    return str(out)


def test_01_overwrite_never_deletes_what_is_not_an_index(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "1", "title": "T", "text": "some text"}) + "\n")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("x")
    one_line_error(seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(precious), "--overwrite"),
                   "not a seakr index")
    assert (precious / "thesis.txt").read_text() == "x"
    one_line_error(seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(corpus), "--overwrite"),
                   "corpus file")
    assert corpus.read_text().startswith("{")
    ok = seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(tmp_path / "i"))
    again = seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(tmp_path / "i"), "--overwrite")
    assert ok.returncode == 0 and again.returncode == 0, again.stderr  # a seakr index is replaced
    # a folder that merely holds a file named like a manifest, with the user's files beside it
    fake = tmp_path / "proj"
    (fake / "sub").mkdir(parents=True)
    (fake / "seakr-index.json").write_text("{}")
    (fake / "thesis.txt").write_text("x")
    (fake / "sub" / "data.txt").write_text("y")
    one_line_error(seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(fake), "--overwrite"),
                   "not a valid seakr-tantivy/2 manifest")
    assert (fake / "thesis.txt").exists() and (fake / "sub" / "data.txt").exists()
    # a real index with a user's file put inside it: a new generation is built beside it, the file kept
    (tmp_path / "i" / "notes.txt").write_text("mine")
    again = seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(tmp_path / "i"), "--overwrite")
    assert again.returncode == 0 and (tmp_path / "i" / "notes.txt").read_text() == "mine", again.stderr
    # --out . inside the index replaces it (no traceback); --add with --overwrite is refused
    here = seakr("index", "build", str(corpus), "--format", "jsonl", "--out", ".", "--overwrite", cwd=tmp_path / "i")
    assert here.returncode == 0 and b"Traceback" not in here.stderr, here.stderr
    one_line_error(seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(tmp_path / "i"), "--add",
                         "--overwrite"), "choose one")
    # a link to the index (an index kept on another disk): the new generation is built where the link points
    (tmp_path / "link").symlink_to(tmp_path / "i")
    linked = seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(tmp_path / "link"), "--overwrite")
    assert linked.returncode == 0, linked.stderr
    assert (tmp_path / "link").is_symlink() and (tmp_path / "i" / "seakr-index.json").is_file()


@pytest.mark.parametrize("args", [["--limit", "0"], ["--limit", "-1"], ["--threads", "0"]])
def test_05_14_counts_must_be_positive(tmp_path, args):
    r = seakr("eval", "--data", HOTPOT, "--out", str(tmp_path / "o"), *args)
    assert r.returncode == 2 and b"expected a whole number in [1, inf)" in r.stderr


@pytest.mark.slow
def test_06_question_beyond_the_context_is_refused():
    r = seakr("ask", "--model", "smollm2-135m", "--method", "cot", "word " * 20000)
    err = r.stderr.decode()
    assert r.returncode == 2 and "question too long" in err and "8192-token context" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_sample_count_the_machine_cannot_hold_is_one_line(index):
    """k = 10**11 asked torch for 40 TB and printed its traceback; the allocation failure is named, with the
    knobs that size it (exit 3: the input is valid, the machine too small)."""
    r = seakr("ask", "--model", "smollm2-135m", "--index", index, "--option", "k=100000000000", "Who wrote Hamlet?")
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode == 3 and "Traceback" not in r.stderr.decode()
    assert err[-1].startswith("seakr: error: out of memory (asked for ") and "lower k" in err[-1]


def test_a_stream_with_no_line_breaks_is_refused_at_its_first_line(tmp_path):
    """A corpus streamed with --format from a source that never ends a line (/dev/zero here; a binary file
    alike) was read whole into memory: out of memory, with advice about k and the model's precision. The
    refused build leaves none of the folders it made for --out (they stayed, empty)."""
    import resource

    def cap_memory():  # old code read until this cap: fail fast rather than take the machine
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    r = seakr("index", "build", "/dev/zero", "--format", "jsonl", "--out", str(tmp_path / "made" / "here" / "idx"),
              preexec_fn=cap_memory)
    one_line_error(r, "/dev/zero:1: a line of over 256 MB: not a file of one record per line")
    assert list(tmp_path.iterdir()) == []


def test_an_exception_without_a_message_is_named_by_its_type():
    from seakr.common.console import first_line

    assert first_line(KeyError()) == "KeyError" and first_line(EOFError("")) == "EOFError"  # IndexError before
    assert first_line(ValueError("one\ntwo")) == "one" and first_line(ValueError("x" * 500), limit=300) == "x" * 300


def test_09_question_with_undecodable_bytes(index):
    one_line_error(seakr("ask", "--index", index, b"caf\xe9 au lait?"), "not valid UTF-8")


@pytest.mark.parametrize("content,needle", [
    ("[1, 2, 3]", "expected a JSON object, got int"),
    (json.dumps([{"_id": "a", "question": "q", "answer": "x", "context": "not paragraphs"}]), "field context: has an unknown layout"),
    (json.dumps([{"_id": "a", "question": "q", "answer": "x", "context": [["T", "not a list"]]}]), "entries should be [title, [sentences]]"),
])
def test_09_malformed_data_files(tmp_path, content, needle):
    f = tmp_path / "hotpot_bad.json"
    f.write_text(content)
    one_line_error(seakr("eval", "--data", str(f), "--layout", "hotpotqa", "--out", str(tmp_path / "o")), needle)


def test_09_10_truncated_gzip_and_non_utf8_name_the_file_and_line(tmp_path):
    lines = "".join(json.dumps({"question": f"q{i}", "answers": ["a"]}) + "\n" for i in range(3000)).encode()
    gz = tmp_path / "nq.jsonl.gz"
    gz.write_bytes(gzip.compress(lines)[:5000])  # cut mid-stream
    one_line_error(seakr("eval", "--data", str(gz), "--layout", "nq", "--out", str(tmp_path / "o")),
                   "truncated or damaged gzip file", str(gz))
    bad = tmp_path / "nq.jsonl"
    bad.write_bytes(lines[:200] + b"\n" + b'{"question": "caf\xff", "answers": ["a"]}\n')
    one_line_error(seakr("eval", "--data", str(bad), "--layout", "nq", "--out", str(tmp_path / "o")),
                   f"{bad}:", "not UTF-8 text")
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b'{"id": "1", "text": "ok"}\n{"id": "2", "text": "\xff"}\n')
    one_line_error(seakr("index", "build", str(corpus), "--format", "jsonl", "--out", str(tmp_path / "i")),
                   f"{corpus}:2: not UTF-8 text")
    toml = tmp_path / "runs.toml"
    toml.write_bytes(b'data = "x"\n# \xff\n')
    one_line_error(seakr("eval", "--config", str(toml)), f"{toml}:2: not UTF-8 text")


def test_a_grid_run_with_bad_options_fails_before_the_first_run(tmp_path):
    """A typo in a grid's last run is found before the model loads, not after the first runs finish."""
    out = str(tmp_path / "o")
    for body, needles in (
        ('[[run]]\nmethod = "ircot"\n[[run]]\nname = "b"\nmethod = "seakr"\noptions = { rerank = "engnie" }\n',
         ("[[run]] #2 (b)", "option rerank: one of")),
        ('[[run]]\nmethod = "ircot"\n[[run]]\nmethod = "seakr"\noptions = { estimator = "eigne" }\n',
         ("[[run]] #2 (seakr)", "option estimator: one of", "not 'eigne'")),
        ('[[run]]\nmethod = "seakr"\noptions = { dleta = 1.0 }\n',
         ("[[run]] #1 (seakr)", "unknown option(s) 'dleta' (did you mean 'delta'?)")),
        ('[[run]]\nmethod = "seakr2"\n', ("[[run]] #1 (seakr2)", "unknown method 'seakr2'")),
        ('[[run]]\nmethod = ["ircot"]\n', ("[[run]] #1", "field method: expected text, got ['ircot']")),  # was "unhashable type"
        # the grid itself: misspelled keys, ranges, types, names that are paths, a name used twice
        ('limt = 5\n[[run]]\nmethod = "ircot"\n', ("unknown key 'limt' (did you mean 'limit'?)",)),
        ('THREADS = 1\n[[run]]\nmethod = "ircot"\n', ("unknown key 'THREADS' (did you mean 'threads'?)",)),  # listed all
        ('[[run]]\nmethod = "ircot"\nopitons = { k = 2 }\n', ("[[run]] #1", "unknown key 'opitons' (did you mean 'options'?)")),
        ('limit = -1\n[[run]]\nmethod = "ircot"\n', ("key limit: expected a whole number in [1, inf)", "got -1")),
        ('limit = 0\n[[run]]\nmethod = "ircot"\n', ("key limit: expected a whole number in [1, inf)", "got 0")),
        ('every = 0\n[[run]]\nmethod = "ircot"\n', ("key every: expected a whole number in [1, inf)",)),
        ('layout = "nqq"\n[[run]]\nmethod = "ircot"\n', ("key layout: one of hotpotqa", "not 'nqq' (did you mean 'nq'?)")),
        ('filler = "x.jsonl"\n[[run]]\nmethod = "ircot"\n', ("key filler: expected a list of texts or null, got 'x.jsonl'",)),
        ('delta = "low"\n[[run]]\nmethod = "ircot"\n', ("key delta: expected a number", "got 'low'")),
        ('delta = nan\n[[run]]\nmethod = "ircot"\n', ("key delta: expected a number", "got nan")),
        ('layer = -1\n[[run]]\nmethod = "ircot"\n', ("key layer: expected a whole number in [0, inf)",)),
        ('state_source = "ffn"\n[[run]]\nmethod = "ircot"\n', ("key state_source: one of mlp, residual, not 'ffn'",)),
        ('limit = "5"\n[[run]]\nmethod = "ircot"\n', ("key limit: expected a whole number", "got '5'")),
        ('seed = 99999999999999\n[[run]]\nmethod = "ircot"\n', ("key seed: expected a whole number in [0, 4294967295]",)),
        ('[[run]]\nname = "../escaped"\nmethod = "ircot"\n', ("[[run]] #1", "must be a file name")),
        ('[[run]]\nname = "scores.jsonl"\nmethod = "ircot"\n', ("[[run]] #1", "a file a run keeps its record in")),
        ('[[run]]\nname = "a"\nmethod = "ircot"\n[[run]]\nname = "a"\nmethod = "cot"\n', ("[[run]] #2", "a second run named 'a'")),
        ('[[run]]\nname = "Ab"\nmethod = "ircot"\n[[run]]\nname = "aB"\nmethod = "cot"\n', ("[[run]] #2", "only in case")),
    ):
        toml = tmp_path / "grid.toml"
        toml.write_text(body)
        one_line_error(seakr("eval", "--config", str(toml), "--data", HOTPOT, "--out", out), str(toml), *needles)
    one_line_error(seakr("eval", "--data", HOTPOT, "--out", out, "--option", "estimator=eigne"),
                   "--option: option estimator: one of")


@pytest.mark.slow
def test_09_broken_model_folders(tmp_path, index):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{broken")
    one_line_error(seakr("ask", "--model", str(folder), "--index", index, "q?"), "cannot load the model")
    from seakr.models.registry import resolve

    src, _ = resolve("smollm2-135m")  # the converted cache: copy it and cut its weights short
    cut = tmp_path / "cut"
    shutil.copytree(src, cut)
    w = cut / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 3])
    one_line_error(seakr("ask", "--model", str(cut), "--index", index, "q?"), "cannot load the model")


def test_09_12_output_paths_checked_before_the_model(tmp_path, index):
    one_line_error(seakr("ask", "--index", index, "--html", str(tmp_path), "Who?"), "is a directory")
    one_line_error(seakr("ask", "--index", index, "--html", str(tmp_path / "no" / "t.html"), "Who?"), "no such directory")
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(seakr("eval", "--data", HOTPOT, "--out", str(f)), "exists and is not a directory")


def _small_files():
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX file-size limit")
def test_12_the_answer_is_printed_even_when_the_page_cannot_be_written(tmp_path):
    page = tmp_path / "trace.html"
    r = seakr("ask", "--model", "smollm2-135m", "--method", "cot", "--option", "max_new_tokens=8",
              "--html", str(page), "Who wrote Hamlet?", preexec_fn=_small_files)
    assert r.returncode == 2 and b"A: " in r.stdout  # the computed answer is not lost
    assert r.stderr.decode().strip().splitlines()[-1] == f"seakr: error: --html {page}: File too large", r.stderr
    assert not page.exists()
    if os.path.isdir("/proc/self"):  # a place that takes no page at all is refused before the model loads
        one_line_error(seakr("ask", "--model", "smollm2-135m", "--html", "/proc/seakr-trace.html", "Who wrote Hamlet?"),
                       "--html /proc/seakr-trace.html: cannot write there (/proc refuses new files: ")


def test_15_input_checks_run_before_the_model_loads(tmp_path, index):
    one_line_error(seakr("ask", "--index", index, "   "), "question: empty (no visible text)")
    one_line_error(seakr("ask", "--index", str(tmp_path / "nothing"), "Who?"), "no index here")
    one_line_error(seakr("ask", "--index", index, "--option", "rerank=random", "Who?"), "--option: option rerank: one of")
    port = str(free_port())  # free now, so the option check is what fails
    one_line_error(seakr("serve", "--index", index, "--port", port, "--option", "rerank=random"),
                   "--option: option rerank: one of")
    # a default past a request's limit would refuse every request the server took
    one_line_error(seakr("serve", "--index", index, "--port", port, "--option", "k=100"),
                   "--option: option k: at most 64 on this server, got 100 (every request carries the server's defaults)")


def test_17_a_taken_port_fails_before_anything_is_announced(index):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        err = one_line_error(seakr("serve", "--index", index, "--port", str(port)), f"cannot listen on 127.0.0.1:{port}")
        assert "serving" not in err
    finally:
        s.close()


@pytest.mark.parametrize("args,needle", [
    (["uncertainty", "--temperature", "nan", "x"], "expected a number in [0, inf), got nan"),
    (["uncertainty", "--temperature", "-1", "x"], "expected a number in [0, inf), got -1.0"),
    (["uncertainty", "--top-p", "2", "x"], "expected a number in (0, 1]"),
    (["uncertainty", "--top-k", "0", "x"], "expected a whole number in [1, inf), got 0"),
    (["uncertainty", ""], "the prompt: empty (no visible text)"),
    (["uncertainty", "\u200b\u2060"], "the prompt: empty (no visible text)"),  # invisible characters alone, as ask
    (["uncertainty", "\udcff\udcfe"], "the prompt: not valid UTF-8"),  # a shell's $'\xff\xfe': not "empty"
    (["ask", "\udcff\udcfe"], "question: not valid UTF-8"),
    (["uncertainty", "--temperature", "0", "x"], "--temperature 0: every sample would be the greedy answer"),
    (["uncertainty", "--show", "-1", "x"], "expected a whole number in [0, inf), got -1"),
    (["uncertainty", "--stop", "", "x"], "--stop: an empty stop string stops nothing"),  # it was ignored
    (["uncertainty", "--threads", "100000", "x"], "--threads 100000: this process may use"),
    (["uncertainty", "--device", "bogus", "x"], "--device 'bogus'"),
    (["uncertainty", "--device", "cuda:abc", "x"], "--device 'cuda:abc'"),
    (["uncertainty", "--device", "meta", "x"], "--device 'meta'"),
    pytest.param(["uncertainty", "--device", "mps", "x"], "--device 'mps': MPS (Apple GPU) is not available",
                 marks=pytest.mark.skipif(sys.platform == "darwin", reason="a Mac may have MPS")),
    (["uncertainty", "--seed", "99999999999999999999", "x"], "--seed: expected a whole number in [0, 4294967295], got 99999999999999999999"),
    (["uncertainty", "--model", "smollm2-135m", "--layer", "30", "x"], "--layer 30: expected a 0-based decoder layer in 0..29"),
    # a probe's tap as `probe fit` writes it was "invalid int value"
    (["uncertainty", "--layer", "L11:mlp", "x"], "a layer's number, not a tap: 'L11:mlp' is --layer 11 --state-source mlp"),
    # a file's path was "unknown prompt set", as if a family's name had been misspelled
    (["ask", "--prompt-set", "no-such-set.json", "q?"], "prompt set 'no-such-set.json': no such file (a prompt set is"),
    (["ask", "--prompt-set", "hotpot", "q?"], "unknown prompt set 'hotpot' (did you mean 'hotpotqa'?)"),
    (["ask", "Who?"], "--index: method 'seakr' searches; pass --index"),
    (["ask", "--delta", "nan", "Who?"], "--delta: expected a number (inf and -inf allowed), got nan"),  # was "--option"
    (["demo", "--delta", "NaN"], "--delta: expected a number (inf and -inf allowed), got nan"),
    (["eval", "--delta", "nan", "--data", "q.jsonl"], "--delta: expected a number (inf and -inf allowed)"),
    (["ask", "--method", "dragin", "Who?"], "--index: method 'dragin' searches"),
    (["serve", "--queue", "-5"], "expected a whole number in [0, inf), got -5"),
    (["serve", "--token", ""], "--token (or SEAKR_TOKEN): empty: give a token, or leave it out"),
    (["serve", "--body-timeout", "nan"], "--body-timeout: expected a number in (0, inf), got nan"),
    (["serve", "--cors-origin", "localhost:3000"], "--cors-origin: 'localhost:3000' is not a web origin"),
    (["serve", "--workers", "100000"], "of attention cache at once, more than this machine's"),
    # a misspelled flag was "seakr: unrecognized arguments", naming neither the command nor the flag meant
    (["ask", "--methd", "cot", "q"], "seakr ask: unrecognized arguments: --methd q (did you mean '--method'?)"),
    (["probe", "fit", "--tapp", "best", "--out", "x", "r"], "(did you mean '--tap'?)"),
    (["search", "idx", "q", "--jsn"], "seakr search: unrecognized arguments: --jsn (did you mean '--json'?)"),
    (["ask", "--foo", "q"], "seakr ask: unrecognized arguments: --foo (see --help)"),  # nothing near: no guess
])
def test_10_11_bad_values_fail_before_the_model_loads(args, needle):
    err = one_line_error(seakr(*args), needle)
    assert "Traceback" not in err


def test_half_a_surrogate_pair_is_refused_at_every_door_before_the_model_loads(tmp_path, index):
    """A JSON escape of half a surrogate pair decodes into text nothing can encode: in a data file it failed at
    the question, after the model had loaded, and told the user to "shorten it"; in an option or a prompt set it
    would fail in the tokenizer. Each names where it is, before the load."""
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "a", "question": "Who wrote \\ud800 Hamlet?", "answer": "Shakespeare"}\n')
    one_line_error(seakr("eval", "--data", str(data), "--method", "cot", "--out", str(tmp_path / "o")),
                   f"{data}:1: \\ud800 is half of a surrogate pair")
    one_line_error(seakr("ask", "--index", index, "--option", 'marker="So \\udfff"', "Who?"),
                   "--option marker: \\udfff is half of a surrogate pair")
    from seakr.prompts import __file__ as prompts_init

    demos = json.loads((Path(prompts_init).parent / "data" / "hotpotqa.json").read_text())
    demos["demos"][0]["question"] += "\udc00"
    (tmp_path / "set.json").write_text(json.dumps(demos))
    one_line_error(seakr("ask", "--index", index, "--prompt-set", str(tmp_path / "set.json"), "Who?"),
                   "set.json:", "\\udc00 is half of a surrogate pair")
    from seakr.methods import SeaKRConfig

    with pytest.raises(ValueError, match="option marker: visible text"):
        SeaKRConfig(marker="So \ud800")


@pytest.mark.skipif(not shutil.which("bash") or not os.path.exists("/dev/null"), reason="needs bash's <(...)")
def test_a_pipe_is_read_where_it_is_read_once_and_named_where_it_would_be_read_twice(tmp_path, index):
    """``--data <(head -50 dev.jsonl)`` said "no questions in this file": the layout's guess had read the pipe
    and the questions found it empty. So did a corpus of unknown format ("no passage to index"), a prompt set
    ("malformed prompt set"), a filler corpus ("no such file"). Where a file is read once -- a corpus with
    --format, a probe file -- a pipe now works; elsewhere one line says why not, before anything loads."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "Alpha", "text": "Alpha is a city."}\n')
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "q", "question": "Who?", "answer": "x"}\n')

    def bash(cmd):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        return subprocess.run(["bash", "-c", f"{shlex.join(SEAKR_CLI)} {cmd}"],
                              capture_output=True, timeout=300, env=env)

    out = shlex.quote(str(tmp_path / "o"))
    for cmd, needle in ((f"eval --data <(cat {data}) --method cot --out {out}", "a data file is read more than once"),
                        (f"index build <(cat {corpus}) --out {out}", "guessing its format reads its head first"),
                        (f"eval --data {data} --filler <(cat {corpus}) --method seakr --out {out}",
                         "--filler: /dev/fd/"),
                        (f"ask --index {index} --prompt-set <(cat {corpus}) Who?", "a prompt set is read when")):
        one_line_error(bash(cmd), ": a pipe or device, which can be read once, but", needle)
    r = bash(f"index build --format jsonl <(cat {corpus}) --out {out}")
    assert r.returncode == 0 and b"built " in r.stdout and b"1 passages" in r.stdout, r.stderr
    from seakr.common.layouts import DatasetError
    from seakr.eval.datasets import load_dataset
    from seakr.search.corpora import CorpusError, read_corpus

    with pytest.raises(DatasetError, match="^/dev/null: a pipe or device"):
        load_dataset("/dev/null", "hotpotqa")
    with pytest.raises(CorpusError, match="^/dev/null: a pipe or device"):
        list(read_corpus("/dev/null"))


def test_a_layer_beyond_a_model_folders_depth_is_refused_before_its_weights_load(tmp_path, index):
    """A model folder's (or GGUF file's) depth was read only once its weights had loaded -- and the refusal then
    named ``state_layer``, not the flag. Its config.json says it: a folder without weights proves the order."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 4}))
    for args in (["ask", "--index", index, "Who?"], ["uncertainty", "x"],
                 ["eval", "--data", HOTPOT, "--index", index, "--out", str(tmp_path / "o")]):
        one_line_error(seakr(*args, "--model", str(folder), "--layer", "4"), "--layer 4: expected a 0-based decoder "
                       "layer in 0..3")
    from seakr.models import load_model

    with pytest.raises(ValueError, match=r"state_layer 4: expected a 0-based decoder layer in 0\.\.3"):
        load_model(folder, state_layer=4)


@pytest.mark.parametrize("args", [
    ["eval", "--data", HOTPOT, "--method", "cot", "--out", "x", "--model", ""],  # ran on the default model
    ["eval", "--data", HOTPOT, "--method", "cot", "--out", "x", "--filler", " "],
    ["eval", "--data", HOTPOT, "--method", "cot", "--out", "x", "--config", ""],
    ["ask", "--index", "", "Who?"],
    ["serve", "--index", ""],  # served the demo index
    ["serve", "--host", ""],  # listened on every interface
    ["detect", "--data", HOTPOT, "--out", "x", "--probe-file", ""],  # ran the whole study without the probe
    ["detect", "--data", HOTPOT, "--out", "x", "--probe", ""],  # ran the study reading no extra tap
    ["probe", "gate", "--check", ".", "--chain", ".", "--out", "x", "--probes", ""],
])
def test_an_empty_input_path_is_not_read_as_its_default(tmp_path, args):
    flag = next(a for a, b in zip(args, args[1:]) if not b.strip())
    # relative paths land in a scratch folder, were the check to fail (one_line_error's "no config: line" test
    # cannot read "argument --config: empty")
    r = seakr(*args, cwd=tmp_path)
    err = r.stderr.decode().strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1, err
    assert f"argument {flag}: empty; name it, or leave the flag out for its default" in err


def test_empty_paths_through_the_grid_the_options_and_the_python_api(tmp_path):
    from seakr.eval.plan import EvalPlan
    from seakr.eval.specs import PlanError
    from seakr.methods import SeaKR

    for kw, needle in ((dict(index=""), "eval: index: is empty"), (dict(filler=[""]), r"eval: filler\[0\]: is empty"),
                       (dict(prompt_set=" "), "eval: prompt_set: is empty"), (dict(model=""), "^eval: model: empty; name a model")):
        with pytest.raises(PlanError, match=needle):
            EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"], **kw).check()
    with pytest.raises(ValueError, match="model: empty"):
        SeaKR.from_config(model="", index=None)
    grid = tmp_path / "g.toml"
    grid.write_text('index = ""\n[[run]]\nmethod = "cot"\n')
    one_line_error(seakr("eval", "--config", str(grid), "--data", HOTPOT, "--out", str(tmp_path / "o")), "index: is empty")
    one_line_error(seakr("ask", "--option", "probes=", "Who?"), "option probes: an empty path")


def test_an_index_ask_never_searches_is_said_and_not_opened(tmp_path):
    """`ask --method cot --index IDX` opened the index and never searched it; it is said, as eval's plan says it,
    and not opened (a folder that is no index is no error); a later refusal still stops before the model loads."""
    r = seakr("ask", "--index", str(tmp_path), "--method", "cot", "--option", "k=-1", "Who?")
    warning, error = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and warning == "seakr: warning: --index is not read: method 'cot' never searches"
    assert "option k: expected a whole number in [0, inf), got -1" in error


def test_delta_without_a_seakr_run_is_said_not_ignored(index, tmp_path, capsys):
    """--delta is SeaKR's threshold: given to a baseline it was dropped without a word (eval) or named as
    an unknown --option the user never typed (ask). Both say it is unread: the same flags may be looped over
    several methods."""
    from seakr.common import console
    from seakr.eval.plan import EvalPlan

    r = seakr("ask", "--index", index, "--method", "ircot", "--delta=-3", "--option", "k=-1", "Who?")
    warning, error = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and "option k: " in error
    assert warning == "seakr: warning: --delta is not read: method 'ircot' has no retrieval threshold (SeaKR's delta)"
    console._WARNED.clear()
    EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"], delta=-3.0).check()
    assert "eval: delta is not read: it is SeaKR's threshold, and no run of the plan is SeaKR (cot)" in capsys.readouterr().err


def test_index_build_takes_its_engine_from_where_it_builds(tmp_path):
    """A URL --out with the default engine wrote a tantivy folder named "http:"; --engine elasticsearch with
    a folder was a TypeError; an unreachable cluster printed the client's traceback."""
    one_line_error(seakr("index", "build", HOTPOT, "--engine", "tantivy", "--out", "http://127.0.0.1:1/x", cwd=tmp_path),
                   "a URL, and tantivy builds a folder")
    assert not (tmp_path / "http:").exists()
    one_line_error(seakr("index", "build", HOTPOT, "--engine", "elasticsearch", "--out", str(tmp_path / "i")),
                   "--engine elasticsearch: --out must read http(s)://host:9200/INDEX")
    one_line_error(seakr("index", "build", HOTPOT, "--out", f"http://127.0.0.1:{free_port()}/x"),  # elasticsearch, inferred
                   "Elasticsearch failed (ConnectionError")
    one_line_error(seakr("index", "build", HOTPOT, "--out", "http:///x"), "expected http(s)://host:port/INDEX")


def test_a_stop_string_replaces_the_default_newline():
    from seakr.cli.args import build_parser

    parse = lambda *a: build_parser().parse_args(["uncertainty", *a, "x"]).stop  # noqa: E731
    assert parse() is None and parse("--stop", ".", "--stop", "?") == [".", "?"]  # appended to ["\n"] before


def test_a_choice_written_as_its_makers_capitalise_it_gets_a_suggestion_at_every_door(tmp_path):
    """``--layout HotpotQA``, ``--format DPR``, ``--precision BF16``, a grid's ``layout = "2WikiMultihopQA"`` and the
    Python API's ``layout=``, ``fmt=``, ``precision=`` listed their choices and left the reader to find the one."""
    from seakr.eval.datasets import load_dataset
    from seakr.models import load_model
    from seakr.search import read_corpus

    for argv, mean in ((["eval", "--data", "q.jsonl", "--layout", "HotpotQA"], "hotpotqa"),
                       (["index", "build", "c.tsv", "--format", "DPR"], "dpr"), (["ask", "--precision", "BF16", "q"], "bf16"),
                       (["ask", "--method", "SeaKR", "q"], "seakr")):
        assert one_line_error(seakr(*argv), f"(did you mean '{mean}'?) (see --help)")
    grid = tmp_path / "g.toml"
    grid.write_text(f'data = "{HOTPOT}"\nlayout = "2WikiMultihopQA"\n[[run]]\nmethod = "cot"\n')
    assert one_line_error(seakr("eval", "--config", str(grid)), "not '2WikiMultihopQA' (did you mean '2wiki'?)")
    for call, mean in ((lambda: load_dataset(HOTPOT, layout="SQuAD"), "squad"),
                       (lambda: list(read_corpus(HOTPOT, "FlashRAG")), "flashrag"),
                       (lambda: load_model("no-such-model", precision="BF16"), "bf16")):
        with pytest.raises(ValueError, match=re.escape(f"(did you mean '{mean}'?)")):
            call()


@pytest.mark.parametrize("value,read", [("-inf", -math.inf), ("-Infinity", -math.inf), ("-1e-3", -0.001),
                                        ("-5.", -5.0), ("-.5", -0.5), ("-3.958", -3.958)])
def test_a_negative_threshold_is_a_value_not_a_flag(value, read):
    """argparse reads only -5 and -5.2 as numbers: ``--delta -inf`` (the help's own example: "inf and -inf
    allowed") and ``--delta -1e-3`` were "expected one argument"; a question may still be one after --."""
    from seakr.cli.args import build_parser

    for cmd in (["ask", "--delta", value, "Who?"], ["eval", "--data", "q.jsonl", "--delta", value],
                ["demo", "--delta", value]):
        assert build_parser().parse_args(cmd).delta == read
    assert build_parser().parse_args(["ask", "--", "-inf"]).question == "-inf"
    assert build_parser().parse_args(["ask", "-1e-3"]).question == "-1e-3"


def test_every_path_flag_expands_a_tilde_no_shell_expanded(monkeypatch):
    """``--index=~/idx`` (bash expands no ``~`` after ``=``) and a quoted ``"~/idx"`` reached the commands as
    written: "no index here", and an output made a folder named "~" in the working folder."""
    from seakr.cli.args import build_parser

    monkeypatch.setenv("HOME", "/h")
    parse = lambda *a: vars(build_parser().parse_args(a))  # noqa: E731
    a = parse("ask", "q", "--index=~/idx", "--model=~/m.gguf", "--html=~/a.html", "--prompt-set=~/s.json")
    assert (a["index"], a["model"], a["html"], a["prompt_set"]) == ("/h/idx", "/h/m.gguf", "/h/a.html", "/h/s.json")
    assert parse("serve", "--index=~/idx", "--model=~/m")["index"] == "/h/idx"
    e = parse("eval", "--data=~/d.json", "--out=~/runs", "--filler=~/w.jsonl", "--index=~/i", "--config=~/g.toml")
    assert (e["data"], e["out"], e["filler"], e["index"], e["config"]) == (
        "/h/d.json", "/h/runs", ["/h/w.jsonl"], "/h/i", "/h/g.toml")
    assert parse("index", "build", "~/c.jsonl", "--out=~/idx")["sources"] == ["/h/c.jsonl"]
    assert parse("index", "build", "--format", "wiki-offline", "--out=~/idx")["out"] == "/h/idx"
    assert parse("search", "~/idx", "q")["index"] == parse("index", "info", "~/idx")["index"] == "/h/idx"
    assert parse("export", "~/runs", "--out=~/p.json")["out"] == "/h/p.json"
    assert parse("ask", "q", "--index=http://es:9200/wiki", "--model=smollm2-135m")["index"] == "http://es:9200/wiki"


def test_a_question_or_prompt_given_as_a_dash_is_read_from_stdin(monkeypatch, capsys):
    """`seakr ask -` answered the question "-" (and `uncertainty -` scored the prompt "-"): a question too long or
    too quoted for the shell comes on stdin, UTF-8, its closing line end dropped."""
    import io

    from seakr.cli.args import build_parser

    def parse(argv, data: bytes):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        return build_parser().parse_args(argv)

    q = "Who wrote \"Hamlet\" -- and when?\nIn which city?"
    assert parse(["ask", "-", "--index", "i"], (q + "\r\n").encode()).question == q
    assert parse(["demo", "-"], b"\xef\xbb\xbfWho? ").question == "Who? "
    assert parse(["uncertainty", "-"], "Qu'est-ce que c'est ?\n".encode()).prompt == "Qu'est-ce que c'est ?"
    assert parse(["ask", "Who?", "--index", "i"], b"ignored").question == "Who?"
    with pytest.raises(SystemExit) as e:
        parse(["ask", "-", "--index", "i"], b"caf\xe9?")
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument question: stdin: not UTF-8 text (byte 0xe9 at offset 3)" in err


def test_a_corpus_streamed_on_stdin_is_indexed_from_a_dash(tmp_path):
    """`zcat corpus.jsonl.gz | seakr index build - --format jsonl` was "-: no such file"; `-` is stdin, read once
    (so its format is given, and it is named once)."""
    corpus = open(fixture_path("filler.flashrag.jsonl"), "rb").read()
    r = seakr("index", "build", "-", "--format", "flashrag", "--out", str(tmp_path / "i"), input=corpus)
    assert r.returncode == 0 and "built" in r.stdout.decode() and "38 passages" in r.stdout.decode(), r.stderr
    one_line_error(seakr("index", "build", "-", "--out", str(tmp_path / "j"), input=corpus),
                   "/dev/stdin: a pipe or device, which can be read once, but guessing its format reads its head first")
    one_line_error(seakr("index", "build", "-", "-", "--format", "jsonl", "--out", str(tmp_path / "k"), input=b""),
                   "'-' (stdin) named twice")


def test_a_query_that_starts_with_a_dash_is_explained(capsys):
    from seakr.cli.args import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["search", "idx", "-Planck"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "put it after --" in err
    assert build_parser().parse_args(["search", "idx", "--", "-Planck"]).query == "-Planck"


def test_10_output_paths_and_run_folders_are_checked(tmp_path):
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    one_line_error(seakr("eval", "--data", HOTPOT, "--method", "cot", "--out", str(link)), "a symbolic link to nothing")
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("[1, 2]")
    (run / "scores.jsonl").write_text(json.dumps({"id": "q", "f1": 1.0, "em": 1.0}) + "\n")
    one_line_error(seakr("merge", str(run), "--out", str(afile)), "exists and is not a directory")
    one_line_error(seakr("compare", str(run)), f"{run / 'config.json'}: not a run configuration (a JSON list")


def test_11_non_ascii_prompts_reach_the_model_as_typed():
    from seakr.cli.args import unescape

    assert unescape("Question: 日本の首都は?\\nAnswer:") == "Question: 日本の首都は?\nAnswer:"
    assert unescape("tab\\there, a kept \\\\n") == "tab\there, a kept \\n"


@pytest.mark.parametrize("option,needle", [
    ("prompt_set=nope", "option prompt_set: unknown prompt set 'nope'"),
    ("prompt_style=weird", "option prompt_style: one of plain, chat, auto"),
    ("marker= ", "option marker: visible text on one line"),
    ("n_shot=50", "option n_shot: prompt set 'hotpotqa' has 8 demonstration(s)"),
    ("marker=was", "option marker: 'was' is said in step 1 of demonstration 0 of prompt set 'hotpotqa'"),
])
def test_prompt_options_fail_before_the_model_loads(tmp_path, option, needle):
    """They were read when the method was built, after the model (and, for eval, the index) had loaded."""
    one_line_error(seakr("ask", "Who?", "--method", "cot", "--option", option), needle)
    toml = tmp_path / "grid.toml"
    key, value = option.split("=")
    toml.write_text(f'[[run]]\nmethod = "cot"\noptions = {{ {key} = {value if value.isdigit() else json.dumps(value)} }}\n')
    one_line_error(seakr("eval", "--config", str(toml), "--data", HOTPOT, "--out", str(tmp_path / "o")), needle)


def test_report_checks_its_output_path_and_names_a_malformed_detection_file(tmp_path):
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "detect.json").write_text("{bad")
    one_line_error(seakr("report", str(tmp_path / "study"), "--out", str(tmp_path / "no" / "r.html")),
                   f"--out {tmp_path / 'no' / 'r.html'}: no such directory")  # it was a bare Errno
    one_line_error(seakr("report", str(tmp_path / "study")), f"{tmp_path / 'study' / 'detect.json'}:1: invalid JSON")
    # the folder itself, not the default --out inside it ("--out nope/report.html: no such directory nope")
    one_line_error(seakr("report", str(tmp_path / "nope")), f"{tmp_path / 'nope'}: no such directory")
    (tmp_path / "f.txt").write_text("x")
    one_line_error(seakr("report", str(tmp_path / "f.txt")), "f.txt: not a directory")
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "seakr-index.json").write_text("{}")  # not "--out idx/report.html: inside the index"
    one_line_error(seakr("report", str(tmp_path / "idx")), f"{tmp_path / 'idx'}: a seakr index, not a run or study folder")


def test_compare_refuses_a_study_and_points_into_a_grid_folder(tmp_path):
    study, grid = tmp_path / "study", tmp_path / "grid"
    study.mkdir()
    (study / "config.json").write_text(json.dumps({"study": "detect"}))  # its rows were paired as answers (n=0)
    for name in ("a", "b"):
        (grid / name).mkdir(parents=True)
        (grid / name / "config.json").write_text(json.dumps({"name": name}))
    one_line_error(seakr("compare", str(grid / "a"), str(study)), "study: a detect study, not an eval run")
    one_line_error(seakr("compare", str(grid)), "grid: not an eval run directory", "it holds the runs a, b")


@pytest.mark.parametrize("args,needle", [
    (["ask", "Q?", "--method", "cot", "--html", ""], "--html: an empty path"),  # it was ignored: no page, no word
    (["index", "build", HOTPOT, "--out", ""], "--out: an empty path"),  # it read as the working folder
    (["probe", "fit", ".", "--out", " "], "--out: an empty path"),
    (["merge", ".", "--out", ""], "--out: an empty path"),
])
def test_an_empty_output_path_is_named(args, needle):
    one_line_error(seakr(*args), needle)


def test_studies_refuse_questions_they_cannot_use_before_pooling_an_index(tmp_path, index):
    """calibrate --data takes simple QA, rerank-study needs gold titles: both were found out after the index
    was pooled and the model loaded (rerank-study not at all: every recall read 0)."""
    err = one_line_error(seakr("calibrate", "--data", HOTPOT, "--out", str(tmp_path / "c")),
                         "multi-hop questions calibrate from two eval runs")
    assert "index:" not in err  # one line: nothing was pooled first
    nq = tmp_path / "nq.jsonl"
    nq.write_text('{"question": "who wrote hamlet", "answer": ["Shakespeare"]}\n')
    one_line_error(seakr("rerank-study", "--data", str(nq), "--index", index, "--out", str(tmp_path / "r")),
                   "no question names its supporting passages")
    bare = tmp_path / "test.jsonl"  # questions without gold answers: answered by eval, no label for the studies
    bare.write_text('{"id": "t1", "question": "who wrote hamlet"}\n')
    for cmd, more in (("detect", []), ("calibrate", ["--index", index])):
        err = one_line_error(seakr(cmd, "--data", str(bare), *more, "--out", str(tmp_path / cmd)),
                             f"test.jsonl: question 't1' has no gold answer, and `seakr {cmd}` labels answers right or wrong")
        assert "warning" not in err
    for cmd in ("eval", "rerank-study"):  # a missing index folder: found at the plan's check, not after the load
        one_line_error(seakr(cmd, "--data", HOTPOT, "--index", str(tmp_path / "none"), "--out", str(tmp_path / "o")),
                       f"{tmp_path / 'none'}: no index here")


def test_a_glob_the_shell_expanded_after_data_is_told_to_be_quoted(tmp_path):
    """``--data rc/validation-*.parquet`` unquoted reaches seakr as several files: "unrecognized arguments" alone
    did not say why."""
    shards = [tmp_path / f"validation-0000{i}-of-00002.parquet" for i in range(2)]
    for s in shards:
        s.write_bytes(b"PAR1")
    one_line_error(seakr("eval", "--data", *map(str, shards), "--out", str(tmp_path / "o")),
                   f"unrecognized arguments: {shards[1]} (files after a flag that takes one: quote a glob")


@pytest.mark.parametrize("argv", [
    ["eval", "--data", HOTPOT, "--out", "OUT", "--method", "cot", "--threads", "100000"],
    ["eval", "--data", HOTPOT, "--out", "OUT", "--method", "cot", "--precision", "fp8"],
    ["eval", "--data", HOTPOT, "--out", "OUT", "--option", "estimator=eigne"],
    ["ask", "--index", "no-such-index", "Who?"],
    ["serve", "--workers", "100000"],
    ["eval", "--data", HOTPOT, "--out", "OUT", "--option", "probes=/nonexistent/probes"],  # was after the load
])
def test_a_bad_input_is_refused_without_importing_torch(tmp_path, argv):
    """Refusing a typo took 4.7 s, most of it importing torch and transformers to check --threads or --device
    cpu; the checks need neither, so the one-line error comes in a fraction of a second."""
    code = ("import sys; from seakr.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert e.code == 2, e.code\n"
            "print('torch imported' if 'torch' in sys.modules else 'torch not imported')")
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "torch not imported", (r.stdout, r.stderr)
    assert r.stderr.startswith("seakr: error:") and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("argv", [["compare", ""], ["report", ""], ["report", ".", "--out", ""], ["merge", "--out", "m", ""],
                                  ["merge", "--out", "", "."], ["eval", "--data", "d", "--out", ""],
                                  ["probe", "fit", "--out", "p.json", ""], ["calibrate", "--from-runs", "", "x", "--out", "o"],
                                  ["index", "build", "", "--out", "i"]])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, argv, capsys):
    """`seakr compare ""` compared the current folder, and `report DIR --out ""` wrote the default file (into
    a committed results folder, where it was tried)."""
    from seakr.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "an empty path" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["compare", "nope"], ["merge", "--out", "m", "nope"], ["export", "nope"],
                                  ["probe", "fit", "nope", "--out", "p.json"], ["calibrate", "--from-runs", "nope", "x", "--out", "o"],
                                  ["probe", "gate", "--check", "nope", "--chain", "x", "--out", "g"]])
def test_a_run_or_study_folder_that_is_not_there_is_said_so(tmp_path, monkeypatch, argv, capsys):
    """A mistyped run folder read "nope: not a run directory (no config.json)" (or "not a detect study", "no
    answered question here"), as if the folder were there without its files."""
    from seakr.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2 and capsys.readouterr().err == "seakr: error: nope: no such folder\n"


def test_the_python_api_of_compare_report_and_merge_refuses_an_empty_path(tmp_path):
    from seakr.eval.compare import compare
    from seakr.eval.merge import merge_runs
    from seakr.serve.render import report_html

    from seakr.eval.rowlog import RowLog

    for call in (lambda: compare([""]), lambda: report_html(""), lambda: merge_runs("", ["x"]), lambda: merge_runs("m", [" "]),
                 lambda: RowLog("", "results.jsonl", {})):  # run_eval's and every study's log
        with pytest.raises(ValueError, match="an empty path; name the folder"):
            call()
    from seakr.eval.specs import SettingError

    with pytest.raises(SettingError, match="/dev/null: exists and is not a directory$") as e:  # was FileExistsError
        merge_runs("/dev/null", [str(tmp_path)])
    assert e.value.field == "out"  # held to the output folder's rule, as `seakr merge --out` is


@pytest.mark.slow  # loads the packaged model
def test_the_demo_keeps_its_answer_as_json_and_a_page_as_ask_does(tmp_path, index, capsys):
    """`seakr demo` had neither --json nor --html: the first answer a user sees could not be kept. A page that
    cannot be written is refused before the model loads, as for `ask`."""
    from seakr.cli import main

    assert main(["demo", "--html", str(tmp_path / "no" / "d.html"), "--index", index, "--model", "smollm2-135m"]) == 2
    err = capsys.readouterr().err
    assert "--html" in err and "config:" not in err
    argv = ["demo", "--json", "--html", str(tmp_path / "d.html"), "--index", index, "--model", "smollm2-135m",
            "--method", "cot", "--option", "max_new_tokens=8", "--option", "max_steps=1", "Who wrote Hamlet?"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["question"] == "Who wrote Hamlet?" and "model load" in err  # stdout: one JSON document
    assert "Who wrote Hamlet?" in (tmp_path / "d.html").read_text(encoding="utf-8")
    # no question: both demo questions (one the model knows, one it must look up), one JSON document a line
    from seakr.eval.corpus import DEMO_QUESTIONS

    assert main(argv[:-1]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["question"] for line in out.splitlines()] == list(DEMO_QUESTIONS) and "answers" in err


@pytest.mark.parametrize("question", ["", "   "])
def test_the_demo_refuses_an_empty_question_before_the_model_loads(question, capsys):
    """`seakr demo ""` loaded the model and answered the demo's own question, as if none had been given."""
    from seakr.cli import main

    assert main(["demo", question, "--model", "smollm2-135m"]) == 2
    err = capsys.readouterr().err
    assert "question: empty (no visible text)" in err and "config:" not in err and "index:" not in err


def test_uncertainty_json_is_one_strict_json_document(monkeypatch, capsys):
    """`seakr uncertainty --json` printed its config line on stdout before the document, and an estimator
    with nothing to measure (EigenScore of one sample) as the bare token Infinity: neither jq nor JSON.parse
    read it. stdout is now the document alone, +inf is null with its reason under "uncertain"."""
    from scripted import Reply, ScriptedLM
    from seakr.cli import main
    from seakr.eval.specs import ModelSpec

    monkeypatch.setattr(ModelSpec, "load", lambda self: ScriptedLM(lambda v: Reply("Paris")))
    assert main(["uncertainty", "Where is the Eiffel Tower?", "--k", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert d["scores"]["eigen"] is None and "compares >= 2 samples" in d["uncertain"]["eigen"]
    assert err.startswith("config: ")


def test_main_puts_back_the_sigterm_handler_it_found(tmp_path):
    """A command takes SIGTERM as Ctrl-C while it runs; called in-process (a script, a test), main() leaves the
    caller's handler as it was, whether the command ends well or not."""
    import signal

    from seakr.cli import main

    mine = lambda signum, frame: None  # noqa: E731
    before = signal.signal(signal.SIGTERM, mine)
    try:
        assert main(["index", "info", str(tmp_path / "none")]) == 2
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_console_that_cannot_spell_the_output_gets_escapes_not_an_error(tmp_path):
    """``seakr search`` (or ask, demo) printing a title like "Zürich" to a console whose encoding lacks it (a
    Windows code page, PYTHONIOENCODING=ascii) failed after its work: "'ascii' codec can't encode character"."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "u", "title": "Zürich", "text": "Zürich is a city — naïve café."}) + "\n",
                      encoding="utf-8")
    idx = str(tmp_path / "idx")
    assert seakr("index", "build", str(corpus), "--out", idx).returncode == 0
    for enc, title in (("ascii", b"Z\\xfcrich"), ("cp1252", "Zürich".encode("cp1252"))):
        r = seakr("search", idx, "Zürich", env={"PYTHONIOENCODING": enc})
        assert r.returncode == 0 and title in r.stdout, (enc, r.stdout, r.stderr)


def test_a_path_the_system_refuses_is_one_line_before_the_model(tmp_path, index):
    """A file name longer than the file system takes (300 characters as --out) was a traceback from the first
    stat ("OSError: [Errno 36] File name too long") in eval, detect, calibrate, index build, report, probe fit
    and search; an index build over a corpus that is a link loop was "RuntimeError: Symlink loop". (The
    name is shown cut in its middle, as any run of over 240 characters in an error line.)"""
    long = str(tmp_path / ("x" * 300))
    data = HOTPOT
    for args in (["eval", "--data", data, "--method", "cot", "--out", long],
                 ["detect", "--data", data, "--out", long], ["calibrate", "--data", data, "--out", long],
                 ["index", "build", data, "--out", long], ["report", str(tmp_path), "--out", long + ".html"],
                 ["probe", "fit", str(tmp_path), "--out", long + ".json"], ["search", long, "x"],
                 ["eval", "--data", data, "--model", long, "--method", "cot", "--out", str(tmp_path / "o")]):
        one_line_error(seakr(*args), long[:120], "characters)...", "a name longer than this file system takes")
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "back")
    (tmp_path / "back").symlink_to(loop)
    err = one_line_error(seakr("index", "build", str(loop), "--out", str(tmp_path / "idx")), str(loop))
    assert "Symlink loop" not in err


def test_a_runs_file_made_a_folder_is_named_as_our_lines_name_a_path(tmp_path):
    """A run's rows made a folder (a sync tool's conflict copy, a mistaken mkdir) stopped eval --resume, compare,
    export and report with "[Errno 21] Is a directory: 'run/results.jsonl'"."""
    from scripted import Reply, ScriptedLM

    from seakr.eval.example import Example
    from seakr.eval.runner import run_eval
    from seakr.methods import build_method

    run = tmp_path / "run"
    run_eval(build_method("cot", ScriptedLM(lambda v: Reply("So the answer is x.")), None),
             [Example("a", "Who?", ["x"])], run)
    (run / "scores.jsonl").unlink()
    (run / "scores.jsonl").mkdir()
    for args in (["compare", str(run)], ["export", str(run)], ["report", str(run), "--out", str(tmp_path / "r.html")]):
        one_line_error(seakr(*args), f"{run / 'scores.jsonl'}: is a directory, expected a file")


def test_control_characters_from_a_corpus_are_shown_escaped(tmp_path):
    """A passage holding terminal controls ("\\x1b]0;...\\x07" retitles the terminal, "\\x1b[2J" clears it, CR
    overwrites the line) was printed raw by `seakr search` and by the trace `ask` and `demo` print."""
    from scripted import Reply, ScriptedLM, engine
    from seakr.methods.baselines import IRCoT

    nasty = "Vienna is the capital\x1b]0;pwned\x07 of Austria.\r\x1b[2J\x9b"
    idx = engine(tmp_path, {"Vien\x1b[31mna": nasty})
    r = seakr("search", str(idx.path), "capital of Austria")
    out = r.stdout.decode()
    assert r.returncode == 0 and not any(c in out for c in "\x1b\x07\r\x9b"), out
    assert "Vien\\x1b[31mna" in out and "capital\\x1b]0;pwned\\x07 of Austria.\\x0d\\x1b[2J\\x9b" in out
    ans = IRCoT(ScriptedLM(lambda v: Reply("Vienna\x1b[2J. So the answer is Vienna.")), idx,
                config={"max_steps": 1, "n_shot": 0}).answer("What is the \x1b[2Jcapital of Austria?")
    text = ans.summary()
    assert not any(c in text for c in "\x1b\x07\r\x9b") and "What is the \\x1b[2Jcapital" in text
    assert "\x1b" in ans.to_dict()["question"]  # the record keeps the text as it was; only the display escapes


@pytest.mark.parametrize("token", [" tok", "tok ", "to\nk", "tok\r", "t\x7fk"])
def test_a_token_no_client_can_send_is_refused_at_start(token, tmp_path):
    """A header's value is read without its outer spaces and cannot hold a control character, so a server
    started with " tok" or "tok\\r" (a token file written on Windows) refused every request, its own client's too."""
    from seakr.serve.limits import ServiceLimits

    with pytest.raises(ValueError, match="a token no HTTP client can send"):
        ServiceLimits(token=token)
    one_line_error(seakr("serve", "--index", str(tmp_path / "none"), "--port", str(free_port()), "--token", token),
                   "--token (or SEAKR_TOKEN): a token no HTTP client can send")
    assert ServiceLimits(token="a b-ü").token == "a b-ü"  # inner spaces and any script: sent as UTF-8, matched


def test_a_reader_that_goes_away_stops_the_command_quietly(tmp_path):
    """`seakr search INDEX q -k 3000 | head -1` printed a BrokenPipeError traceback (exit 1) once head had its
    line; it ends as Unix tools do: no message, exit 141 (128 + SIGPIPE)."""
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    TantivyEngine.build((Passage(str(i), f"T{i}", f"common word {i} " + "filler " * 60) for i in range(3000)),
                        tmp_path / "idx")
    p = subprocess.Popen([*SEAKR_CLI, "search", str(tmp_path / "idx"), "common word", "-k", "3000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().startswith(b"[1]")
    p.stdout.close()  # about 1 MB more to print: far past what a pipe holds
    assert p.wait(timeout=120) == 141
    assert p.stderr.read() == b""


def _with_closed(fds: tuple[int, ...]):
    """A child's preexec: the descriptors a supervisor or `2>&-` leaves closed."""
    return lambda: [os.close(fd) for fd in fds]


def test_a_stream_closed_at_the_start_leaves_the_work_done(tmp_path):
    """With stderr closed (`2>&-`, a supervisor) `index build` ended in an AttributeError ('NoneType' has no
    'isatty', its progress bar) before building; with stdout closed every command ended in a traceback at its
    last flush; an error line went to stdout. The work runs and the exit status says how it went."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "title": "Vienna", "text": "Vienna is the capital of Austria."}) + "\n")
    r = subprocess.run([*SEAKR_CLI, "index", "build", str(corpus), "--out", str(tmp_path / "idx")], stdout=subprocess.PIPE,
                       preexec_fn=_with_closed((2,)), timeout=120)
    assert r.returncode == 0 and (tmp_path / "idx").is_dir() and r.stdout.startswith(b"built ")
    for closed in ((1,), (1, 2), (0, 1, 2)):
        assert subprocess.run([*SEAKR_CLI, "search", str(tmp_path / "idx"), "Vienna"], preexec_fn=_with_closed(closed),
                              timeout=120).returncode == 0
    r = subprocess.run([*SEAKR_CLI, "search", str(tmp_path / "nothing"), "Vienna"], stdout=subprocess.PIPE,
                       preexec_fn=_with_closed((2,)), timeout=120)
    assert r.returncode == 2 and r.stdout == b""  # the error line is not the result


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_stdout_the_system_refuses_is_named_as_stdout(tmp_path):
    """`seakr search ... > FILE` on a full disk said "no space left on the device; ... a run goes on with
    --resume", as if a run's rows had failed; stdout opened for reading (`1<file`) was a traceback."""
    from seakr.search import Passage
    from seakr.search.tantivy_engine import TantivyEngine

    TantivyEngine.build([Passage("a", "Vienna", "Vienna is the capital of Austria.")], tmp_path / "idx")
    argv = [*SEAKR_CLI, "search", str(tmp_path / "idx"), "Vienna"]
    (tmp_path / "in.txt").write_text("x")
    for out, why in (("/dev/full", "no space left on the device"), (tmp_path / "in.txt", "Bad file descriptor")):
        with open(out, "w" if out == "/dev/full" else "r") as f:
            r = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, text=True, timeout=120)
        assert r.returncode == 3 and r.stderr == (f"seakr: error: cannot write to stdout ({why}); the output printed "
                                                  "there is incomplete\n"), r.stderr


@pytest.mark.parametrize("argv", [
    ["eval", "--data", HOTPOT, "--out", "OUT", "--method", "cot", "--option", "max_new_tokens=8192"],
    ["eval", "--data", HOTPOT, "--out", "OUT", "--config", "GRID"],
    ["ask", "--method", "cot", "--option", "max_new_tokens=9000", "Who?"],
    ["serve", "--option", "max_new_tokens=8192"],
    ["detect", "--data", HOTPOT, "--out", "OUT", "--option", "max_new_tokens=10000"],
    ["uncertainty", "--max-new-tokens", "8192", "Who?"],
])
def test_max_new_tokens_the_context_cannot_hold_is_refused_before_the_model(tmp_path, argv):
    """max_new_tokens as long as the model's window (2**63 - 1 in a grid) was refused only once the model had
    loaded (a minute for the 1.5B on a CPU); the window of a packaged model, a GGUF file or a folder is known
    without its weights, so every door refuses it first, without importing torch."""
    grid = tmp_path / "grid.toml"
    grid.write_text('[[run]]\nmethod = "ircot"\n[[run]]\nname = "long"\nmethod = "cot"\n'
                    'options = { max_new_tokens = 9223372036854775807 }\n')
    argv = [{"OUT": str(tmp_path / "out"), "GRID": str(grid)}.get(a, a) for a in argv] + ["--model", "smollm2-135m"]
    code = ("import sys; from seakr.cli import main\n"
            "try:\n    sys.exit(main(sys.argv[1:]))\nexcept SystemExit as e:\n    assert e.code == 2, e.code\n"
            "print('torch imported' if 'torch' in sys.modules else 'torch not imported')")
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "torch not imported", (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "leaves no room for" in r.stderr and "8192-token context; lower it" in r.stderr, r.stderr
    assert (f"{grid}: [[run]] #2 (long)" in r.stderr) == ("GRID" in argv or str(grid) in argv)  # named as given
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["9" * 5000, "+09" + "9" * 5000])
def test_an_option_with_more_digits_than_python_converts_is_named(value, capsys):
    """`--option k=<5000 digits>` said "Exceeds the limit (4300 digits) for integer string conversion ... use
    sys.set_int_max_str_digits()", naming no flag."""
    from seakr.cli import main

    assert main(["ask", "--index", "x", "--option", f"k={value}", "Who?"]) == 2
    assert capsys.readouterr().err == "seakr: error: --option k: a number of over 4,300 digits\n"


def test_an_output_page_never_replaces_a_file_seakr_did_not_write(tmp_path):
    """`ask --html notes.html` and `report --out notes.html` replaced a user's file without a word; a page seakr
    wrote is replaced as before (a report run again), any other file only with --overwrite."""
    mine = tmp_path / "notes.html"
    mine.write_text("my notes")
    r = seakr("ask", "Who wrote Hamlet?", "--model", "smollm2-135m", "--method", "cot", "--html", str(mine))
    assert r.returncode == 2 and b"exists and seakr did not write it; pass --overwrite" in r.stderr
    assert b"loading" not in r.stderr.lower() and mine.read_text() == "my notes"
    run = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "results", "table-qwen-amx-hotpotqa53")
    r = seakr("report", str(run), "--out", str(mine))
    assert r.returncode == 2 and b"pass --overwrite" in r.stderr and mine.read_text() == "my notes"
    from seakr.serve.render import write_report

    page = tmp_path / "page.html"
    write_report(str(run), str(page))
    again = seakr("report", str(run), "--out", str(page))
    assert again.returncode == 0, again.stderr  # its own page: replaced
    assert seakr("report", str(run), "--out", str(mine), "--overwrite").returncode == 0
    assert "seakr" in mine.read_text()

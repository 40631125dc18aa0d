"""The text readers' own rules, against Python's json module as the reference."""

import json
import os
import random
import re
import stat
import sys
import threading
from pathlib import Path

import pytest

from seakr.common.checks import encodable
from seakr.common.console import did_you_mean, shown, warn
from seakr.common.files import lines
from seakr.common.jsontext import check_escapes, lone_surrogate
from seakr.common.tables import head
from seakr.common.writing import write_atomic


def test_a_lone_surrogate_escape_is_found_exactly_where_json_decodes_one():
    """``lone_surrogate`` reads the escapes in the raw text (so it can name the line); it must agree with what
    json.loads makes of them: None exactly where the decoded value can be written as UTF-8. Escaped
    backslashes ("\\\\ud800" is text), whole pairs in either case, a high half before another high half, a low
    half alone, halves split by a character, all drawn at random."""
    atoms = [r"\ud800", r"\udbff", r"\udc00", r"\udfff", r"\uD83D", r"\uDE00", "\\\\", "a", r"\u0041", r"\\u",
             "u", "d800", r"\n", "\U0001F600"]
    rng = random.Random(0)
    checked = 0
    for _ in range(20000):
        parts = ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 3))]
        text = "[\n" + ",\n".join(f'"{p}"' for p in parts) + "\n]"
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        checked += 1
        found = lone_surrogate(text)
        assert (found is None) == encodable(json.dumps(value, ensure_ascii=False)), (text, found)
        if found:  # the line it names holds the escape it names
            line, esc = found
            assert esc.lower() in text.splitlines()[line - 1].lower() and len(esc) == 6, (text, found)
    assert checked > 10000


def test_check_escapes_names_the_file_line_or_the_flag():
    import pytest

    with pytest.raises(ValueError, match=r"^data.json:3: \\udc00 is half of a surrogate pair"):
        check_escapes('[\n"ok \\ud83d\\ude00",\n"\\udc00"]', "data.json")
    with pytest.raises(ValueError, match=r"^--option marker: \\ud800 is half"):
        check_escapes('"\\ud800"', "--option marker", numbered=False)
    check_escapes('"\\\\ud800 is text"', "x")


def test_a_whole_write_keeps_links_modes_and_devices(tmp_path):
    """The file replaced whole is the one the path names: a link's target (the link stays a link), with the
    mode it had; a pipe or device is written through (/dev/stdout's node is not replaced); no hidden
    file is left."""
    target = tmp_path / "real.json"
    target.write_text("old")
    os.chmod(target, 0o600)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    write_atomic(tmp_path / "fresh.json", "x")
    assert (tmp_path / "fresh.json").read_text() == "x"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_atomic(fifo, "through")  # not a file: written through, not replaced
    reader.join(10)
    assert got == ["through"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.json", "link.json", "pipe", "real.json"]


@pytest.mark.skipif(not os.path.exists("/dev/stdout"), reason="a /dev/stdout")
def test_stdout_by_its_name_is_written_through_into_a_pipe(tmp_path):
    """``export --out /dev/stdout | head`` failed: the link resolves to "/proc/PID/fd/pipe:[N]", which names
    nothing, and the write went to a hidden file beside it ("[Errno 2] No such file or directory")."""
    import subprocess
    import sys

    from seakr.common.writing import check_output_file

    code = "from seakr.common.writing import check_output_file, write_atomic; check_output_file('/dev/stdout', '--out'); " \
           "write_atomic('/dev/stdout', 'through')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "through"), r.stderr
    if os.path.isdir("/proc/self"):  # root passes the permission bits there, yet /proc takes no file
        with pytest.raises(ValueError, match=r"^--out /proc/x.json: cannot write there \(/proc refuses new files: "):
            check_output_file("/proc/x.json", "--out")
    check_output_file(str(tmp_path / "x.json"), "--out")
    assert list(tmp_path.iterdir()) == []  # the file it tried is gone


def test_a_whole_write_names_the_place_that_takes_no_file_not_its_hidden_twin(tmp_path):
    """From Python (``Probe.save``, ``write_answer_html``: no command to check the place first) the error named the
    hidden file beside the one asked for: "[Errno 2] No such file or directory: 'out/.p.json.123-456.tmp'"."""
    from seakr.common.writing import make_folder

    (tmp_path / "file").write_text("x")
    cases = [(tmp_path / "no" / "p.json", f"no folder {tmp_path / 'no'}"),
             (tmp_path / "file" / "p.json", f"{tmp_path / 'file'} is not a directory"),
             (tmp_path / "file" / "a" / "p.json", f"{tmp_path / 'file'} is not a directory")]
    if os.path.isdir("/proc/self"):
        cases.append((Path("/proc/p.json"), "/proc refuses new files: "))
    for path, why in cases:
        with pytest.raises(ValueError, match="^" + re.escape(f"{path}: cannot write the file ({why}")):
            write_atomic(path, "x")
    with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path))}: is a directory, expected a file name$"):
        write_atomic(tmp_path, "x")
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'file' / 'd'}: cannot create the run folder (")):
        make_folder(tmp_path / "file" / "d", "the run folder")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=re.escape("(…/gone is a symbolic link to nothing (…/nowhere))".replace(
            "…", str(tmp_path)))):
        make_folder(tmp_path / "gone" / "d")
    assert make_folder(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "file", "gone"]


def test_a_line_too_long_is_refused_or_cut_where_asked(tmp_path):
    """Record readers refuse a line over their bound with path:line (a stream with no line breaks was read
    whole); the format guess reads at most a MB of one line (a 500 MB JSON file on one line was read whole to
    guess its layout), cut between characters, never inside one."""
    import pytest

    f = tmp_path / "a.jsonl"
    f.write_text('{"a": 1}\n' + "é" * 40 + "\n", encoding="utf-8")
    assert next(lines(f, ValueError, max_line=20)) == (1, '{"a": 1}\n')
    with pytest.raises(ValueError, match=r"a\.jsonl:2: a line of over 0 MB: not a file of one record per line"):
        list(lines(f, ValueError, max_line=20))
    assert [t for _, t in lines(f, ValueError, max_line=21, cut=True)] == ['{"a": 1}\n', "é" * 10]  # 21 bytes: 10½
    big = tmp_path / "one.json"
    big.write_text('[{"question": "' + "x" * (3 << 20) + '"}]', encoding="utf-8")
    got = head(big, 4096)
    assert got.startswith('[{"question": "xxx') and len(got) == 1 << 20


def test_console_text_escapes_controls_and_keeps_the_rest(capsys):
    """What seakr prints of a corpus, a dataset or the model: controls as escapes (ESC, BEL, CR, DEL, C1), text
    of any script, newlines and tabs as they are; a warning quoting such text is printed the same way."""
    assert shown("a\x1b[2Jb\x07c\rd\x7fe\x9bf\x00") == "a\\x1b[2Jb\\x07c\\x0dd\\x7fe\\x9bf\\x00"
    assert shown("Zürich 東京 مرحبا 🙂\n\tok") == "Zürich 東京 مرحبا 🙂\n\tok"
    warn("file ev\x1bil.jsonl: something")
    assert capsys.readouterr().err == "seakr: warning: file ev\\x1bil.jsonl: something\n"


def test_json_nested_past_the_parser_is_a_decode_error_where_it_goes_too_deep(tmp_path):
    """`[[[[...` a hundred thousand deep as a data line, a prompt set or a model's config.json was a RecursionError's
    traceback (and took model_depth down with it): it is malformed JSON, at the bracket past 500 levels."""
    from seakr.models.figures import model_context, model_depth
    from seakr.common.jsontext import loads, parse_json
    from seakr.common.tables import jsonl

    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(json.JSONDecodeError, match=r"nested too deeply to read") as e:
        loads('{"s": "[[[\\"[", "x": ' + deep + "}")
    assert e.value.pos == len('{"s": "[[[\\"[", "x": ') + 499  # brackets inside a string (an escaped quote too) do not count
    assert loads("[" * 400 + "]" * 400)  # deep, but within what the parser follows
    with pytest.raises(ValueError, match=r"^where:3: invalid JSON \(nested too deeply"):
        parse_json("\n\n" + deep, "where")
    (tmp_path / "d.jsonl").write_text('{"id": "a"}\n{"id": ' + deep + "}\n")
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'd.jsonl'}:2: invalid JSON \(nested too deeply"):
        list(jsonl(str(tmp_path / "d.jsonl")))
    with pytest.raises(json.JSONDecodeError, match=r"a number of over 4,300 digits") as e:  # was: "use
        loads('{"id": "12", "n": ' + "9" * 5000 + "}")  # sys.set_int_max_str_digits()", naming no file
    assert e.value.pos == len('{"id": "12", "n": ')
    (tmp_path / "config.json").write_text('{"num_hidden_layers": ' + deep + "}")
    assert model_depth(str(tmp_path)) is None and model_context(str(tmp_path)) is None  # not known: the load says


def test_a_key_given_twice_in_one_object_is_refused_where_that_object_starts(tmp_path):
    """`{"answer": "Paris", "answer": "Lyon"}` was read as Lyon, the other value dropped unsaid (json.loads keeps
    the last), in a dataset, a corpus, a probe file or a request, as a table's reader had kept one of two columns
    of one name. The error names the key and the line of the object that gives it twice."""
    from seakr.common.layouts import DatasetError
    from seakr.eval.datasets import load_dataset
    from seakr.search.corpora import CorpusError, read_jsonl
    from seakr.common.jsontext import loads, parse_json

    with pytest.raises(json.JSONDecodeError, match=r"the key 'answer' is given twice in one object"):
        loads('{"question": "q", "answer": "Paris", "answer": "Lyon"}')
    with pytest.raises(ValueError, match=r"^where:4: invalid JSON \(the key 'c' is given twice"):
        parse_json('[\n{"c": 1},\n{"b": {"c": 1},\n "a": {"c": 1, "c": 2}}]', "where")  # the inner object, on line 4
    assert loads('{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}') == {"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}
    d = tmp_path / "d.jsonl"
    d.write_text('{"id": "1", "question": "Who wrote Hamlet?", "answer": "Shakespeare"}\n'
                 '{"id": "2", "question": "Capital of France?", "answer": "Paris", "answer": "Lyon"}\n')
    with pytest.raises(DatasetError, match=rf"^{d}:2: invalid JSON \(the key 'answer' is given twice"):
        load_dataset(str(d))
    c = tmp_path / "c.jsonl"
    c.write_text('{"id": "p1", "title": "France", "text": "Paris is the capital.", "text": "Lyon"}\n')
    with pytest.raises(CorpusError, match=rf"^{c}:1: invalid JSON \(the key 'text' is given twice"):
        list(read_jsonl(str(c)))


def test_an_error_line_cuts_a_value_too_long_to_read_and_escapes_controls(capsys):
    """`--layout <5,000 digits>` and `--index <a pasted passage>` echoed the value whole (5 KB on one line)."""
    from seakr.cli import main
    from seakr.common.console import message

    long = "9" * 5000
    run = f"'{long}':"  # the run of characters without a space holds the quotes and the colon
    assert message(f"--layout {run} invalid") == f"--layout {run[:160]}...(5,003 characters)...{run[-40:]} invalid"
    assert message("a path /" + "d" * 239 + " ok") == "a path /" + "d" * 239 + " ok"  # 240 characters: kept whole
    assert message("x\x1b[2J y") == "x\\x1b[2J y"
    for argv in (["eval", "--layout", long], ["search", "/no/such/" + "i" * 3000, "q"]):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse's own refusal
            rc = e.code
        assert rc == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and len(err) < 600 and "characters)..." in err, err


def _compress(kind: str, data: bytes) -> bytes:
    import bz2
    import gzip
    import lzma

    if kind == "zstd":
        try:
            from compression import zstd  # Python 3.14
            return zstd.compress(data)
        except ImportError:
            return pytest.importorskip("zstandard").ZstdCompressor().compress(data)
    return {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}[kind](data)


@pytest.mark.parametrize("kind", ["gzip", "bzip2", "xz", "zstd"])
def test_compressed_files_are_read_by_their_first_bytes_under_any_name_and_through_a_pipe(tmp_path, kind):
    """A ``.bz2`` or ``.xz`` download, or a gzip one saved without ``.gz``, was "not UTF-8 text (byte 0x8b at
    column 2)": each is decompressed as it is read, from a file of any name and from a pipe (read once)."""
    text = "".join(f'{{"id": "q{i}", "question": "Où {i}?"}}\n' for i in range(3000))  # past one peek's buffer
    packed = _compress(kind, text.encode())
    for name in ("data.jsonl", "data.jsonl.gz", "data.bin"):
        (tmp_path / name).write_bytes(packed)
        assert "".join(t for _, t in lines(tmp_path / name)) == text
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(packed))
    writer.start()
    assert "".join(t for _, t in lines(fifo)) == text
    writer.join()
    assert head(tmp_path / "data.bin", 100).startswith('{"id": "q0"')
    (tmp_path / "cut").write_bytes(packed[:len(packed) // 2])
    with pytest.raises(ValueError, match=rf"cut: truncated or damaged {kind} file after line \d+ \(") as e:
        list(lines(tmp_path / "cut"))
    assert "\n" not in str(e.value)


def test_zstd_before_3_14_reads_every_frame_or_names_the_package(tmp_path, monkeypatch):
    """Before Python 3.14 a ``.zst`` file was refused ("this Python cannot read"); the zstandard package reads it
    (frames one after another, as ``zstd`` concatenates them), and without it the refusal names the extra."""
    one, two = '{"id": "a"}\n', '{"id": "b"}\n'
    f = tmp_path / "d.jsonl.zst"
    f.write_bytes(_compress("zstd", one.encode()) + _compress("zstd", two.encode()))
    assert "".join(t for _, t in lines(f)) == one + two
    monkeypatch.setitem(sys.modules, "compression", None)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(ValueError, match=r"d.jsonl.zst: zstd-compressed, which this Python reads with the zstandard "
                                         r"package \(pip install 'seakr\[zstd\]'; Python 3.14 needs none\)"):
        list(lines(f))


def test_archives_are_refused_naming_what_to_extract(tmp_path):
    """A zip, 7z or tar archive holds many files: read as text it was "not UTF-8" or invalid JSON at line 1."""
    import io
    import tarfile
    import zipfile

    with zipfile.ZipFile(tmp_path / "data.zip", "w") as z:
        for n in ("dev.json", "train.json", "id_aliases.json"):
            z.writestr(n, "{}")
    with pytest.raises(ValueError, match=r"data.zip: a zip archive of 3 file\(s\) \(dev.json, train.json, "
                                         r"id_aliases.json\): extract it and name the file inside"):
        list(lines(tmp_path / "data.zip"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("dev.jsonl")
        info.size = 3
        t.addfile(info, io.BytesIO(b"{}\n"))
    for name, data in (("d.tar", buf.getvalue()), ("d.tar.bz2", _compress("bzip2", buf.getvalue()))):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=rf"{name}: a tar archive: extract it \(tar xf .*{name}\)"):
            list(lines(tmp_path / name))
    (tmp_path / "d.7z").write_bytes(b"7z\xbc\xaf\x27\x1c" + bytes(30))
    with pytest.raises(ValueError, match=r"d.7z: a 7z archive: extract it"):
        list(lines(tmp_path / "d.7z"))
    (tmp_path / "ustar.txt").write_text(" " * 257 + "ustar words\n")  # text that says "ustar" there: no NUL, text
    assert len(list(lines(tmp_path / "ustar.txt"))) == 1


def test_text_saved_by_windows_tools_is_named_for_what_it_likely_is(tmp_path):
    """Excel's "CSV" is Windows-1252 and Notepad's "Unicode" UTF-16: both were "not UTF-8 text (byte 0xe9 ...)",
    which told a user neither what the file was nor what to do."""
    f = tmp_path / "q.csv"
    f.write_bytes("question,answer\nWho ran it?,Café Tortoni\n".encode("cp1252"))
    with pytest.raises(ValueError, match=r"q.csv:2: not UTF-8 text \(byte 0xe9 at column 16\): Windows-1252 perhaps "
                                         r"\('ran it\?,Café Tortoni'\); save it as UTF-8$"):
        list(lines(f))
    f.write_bytes("question,answer\n".encode("utf-16"))
    with pytest.raises(ValueError, match=r"q.csv:1: not UTF-8 text \(byte 0x[fe][fe] at column 1\): a UTF-16 file; save it as UTF-8$"):
        list(lines(f))
    f.write_bytes(b"SQLite format 3\x00\x10\x00\xff\x01")  # binary (a database): no code page guessed
    with pytest.raises(ValueError, match=r"q.csv:1: not UTF-8 text \(byte 0xff at column 19\)$"):
        list(lines(f))
    f.write_bytes(b"ok\n\x81\x8d\n")  # bytes Windows-1252 leaves undefined: the position alone
    with pytest.raises(ValueError, match=r"q.csv:2: not UTF-8 text \(byte 0x81 at column 1\)$"):
        list(lines(f))


def test_a_url_given_as_a_file_is_named_as_one():
    """`--data https://.../hotpot_dev.json` was "no such file", as if the name were mistyped."""
    for url in ("https://example.org/hotpot_dev.json", "hf://datasets/x/y.parquet"):
        with pytest.raises(ValueError, match=rf"^{re.escape(url)}: a URL, and files are read from this machine: "
                                             rf"download it first \(curl -LO {re.escape(url)}\)$"):
            list(lines(url))
    with pytest.raises(ValueError, match=r"^nope.json: no such file$"):
        list(lines("nope.json"))


def test_a_dash_is_named_as_standard_input_where_a_file_or_index_is_read(tmp_path):
    """`--data -` (a shell's name for standard input) was "-: no such file", and `--index -` "-: no index here";
    only `index build -` reads standard input."""
    from seakr.eval.plan import EvalPlan
    from seakr.eval.specs import PlanError
    from seakr.search import SearchError, open_engine

    with pytest.raises(ValueError, match=r"^-: standard input is not read here: save it to a file and name that$"):
        list(lines("-"))
    with pytest.raises(PlanError, match=r"^eval: filler: -: standard input is not read here"):
        EvalPlan(data=os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "nq_mini.oracle.jsonl"),
                 out=str(tmp_path / "o"), runs=["single"], filler=["-"]).check()
    with pytest.raises(SearchError, match=r"^index -: standard input is not read as an index; index it first"):
        open_engine("-")


@pytest.mark.parametrize("url", ["-", "https://example.org/fitted.json"])
def test_a_dash_or_url_is_named_where_a_probe_calibration_or_prompt_set_is_read(url):
    """`--probe-file -` was "-: no such probe file", `prompt_set=-` "unknown prompt set '-'", and a URL the same
    (with its "//" folded to "/" by the path)."""
    from seakr.probes import Calibration, load_probe
    from seakr.prompts import PromptSet

    why = "standard input is not read here" if url == "-" else "a URL, and files are read from this machine"
    for load, said in ((load_probe, ""), (Calibration.load, ""), (PromptSet.load, "prompt set ")):
        with pytest.raises(ValueError, match=rf"^{said}{re.escape(url)}: {why}"):
            load(url)


@pytest.mark.parametrize("value,choices,said", [
    ("EigenScore", "estimators", " (did you mean 'eigen'?)"),  # letters in common said hidden-score
    ("MaxEntropy", "estimators", " (did you mean 'max-entropy'?)"),
    ("INSIDE", "estimators", " (did you mean 'eigen-inside'?)"),
    ("eig", "estimators", " (did you mean 'eigen'?)"),  # the shortest name it begins
    ("BM25", "estimators", ""),
    ("Qwen2.5-Coder-1.5B-Instruct", "models", " (did you mean 'qwen2.5-coder-1.5b'?)"),  # the longest name that begins it
    ("Gemma-3-270M", "models", " (did you mean 'gemma3-270m'?)"),
    ("QWEN2.5-CODER-0.5B", "models", " (did you mean 'qwen2.5-coder-0.5b'?)"),
    ("nope", "models", ""), ("", "models", ""), (None, "models", ""),
    ("keep", "options", " (did you mean 'keep_p'?)"), ("K", "options", " (did you mean 'k'?)"),  # not k for keep
    ("--knowledge", "flags", ""),  # --k begins it, and means nothing of it
])
def test_did_you_mean_reads_names_as_their_makers_capitalise_them(value, choices, said):
    from seakr.models.registry import REGISTRY
    from seakr.uncertainty import ESTIMATORS

    lists = {"estimators": ESTIMATORS, "models": REGISTRY, "options": ("k", "keep_p", "temperature"),
             "flags": ("--k", "--json", "--model")}
    assert did_you_mean(value, lists[choices]) == said

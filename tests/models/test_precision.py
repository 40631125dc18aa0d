"""Which precision runs where (models/speedups.py, hf.choose_precision): an explicit float precision that the CPU
only emulates is run as asked, with one warning that says what it costs and what 'auto' would pick."""
import warnings

import pytest
import torch

from seakr.models import speedups
from seakr.models.hf import choose_precision

CPU = torch.device("cpu")
AVX2 = "flags : fpu sse2 avx avx2 fma f16c\n"
ZEN4 = "flags : fpu avx avx2 avx512f avx512_bf16 avx512_vnni\n"
SAPPHIRE = "flags : fpu avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_fp16\n"


@pytest.fixture
def cpu_flags(monkeypatch):
    def use(flags):
        monkeypatch.setattr(speedups, "_cpu_flags", lambda: flags)
    return use


def _chosen(precision):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        p = choose_precision(precision, None, CPU)
    return p, [str(w.message) for w in seen if issubclass(w.category, speedups.EmulatedPrecisionWarning)]


def test_bf16_on_a_cpu_without_avx512_bf16_runs_with_one_warning(cpu_flags):
    cpu_flags(AVX2)
    p, notes = _chosen("bf16")
    assert p == "bfloat16" and len(notes) == 1
    assert "emulated" in notes[0] and "AVX512-BF16" in notes[0] and "'auto' picks float32" in notes[0]
    p, notes = _chosen("fp16")
    assert p == "float16" and len(notes) == 1 and "AVX512-FP16" in notes[0]


def test_the_warning_points_at_the_callers_line(cpu_flags):
    """Python names the line a warning comes from: the user's call, not a line of ours or of pytest's (it named
    pytest's python.py when choose_precision was called directly, and models/__init__.py through load_model)."""
    cpu_flags(AVX2)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        choose_precision("bf16", None, CPU)
    assert [w.filename for w in seen] == [__file__]


def test_native_and_auto_precisions_say_nothing(cpu_flags):
    cpu_flags(ZEN4)
    assert _chosen("bf16") == ("bfloat16", [])
    assert _chosen("auto") == ("bfloat16", [])
    assert _chosen("fp32") == ("float32", [])
    assert len(_chosen("fp16")[1]) == 1  # Zen 4 has bf16, not fp16 arithmetic
    cpu_flags(SAPPHIRE)
    assert _chosen("fp16") == ("float16", [])
    cpu_flags(AVX2)
    assert _chosen("auto") == ("float32", []) and _chosen("float32") == ("float32", [])


def test_only_the_cpu_is_judged():
    assert speedups.emulation_note("bfloat16", torch.device("meta")) is None
    assert speedups.emulation_note("int8", CPU) is None  # int8's own speed is its kernel's business


def test_an_unreadable_cpuinfo_counts_as_no_native_bf16(monkeypatch):
    def refuse(*a, **k):
        raise OSError("no /proc here")
    monkeypatch.setattr("builtins.open", refuse)
    assert speedups._cpu_flags() == "" and not speedups.cpu_runs_bf16_natively()


def test_the_command_line_prints_it_as_one_note(monkeypatch, capsys, cpu_flags):
    """On the command line the warning is one ``seakr: warning:`` line, as the commands' other notes are (Python's
    form named a file of ours and quoted a source line); anybody else's warning keeps Python's form."""
    from seakr.cli.shell import warnings_as_notes
    from seakr.common import console

    seen = []
    monkeypatch.setattr(console, "_WARNED", set())  # said once a process: not hidden by an earlier test's note
    monkeypatch.setattr(warnings, "showwarning", lambda *a, **k: seen.append(a[1]))
    warnings_as_notes()
    warnings_as_notes()  # a second main() in one process wraps nothing twice
    cpu_flags(AVX2)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        choose_precision("bf16", None, CPU)
        warnings.warn("someone else's", DeprecationWarning)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("seakr: warning: precision bfloat16 is emulated on this CPU")
    assert seen == [DeprecationWarning]

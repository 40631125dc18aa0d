import pytest

from helpers import COT_ARGS, run_cli


@pytest.fixture(scope="session")
def whole_cot_run(tmp_path_factory):
    """The folder of the unsharded run of ``COT_ARGS``, made once a session (a process that loads the model
    costs ~12 s on a slow CPU before its first question)."""
    out = tmp_path_factory.mktemp("cot") / "whole"
    r = run_cli(*COT_ARGS, "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out

import pytest

from helpers import FAST, QUESTION


@pytest.fixture(scope="session")
def asked(small_index):
    """``seakr ask`` in its own process, the reference every door's answer and decisions are compared with."""
    import json

    from helpers import run_cli

    r = run_cli("ask", QUESTION, "--index", small_index, "--model", "smollm2-135m", "--json",
                *[a for k, v in FAST.items() for a in ("--option", f"{k}={v}")])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


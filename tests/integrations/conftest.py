import pytest

from helpers import FAST, HOTPOT, QUESTION


@pytest.fixture(scope="session")
def fixture_index(tmp_path_factory):
    """A real seakr index over the fixture's passages."""
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    out = tmp_path_factory.mktemp("integrations") / "idx"
    TantivyEngine.build(read_corpus(HOTPOT), out)
    return str(out)


@pytest.fixture(scope="session")
def asked(fixture_index):
    """``seakr ask`` in its own process, the reference every door's answer and decisions are compared with."""
    import json

    from helpers import run_cli

    r = run_cli("ask", QUESTION, "--index", fixture_index, "--model", "smollm2-135m", "--json",
                *[a for k, v in FAST.items() for a in ("--option", f"{k}={v}")])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


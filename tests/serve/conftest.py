import pytest

from helpers import HOTPOT, start_server


@pytest.fixture(scope="session")
def small_index(tmp_path_factory):
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    out = tmp_path_factory.mktemp("srv") / "idx"
    TantivyEngine.build(read_corpus(HOTPOT), out)
    return str(out)


@pytest.fixture(scope="module")
def server(small_index):
    proc, url = start_server(small_index, workers=1, queue=1)
    yield url, proc
    proc.terminate()
    proc.wait(20)

import pytest

from helpers import HOTPOT, serving


@pytest.fixture(scope="session")
def small_index(tmp_path_factory):
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    out = tmp_path_factory.mktemp("srv") / "idx"
    TantivyEngine.build(read_corpus(HOTPOT), out)
    return str(out)


@pytest.fixture(scope="module")
def server(small_index):
    with serving(small_index, workers=1, queue=1) as (proc, url):
        yield url, proc

import pytest

from helpers import serving


@pytest.fixture(scope="module")
def server(small_index):
    with serving(small_index, workers=1, queue=1) as (proc, url):
        yield url, proc

"""Index URLs (Elasticsearch, OpenSearch) as every door reads them: their shape is named before any connection
is made or model loads; no cluster is needed here."""

import re

import pytest

from seakr.search import SearchError, open_engine


@pytest.mark.parametrize("url,needle", [
    ("http://localhost:99999/wiki", "http://localhost:99999/wiki: not a URL (Port out of range 0-65535)"),  # urllib's, bare
    ("http://localhost:abc/wiki", "http://localhost:abc/wiki: not a URL (Port could not be cast"),
    ("http://[::1/wiki", "http://[::1/wiki: not a URL (Invalid IPv6 URL)"),
    ("http://a b/wiki", "http://a b/wiki: host 'a b' is not a host name or address"),  # urllib3's LocationParseError
    ("http://localhost:9200/wiki?pretty", "an index URL has no ?query or #fragment"),  # dropped without a word
    ("http://localhost:9200/Wiki", "the cluster has no index named 'Wiki': index names are lowercase"),  # sent to it
    ("ftp://host/wiki", "ftp://host/wiki: expected an index folder or an http(s)://host:port/INDEX URL"),  # "ftp:/host/wiki: no index here"
])
def test_a_url_of_another_shape_is_named_before_any_connection(url, needle):
    with pytest.raises(SearchError, match=re.escape(needle)):
        open_engine(url)


def test_a_url_is_a_url_in_any_case_and_ipv6_keeps_its_brackets():
    """``HTTP://host/x`` was read as a folder named "HTTP:"; an IPv6 host was shown as http://::1:9200/wiki."""
    assert open_engine("HTTP://127.0.0.1:9/wiki").url == "http://127.0.0.1:9/wiki"
    assert open_engine("http://[::1]:9200/wiki").url == "http://[::1]:9200/wiki"
    assert open_engine("http://127.0.0.1:9/wiki-*,_all").index == "wiki-*,_all"  # patterns and lists search too


def test_an_eval_plan_reads_a_cluster_url_before_the_model_loads(tmp_path):
    """An eval over a URL with a port out of range failed once the model had loaded (8.3 s with the 0.5B),
    with urllib's "Port out of range 0-65535" naming no URL."""
    from helpers import HOTPOT
    from seakr.eval.plan import EvalPlan

    with pytest.raises(SearchError, match=re.escape("http://127.0.0.1:99999/w: not a URL (Port out of range")):
        EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"], index="http://127.0.0.1:99999/w").check()
    EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["cot"], index="http://127.0.0.1:9/wiki").check()  # no connection yet

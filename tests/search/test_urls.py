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
    # a corpus file's URL was "put the index name in the URL path", or a connection to a cluster that is a web site
    ("https://example.org/data/docs.jsonl", "https://example.org/data/docs.jsonl: a URL, and files are read from this "
                                            "machine: download it first (curl -LO https://example.org/data/docs.jsonl)"),
    ("https://u:pw@example.org/psgs_w100.tsv.gz?dl=1", "https://u:***@example.org/psgs_w100.tsv.gz?dl=1: a URL, and"),
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
        EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["ircot"], index="http://127.0.0.1:99999/w").check()
    EvalPlan(data=HOTPOT, out=str(tmp_path / "o"), runs=["ircot"], index="http://127.0.0.1:9/wiki").check()  # no connection yet


def test_a_password_in_an_index_url_is_never_echoed(tmp_path):
    """An index URL may carry the cluster's credentials (``http://user:pass@host/x``): ``index:`` on stderr, the
    server's first line and every refusal naming the URL printed them into job logs. They read ``user:***@``;
    the engine's own record already dropped them."""
    from seakr.search.base import redact

    assert redact("http://elastic:s3cr%40t@es:9200/wiki") == "http://elastic:***@es:9200/wiki"
    assert redact("see https://u:p@a/x and http://b/y") == "see https://u:***@a/x and http://b/y"
    assert redact("/data/user:name@host/idx") == "/data/user:name@host/idx"  # a folder is not a URL
    for url in ("http://u:hunter2@localhost:9200/Wiki", "ftp://u:hunter2@host/wiki", "http://u:hunter2@a b/wiki"):
        with pytest.raises(SearchError) as e:
            open_engine(url)
        assert "hunter2" not in str(e.value) and "u:***@" in str(e.value)
    assert "hunter2" not in open_engine("http://u:hunter2@127.0.0.1:9/wiki").url
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "a", "question": "Who?", "answer": "x"}\n')
    from seakr.eval.plan import EvalPlan, run_plan
    from seakr.eval.specs import PlanError

    said = []
    plan = EvalPlan(data=str(data), out=str(tmp_path / "o"), index="http://u:hunter2@127.0.0.1:9/wiki", runs=["ircot"])

    def load():  # the line is said before the model loads; stop there
        raise RuntimeError("stop")
    plan.model.load = load
    with pytest.raises(RuntimeError, match="stop"):
        run_plan(plan, say=said.append, progress=False)
    assert said == ["index: http://u:***@127.0.0.1:9/wiki"]
    with pytest.raises(PlanError) as e:  # a plan's refusal naming the index
        EvalPlan(data=str(data), out=str(tmp_path / "o"), index="http://u:hunter2@127.0.0.1:9/wiki",
                 filler=[str(data)]).check()
    assert "hunter2" not in str(e.value) and "u:***@" in str(e.value)


def test_a_pipe_given_as_the_index_is_named_not_read_as_a_missing_folder(tmp_path):
    """``--index <(zcat docs.jsonl.gz)`` was "/dev/fd/63: no index here": a corpus given as the index is read twice."""
    import os

    fifo = tmp_path / "docs"
    os.mkfifo(fifo)
    with pytest.raises(SearchError, match=r"docs: a pipe or device, which can be read once, but a corpus given as "
                                          r"the index is read twice .*; save it to a file"):
        open_engine(str(fifo))

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from helpers import HOTPOT


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="session")
def small_index(tmp_path_factory):
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    out = tmp_path_factory.mktemp("srv") / "idx"
    TantivyEngine.build(read_corpus(HOTPOT), out)
    return str(out)


def start_server(index, workers=1, queue=1, timeout=120, extra=()):
    port = free_port()
    cmd = [sys.executable, "-m", "seakr.cli", "serve", "--model", "smollm2-135m", "--index", index, "--port", str(port),
           "--workers", str(workers), "--queue", str(queue), "--timeout", str(timeout),
           "--option", "k=3", "--option", "max_new_tokens=12", "--option", "max_steps=2", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited: " + proc.stderr.read())
        try:
            if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("server did not start")


@pytest.fixture(scope="module")
def server(small_index):
    proc, url = start_server(small_index, workers=1, queue=1)
    yield url, proc
    proc.terminate()
    proc.wait(20)

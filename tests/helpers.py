"""Helpers shared by the tests (importable because pytest puts tests/ on sys.path)."""

import atexit
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time

import httpx
import pytest

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


def shared_path(*parts):
    """A file of ../shared/data (real development data; never copied into the repo)."""
    p = os.path.abspath(os.path.join(SHARED, *parts))
    if not os.path.exists(p):
        pytest.skip(f"shared data not found: {p}")
    return p

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def fixture_path(name):
    """A small dataset of our own in an official layout (tests/fixtures/README.md)."""
    return os.path.join(FIXTURES, name)


HOTPOT = fixture_path("hotpotqa_mini.official.json")
#: One CoT run that the sharded runs (``--shard i/n`` + ``merge``, and ``--ray``) must reproduce row for row
#: (``whole_cot_run`` in tests/eval/conftest.py). One thread, so every run compared sums its floats in one order.
COT_ARGS = ["eval", "--model", "smollm2-135m", "--data", HOTPOT, "--limit", "4", "--method", "cot",
            "--option", "max_new_tokens=16", "--threads", "1"]


#: ``seakr`` as a user runs it: a fresh process, so each command's checks run as they do from a shell.
SEAKR_CLI = [sys.executable, "-m", "seakr.cli"]


def run_cli(*args, text: bool = True, timeout: float = 600, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """``seakr ARGS`` in a fresh process, its output captured, offline (no hub lookup); ``env`` adds to ours."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    return subprocess.run([*SEAKR_CLI, *args], capture_output=True, text=text, timeout=timeout, env=env, **kw)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _remove(path):
    with contextlib.suppress(OSError):
        os.unlink(path)


def start_server(index, workers=1, queue=1, timeout=120, extra=(), env=None):
    port = free_port()
    # one demonstration unless a request asks for more: short prompts (the schema fuzz: 72 s to 57 s on an AVX2 CPU)
    cmd = [*SEAKR_CLI, "serve", "--model", "smollm2-135m", "--index", index, "--port", str(port),
           "--workers", str(workers), "--queue", str(queue), "--timeout", str(timeout),
           "--option", "k=3", "--option", "max_new_tokens=12", "--option", "max_steps=2", "--option", "n_shot=1", *extra]
    # stderr goes to a file: a pipe nobody reads would block a chatty server once it fills
    log = tempfile.NamedTemporaryFile("w+", prefix="seakr-serve-", suffix=".log", delete=False)
    atexit.register(_remove, log.name)  # kept for the test to read while the server runs; not left in /tmp
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True, env=env)
    proc.log_path = log.name
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited: " + open(log.name).read())
        try:
            if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("server did not start")


@contextlib.contextmanager
def serving(index, **kw):
    """A ``seakr serve`` process (see :func:`start_server`) for the ``with`` block: ``(proc, url)``, stopped after."""
    proc, url = start_server(index, **kw)
    try:
        yield proc, url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:  # a server stuck in a model call: do not leave it on the two cores
            proc.kill()
            proc.wait(20)


def tiny_qwen(tok, tie: bool = False):
    """A tiny random Qwen2 over ``tok``: q/k/v projections with (random, non-zero) biases, so a kernel
    that drops a bias is caught; ``tie`` shares the head with the input embedding."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, tie_word_embeddings=tie)
    m = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # the init leaves biases at zero, which would hide a dropped bias
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear) and mod.bias is not None:
                mod.bias.normal_(0, 0.5)
    return m


def float32_logprobs(lm, ids: list[int]):
    """Next-token log-probs by the float32 product of the model's own last hidden state with its float32 head's
    rows (transformers' forward, on the model's device): what ``exact_logits`` with every logit recomputed gives."""
    import torch

    dev = next(lm.model.parameters()).device
    with torch.inference_mode():
        h = lm.model.model(input_ids=torch.tensor([ids], device=dev)).last_hidden_state[0, -1]
    return torch.log_softmax(lm.model.lm_head.rows.float() @ h.float(), -1).cpu()


#: Values of every JSON kind, to put in place of a field of a valid record (the readers' shape tests).
ODD_VALUES = [None, 5, 1.5, True, "x", "", [], {}, [None], [5], ["x"], [[]], [{}], {"a": 1}, [["T"]], [["T", None]]]


def reshaped(rec):
    """Every (path, copy of ``rec`` with that field replaced by one of ODD_VALUES)."""
    import copy

    def paths(o, pre=()):
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in items:
            yield pre + (k,)
            yield from paths(v, pre + (k,))

    for path in list(paths(rec)):
        for value in ODD_VALUES:
            out = copy.deepcopy(rec)
            cur = out
            for k in path[:-1]:
                cur = cur[k]
            cur[path[-1]] = value
            yield (path, value), out


def write_records(f, kind: str, rec) -> None:
    """``rec`` as a one-record JSON list ("list"), a JSON line ("lines") or the file's one object ("object")."""
    import json

    f.write_text(json.dumps([rec]) if kind == "list" else json.dumps(rec) + "\n" if kind == "lines" else json.dumps(rec))


#: Options that keep the packaged test model's answers to seconds (the test server starts with them too), and a
#: fixture question whose chain retrieves: the doors' answers are compared on it.
FAST = {"k": 3, "max_new_tokens": 12, "max_steps": 2, "n_shot": 1}
QUESTION = "Who wrote the novel on which the film Jaws was based?"


def same_decisions(a: dict, b: dict) -> bool:
    """Two answers' decisions (:func:`seakr.methods.trace.decisions`) equal but for the wall-clock seconds."""
    import json

    def strip(d):
        d = json.loads(json.dumps(d))
        d.get("totals", {}).pop("seconds", None)
        return d
    return strip(a) == strip(b)


def stalled_adder(index) -> subprocess.Popen:
    """A process adding to ``index`` that holds the writer's lock for a minute (it has said "adding" once its first
    line can be read): what a second writer or a reader meets mid-add. Kill it when done."""
    code = ("import time; from seakr.search import Passage\n"
            "from seakr.search.tantivy_engine import TantivyEngine\n"
            "def slow():\n    print('adding', flush=True); time.sleep(60)\n"
            "    yield Passage('b', 'Danube', 'The Danube flows through Vienna.')\n"
            f"TantivyEngine({str(index)!r}).add(slow())")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def pooled_recall_at_5(data: str, filler: str, folder) -> float:
    """recall@5 of any gold paragraph, the question as the query, over a dataset's pooled paragraphs plus a filler
    corpus indexed into ``folder``."""
    from seakr.eval.datasets import load_dataset
    from seakr.search.corpora import read_corpus
    from seakr.search.tantivy_engine import TantivyEngine

    e = TantivyEngine.build((p for f in (data, filler) for p in read_corpus(f)), folder)
    qs = load_dataset(data)
    return sum(any(h.title in set(q.supporting_titles) for h in e.search(q.question, 5)) for q in qs) / len(qs)

"""The OpenAI-compatible door, driven by the real ``openai`` client against a live ``seakr serve`` (the packaged test
model, a real index): it answers as ``/v1/answer`` and ``seakr ask`` do, streams the decisions as they are made,
and says what it refuses in OpenAI's error shape, which the client turns into its own exceptions."""

import json
import time

import httpx
import openai
import pytest

from helpers import run_cli, serving
from seakr.methods.trace import decisions

pytestmark = pytest.mark.slow

QUESTION = "Who wrote the novel on which the film Jaws was based?"
#: the options the test server starts with (helpers.start_server), given to `seakr ask` for the same answer
SERVER_OPTIONS = ("k=3", "max_new_tokens=12", "max_steps=2", "n_shot=1")


def client(url, key="none"):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=120)


def ask(url, **kw):
    body = {"model": "smollm2-135m/seakr", "messages": [{"role": "user", "content": QUESTION}], **kw}
    return client(url).chat.completions.create(**body)


def without_seconds(d: dict) -> dict:
    d = json.loads(json.dumps(d))
    d["totals"].pop("seconds")
    return d


def test_models_lists_every_method_of_the_loaded_model(server):
    url, _ = server
    ids = [m.id for m in client(url).models.list()]
    assert ids[0] == "smollm2-135m/seakr" and {"smollm2-135m/ircot", "smollm2-135m/cot"} <= set(ids)
    assert client(url).models.retrieve("smollm2-135m/ircot").id == "smollm2-135m/ircot"


def test_the_client_gets_the_answer_and_decisions_that_seakr_ask_gives(server, small_index):
    url, _ = server
    r = ask(url)
    ext = r.model_extra["seakr"]
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == "stop" and r.model == "smollm2-135m/seakr"
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens == ext["totals"]["prompt_tokens"]
    assert ext["steps"] and ext["final"]["answer"] == r.choices[0].message.content
    # the same question through /v1/answer, and through the command line in its own process
    own = httpx.post(url + "/v1/answer", json={"question": QUESTION}, timeout=120).json()
    cli = run_cli("ask", QUESTION, "--index", small_index, "--model", "smollm2-135m", "--json",
                  *[a for o in SERVER_OPTIONS for a in ("--option", o)])
    assert cli.returncode == 0, cli.stderr
    asked = json.loads(cli.stdout)
    assert r.choices[0].message.content == own["answer"] == asked["answer"]
    assert without_seconds(ext | {"method": None}) == without_seconds(decisions(own["trace"]) | {"method": None})
    assert without_seconds(decisions(asked["trace"])) == without_seconds(decisions(own["trace"]))


def test_a_stream_sends_each_decision_as_it_is_made_then_the_answer_and_usage(server):
    url, _ = server
    whole = ask(url).choices[0].message.content
    chunks = list(ask(url, stream=True, stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    events = [c.model_extra["seakr"]["event"] for c in chunks if "event" in (c.model_extra.get("seakr") or {})]
    kinds = [e["type"] for e in events]
    assert "model_call" in kinds and "decision" in kinds and "step" in kinds
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    final = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert final[-1].model_extra["seakr"]["final"]["answer"] == whole  # the decisions ride with the answer
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_method_options_ride_as_extra_fields_and_an_unknown_one_is_named(server):
    url, _ = server
    r = ask(url, model="smollm2-135m/ircot", extra_body={"max_steps": 1})
    assert r.model == "smollm2-135m/ircot" and r.model_extra["seakr"]["method"] == "ircot"
    assert len(r.model_extra["seakr"]["steps"]) == 1
    with pytest.raises(openai.UnprocessableEntityError) as e:
        ask(url, extra_body={"max_step": 1})
    assert "max_step" in e.value.message and "max_steps" in e.value.message  # the nearest valid name
    assert e.value.body["type"] == "invalid_request_error" and e.value.body["param"] == "max_step"


@pytest.mark.parametrize("field, said", [({"max_tokens": 5}, "max_tokens"), ({"n": 2}, "n"),
                                         ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
                                         ({"temperature": -1}, "temperature"), ({"k": 100}, "at most 64"),
                                         ({"k": 60, "n_candidates": 10}, "max_rows")])
def test_what_cannot_be_honoured_is_refused_by_name_before_any_work(server, field, said):
    url, _ = server
    t = time.perf_counter()
    with pytest.raises(openai.UnprocessableEntityError) as e:
        ask(url, **{k: v for k, v in field.items() if k in ("max_tokens", "n", "tools", "temperature")},
            extra_body={k: v for k, v in field.items() if k not in ("max_tokens", "n", "tools", "temperature")})
    assert said in e.value.message
    assert time.perf_counter() - t < 5  # refused before the model ran


def test_earlier_messages_are_noted_and_the_last_must_be_the_users(server):
    url, _ = server
    history = [{"role": "system", "content": "Be brief."}, {"role": "assistant", "content": "Ask away."}]
    r = client(url).chat.completions.create(model="smollm2-135m/cot", messages=[
        *history, {"role": "user", "content": [{"type": "text", "text": QUESTION}]}])
    assert "2 earlier message(s) not read" in r.model_extra["seakr"]["notes"][0]
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client(url).chat.completions.create(model="smollm2-135m/cot", messages=history)
    assert "last message must be the user's question" in e.value.message


def test_an_unknown_model_is_not_found_with_the_ids_served(server):
    url, _ = server
    with pytest.raises(openai.NotFoundError) as e:
        ask(url, model="gpt-4o")
    assert "smollm2-135m/seakr" in e.value.message


def test_a_stream_the_client_drops_is_cancelled_and_frees_its_slot(server):
    url, _ = server
    before = httpx.get(url + "/v1/health").json()["cancelled"]
    stream = ask(url, stream=True)
    next(iter(stream))  # the role chunk: the work has started
    stream.close()
    deadline = time.time() + 60
    while time.time() < deadline:
        h = httpx.get(url + "/v1/health").json()
        if h["cancelled"] > before and h["inflight"] == 0:
            break
        time.sleep(0.2)
    assert h["cancelled"] > before and h["inflight"] == 0


def test_a_token_is_needed_and_the_client_sends_it_as_its_api_key(small_index):
    with serving(small_index, extra=("--token", "s3cret", "--method", "cot")) as (_, url):
        with pytest.raises(openai.AuthenticationError) as e:
            client(url, key="wrong").models.list()
        assert "bearer token" in e.value.message
        r = client(url, key="s3cret").chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": QUESTION}])
        assert r.model == "smollm2-135m/cot" and r.choices[0].message.content

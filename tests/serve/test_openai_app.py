"""The OpenAI-compatible routes in process (a scripted model), through the real ``openai`` client: a full server
answers 429 as ``/v1/answer`` does, and a failing index comes back as the client's own errors, streamed or not."""

import openai
import pytest
from fastapi.testclient import TestClient

from scripted import Reply, ScriptedLM
from seakr.search.base import SearchError
from seakr.serve.app import AnswerService, create_app


class Failing:
    def search(self, query, k=3):
        raise SearchError("/srv/idx: search failed, the index looks damaged")


def client(engine=None):
    lm = ScriptedLM(lambda v: Reply("So the answer is Paris."))
    svc = AnswerService(lm, engine, method="ircot", defaults={"max_steps": 1})
    http = TestClient(create_app(svc), base_url="http://127.0.0.1:8000")
    return svc, openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="x", http_client=http, max_retries=0)


def ask(c, **kw):
    return c.chat.completions.create(model="scripted/ircot", messages=[{"role": "user", "content": "Capital?"}], **kw)


def test_a_full_server_answers_429_which_the_client_raises_as_rate_limited():
    svc, c = client()
    svc.inflight = svc.capacity  # every slot taken
    with pytest.raises(openai.RateLimitError):
        ask(c, extra_body={"passages": ["Paris is the capital of France."]})
    svc.inflight = 0
    assert ask(c, extra_body={"passages": ["Paris is the capital of France."]}).choices[0].message.content == "Paris"


def test_a_failing_index_is_the_clients_error_and_names_no_server_path():
    _, c = client(Failing())
    with pytest.raises(openai.InternalServerError) as e:
        ask(c)
    assert e.value.status_code == 503 and "/srv/idx" not in e.value.message
    with pytest.raises(openai.APIError) as e:  # streamed: one error event, which the client raises
        list(ask(c, stream=True))
    assert "search index" in e.value.message and "/srv/idx" not in e.value.message

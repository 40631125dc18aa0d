"""The service's guard in process (a scripted model, no server): token, body limit with and without
a content-length, the budget, NaN. The same checks run against a real server in test_service.py."""

from fastapi.testclient import TestClient

from scripted import Reply, ScriptedLM
from seakr.serve.app import AnswerService, ServiceLimits, create_app

AUTH = {"authorization": "Bearer t0k", "content-type": "application/json"}


def client(**limits):
    svc = AnswerService(ScriptedLM(lambda v: Reply("So the answer is Paris.")), None, method="cot",
                        limits=ServiceLimits(**{"token": "t0k", "max_body": 2000, **limits}))
    return TestClient(create_app(svc))


def test_token_body_budget_and_nan():
    c = client()
    assert c.get("/v1/health").status_code == 200
    assert c.post("/v1/answer", json={"question": "q?"}).status_code == 401
    ok = c.post("/v1/answer", json={"question": "Capital of France?"}, headers=AUTH)
    assert ok.status_code == 200 and ok.json()["answer"] == "Paris"

    def chunks():  # chunked: no content-length to refuse up front
        for _ in range(10):
            yield b"x" * 500

    assert c.post("/v1/answer", content=chunks(), headers=AUTH).status_code == 413
    assert c.post("/v1/answer", content=b"x" * 3000, headers=AUTH).status_code == 413
    big = c.post("/v1/answer", json={"question": "q", "method": "seakr", "options": {"k": 60, "n_candidates": 10}},
                 headers=AUTH)
    assert big.status_code == 422 and "max_rows" in big.json()["detail"]
    nan = c.post("/v1/answer", content=b'{"question": "q", "options": {"temperature": NaN}}', headers=AUTH)
    assert nan.status_code == 422

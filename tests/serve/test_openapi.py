"""The service's OpenAPI document: every route once, with no warning in the server's log."""

import warnings

from fastapi.testclient import TestClient

from scripted import Reply, ScriptedLM
from seakr.serve.app import AnswerService, create_app


def test_the_schema_has_each_operation_once_and_warns_of_nothing():
    app = create_app(AnswerService(ScriptedLM(lambda v: Reply("x")), None, method="cot"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a duplicate operation id was a UserWarning in every server's log
        spec = TestClient(app).get("/openapi.json").json()
    ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    assert {"/v1/answer", "/v1/chat/completions", "/v1/models", "/v1/health"} <= set(spec["paths"])
    assert TestClient(app).head("/v1/health").status_code == 200

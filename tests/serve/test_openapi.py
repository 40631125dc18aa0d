"""The service's OpenAPI document: every route once, with no warning in the server's log."""

import warnings

import pytest

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


def test_the_schema_documents_each_methods_options_as_its_config_takes_them():
    """A request's options were a bare table of scalars in the document; each method's options are its config
    schema's fields, with their bounds in JSON Schema's words, so a client (or a fuzzer) reads what is valid."""
    import jsonschema
    from seakr.methods import METHODS

    spec = TestClient(create_app(AnswerService(ScriptedLM(lambda v: Reply("x")), None))).get("/openapi.json").json()
    options = spec["components"]["schemas"]["AnswerRequest"]["properties"]["options"]
    each = {o["title"].removesuffix(" options"): o for o in options["anyOf"] if o.get("type") == "object"}
    assert set(each) == set(METHODS)
    seakr = each["seakr"]
    assert seakr["additionalProperties"] is False and seakr["properties"]["k"]["minimum"] == 0
    assert seakr["properties"]["top_p"] == {**seakr["properties"]["top_p"], "exclusiveMinimum": 0, "maximum": 1}
    def keys(node):
        if isinstance(node, dict):
            return set(node) | {k for v in node.values() for k in keys(v)}
        return {k for v in node for k in keys(v)} if isinstance(node, list) else set()

    assert not keys(options) & {"ge", "gt", "le", "lt"}  # pydantic's own words, which no JSON Schema reader knows
    jsonschema.validate({"k": 4, "gate": "step"}, seakr)
    for bad in ({"k": -1}, {"tempature": 1.0}, {"top_p": 0}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, seakr)


def test_bounds_are_in_json_schemas_words_and_names_stay():
    """pydantic leaves ge/gt/le/lt on a converting number type; they become minimum etc. in number schemas only,
    so an object whose properties were named like them would keep its names."""
    from seakr.serve.schema import _standard

    node = {"type": "object", "properties": {"ge": {"type": "integer", "ge": 1}, "lt": {"type": "string"}}}
    assert _standard(node) == {"type": "object", "properties": {"ge": {"type": "integer", "minimum": 1},
                                                                "lt": {"type": "string"}}}


def test_a_request_leaves_its_prompt_room_in_the_servers_window():
    """Every request is held to the model's window where the server knows it, as the server's own defaults are."""
    from seakr.serve.schema import Door, OptionRefused

    door = Door("cot", {}, context=128)
    assert door.settle("cot", {"max_new_tokens": 127}).max_new_tokens == 127
    with pytest.raises(OptionRefused, match="leaves no room for a prompt in the model's 128-token context") as e:
        door.settle("cot", {"answer_tokens": 128})
    assert e.value.field == "answer_tokens"
    with pytest.raises(OptionRefused, match="max_new_tokens: 100 leaves no room"):
        Door("cot", {}, context=64)

"""A prompt set of one's own (``--prompt-set FILE.json``): read field by field, as the model will see it."""

import json

import pytest

from seakr.prompts import FAMILIES, PromptSet

GOOD = {"question": "Which river flows through the capital of Austria?", "steps": ["The capital of Austria is Vienna",
        "The Danube flows through Vienna"], "answer": "the Danube"}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_packaged_sets_load(family):
    ps = PromptSet.load(family)
    assert ps.demos and all(d.question and d.answer for d in ps.demos)


def test_a_set_of_ones_own_loads_and_renders(tmp_path):
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({"name": "mine", "demos": [GOOD, {**GOOD, "steps": []}]}))
    ps = PromptSet.load(str(f))
    assert ps.name == "mine" and ps.demos[0].steps == GOOD["steps"]
    assert ps.demos[0].render().endswith("The Danube flows through Vienna. So the answer is the Danube.")


@pytest.mark.parametrize("demo, needle", [
    ({**GOOD, "steps": "The capital is Vienna"}, "demo 0: field 'steps' must be a list"),  # was split into letters
    ({**GOOD, "steps": ["a", ""]}, "field 'steps' must be a list of non-empty sentences"),
    ({**GOOD, "steps": ["Vienna is the capital. The Danube flows"]}, "a step holds a stop string"),
    ({**GOOD, "steps": ["Vienna\nis the capital"]}, "a step holds a stop string"),
    ({**GOOD, "question": None}, "demo 0: field 'question' must be non-empty text, got None"),  # rendered "None"
    ({**GOOD, "answer": 5}, "field 'answer' must be non-empty text, got 5"),
    ({**GOOD, "answer": "a\nb"}, "field 'answer' holds a line break"),
    ({**GOOD, "type": 3}, "field 'type' must be text"),
    ("a demo", "demo 0: expected an object with question, steps and answer, got str"),
])
def test_a_malformed_demonstration_is_named_with_its_field(tmp_path, demo, needle):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"demos": [demo]}))
    with pytest.raises(ValueError, match="bad.json: ") as e:
        PromptSet.load(str(f))
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("body, needle", [("[1, 2]", "expected an object with a list 'demos'"),
                                          ('{"demos": {}}', "expected an object with a list 'demos'"),
                                          ('{"name": 5, "demos": []}', "field 'name' must be text"),
                                          ("{", "malformed prompt set")])
def test_a_malformed_set_is_named(tmp_path, body, needle):
    f = tmp_path / "bad.json"
    f.write_text(body)
    with pytest.raises(ValueError, match="bad.json: ") as e:
        PromptSet.load(str(f))
    assert needle in str(e.value)

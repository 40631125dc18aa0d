"""The one schema adapter: a refusal names the field whether its value came by keyword or by position, and a
door that asks for its own error gets it with that field's name."""

from __future__ import annotations

import pytest
from pydantic import Field
from typing import Annotated

from seakr.common.schema import Positive, SchemaError, schema


class FieldRefused(ValueError):
    def __init__(self, field: str, text: str):
        super().__init__(f"{field} -> {text}")
        self.field = field


@schema("key")
class Plain:
    limit: Positive = 1
    share: Annotated[float, Field(ge=0, le=1)] = 0.5


@schema("part.", field_error=FieldRefused)
class Part:
    layer: Positive = 1
    name: str = "x"


@pytest.mark.parametrize("args, kwargs", [((0,), {}), ((), {"limit": 0})])
def test_a_value_by_position_or_keyword_is_named_by_its_field(args, kwargs):
    with pytest.raises(SchemaError, match=r"^key limit: "):
        Plain(*args, **kwargs)


def test_the_second_positional_argument_is_named_too():
    with pytest.raises(SchemaError, match=r"^key share: "):
        Plain(1, 2.0)


@pytest.mark.parametrize("args, kwargs", [((0,), {}), ((), {"layer": 0}), ((1, 5), {})])
def test_a_door_with_its_own_error_gets_the_field_name(args, kwargs):
    with pytest.raises(FieldRefused) as e:
        Part(*args, **kwargs)
    assert e.value.field == ("part.layer" if not args or args[0] == 0 else "part.name")


def test_an_unknown_name_is_no_field_so_the_door_gets_the_schema_error():
    with pytest.raises(SchemaError, match="lyer"):
        Part(lyer=2)

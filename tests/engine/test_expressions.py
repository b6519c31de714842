"""Tests for tether.engine.expressions: the JMESPath-based expression language."""

from __future__ import annotations

from typing import Any

import pytest

from tether.engine.expressions import (
    compile_check,
    condition_holds,
    evaluate,
    is_truthy,
    placeholders,
    render,
)
from tether.engine.workflow import EdgeCondition
from tether.errors import InvalidInput

CONTEXT: dict[str, Any] = {
    "variables": {"prompt": "world", "count": 3, "tags": ["a", "b"], "empty": "", "zero": 0, "flag": True},
    "inputs": {"payload": {"k": "v"}},
    "nodes": {"ask": {"answers": {"q1": "blue"}}, "gate": {"status": "approved", "score": 0.5}},
}


# --- evaluate -----------------------------------------------------------------------------------


def test_evaluate_paths_and_functions() -> None:
    assert evaluate("variables.prompt", CONTEXT) == "world"
    assert evaluate("nodes.ask.answers.q1", CONTEXT) == "blue"
    assert evaluate("length(variables.tags)", CONTEXT) == 2
    assert evaluate("inputs.payload", CONTEXT) == {"k": "v"}
    assert evaluate("variables.missing", CONTEXT) is None
    assert evaluate("variables.count > `2`", CONTEXT) is True


def test_evaluate_parse_error_quotes_the_expression() -> None:
    with pytest.raises(InvalidInput) as info:
        evaluate("variables.[", CONTEXT)
    assert "'variables.['" in info.value.message
    assert "\n" not in info.value.message


def test_evaluate_runtime_error_quotes_the_expression() -> None:
    with pytest.raises(InvalidInput, match=r"expression 'length\(variables.count\)' failed"):
        evaluate("length(variables.count)", CONTEXT)
    with pytest.raises(InvalidInput, match="'nope\\(variables\\)'"):
        evaluate("nope(variables)", CONTEXT)


@pytest.mark.parametrize("expression", ["", "   "])
def test_evaluate_rejects_empty(expression: str) -> None:
    with pytest.raises(InvalidInput, match="non-empty"):
        evaluate(expression, CONTEXT)


# --- compile_check ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    ["variables.prompt", "length(variables.tags)", "not_null(variables.a, variables.b)", "merge(inputs, variables)"],
)
def test_compile_check_accepts(expression: str) -> None:
    compile_check(expression)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("a[", "'a['"),
        ("lenght(a)", "unknown function lenght()"),
        ("length(a, b)", "length() takes 1 argument(s), got 2"),
        ("not_null()", "not_null() takes at least 1 argument(s), got 0"),
        ("a.b | sort_by(@, &c) | nope(@)", "unknown function nope()"),
        ("", "non-empty"),
    ],
)
def test_compile_check_rejects(expression: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        compile_check(expression)
    assert reason in info.value.message
    assert repr(expression) in info.value.message


# --- render -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ length(variables.prompt) }}", 5),
        ("{{variables.tags}}", ["a", "b"]),
        ("  {{ inputs.payload }} ", {"k": "v"}),
        ("{{ variables.missing }}", None),
        ("{{ variables.flag }}", True),
    ],
)
def test_single_placeholder_keeps_the_type(template: str, expected: Any) -> None:
    assert render(template, CONTEXT) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Hello, {{ variables.prompt }}!", "Hello, world!"),
        ("n={{ variables.count }}", "n=3"),
        ("{{ variables.prompt }}{{ variables.prompt }}", "worldworld"),
        ("p={{ inputs.payload }}", 'p={"k":"v"}'),
        ("t={{ variables.tags }}", 't=["a","b"]'),
        ("m={{ variables.missing }} f={{ variables.flag }}", "m=null f=true"),
        ("no placeholders", "no placeholders"),
        ("{{ {a: variables.prompt} }} tail", '{"a":"world"} tail'),
    ],
)
def test_interpolation(template: str, expected: str) -> None:
    assert render(template, CONTEXT) == expected


def test_render_is_recursive_and_leaves_non_strings() -> None:
    template = {
        "greeting": "Hello, {{ variables.prompt }}!",
        "length": "{{ length(variables.prompt) }}",
        "nested": [{"color": "{{ nodes.ask.answers.q1 }}"}, 7, None, False],
        "{{ keys.are.literal }}": 1.5,
    }
    assert render(template, CONTEXT) == {
        "greeting": "Hello, world!",
        "length": 5,
        "nested": [{"color": "blue"}, 7, None, False],
        "{{ keys.are.literal }}": 1.5,
    }
    assert template["length"] == "{{ length(variables.prompt) }}"


def test_render_error_quotes_the_expression() -> None:
    with pytest.raises(InvalidInput, match="'variables.\\['"):
        render({"x": ["a {{ variables.[ }} b"]}, CONTEXT)


def test_placeholders_finds_every_expression() -> None:
    template = {"a": "x {{ one }} y {{two}}", "b": ["{{ three }}", 4], "c": None}
    assert list(placeholders(template)) == ["one", "two", "three"]


# --- conditions --------------------------------------------------------------------------------


def _holds(type_: str, left: str | None = None, right: Any = None, expression: str | None = None) -> bool:
    condition = EdgeCondition.model_validate(
        {
            "type": type_,
            **({"left": left} if left is not None else {}),
            "right": right,
            **({"expression": expression} if expression is not None else {}),
        }
    )
    return condition_holds(condition, CONTEXT)


def test_expression_condition_uses_truthiness() -> None:
    assert _holds("expression", expression="nodes.gate.status == 'approved'")
    assert not _holds("expression", expression="variables.zero")  # 0 is falsy here, unlike JMESPath
    assert not _holds("expression", expression="variables.missing")
    assert _holds("expression", expression="variables.tags")


def test_equals_and_not_equals() -> None:
    assert _holds("equals", "nodes.gate.status", "approved")
    assert not _holds("equals", "nodes.gate.status", "rejected")
    assert _holds("equals", "variables.count", 3.0)
    assert _holds("equals", "variables.tags", ["a", "b"])
    assert not _holds("equals", "variables.flag", 1)  # JSON true is not 1
    assert _holds("equals", "variables.missing", None)
    assert _holds("notEquals", "nodes.gate.status", "rejected")
    assert not _holds("notEquals", "variables.count", 3)


def test_contains() -> None:
    assert _holds("contains", "variables.prompt", "orl")
    assert not _holds("contains", "variables.prompt", "xyz")
    assert _holds("contains", "variables.tags", "b")
    assert not _holds("contains", "variables.tags", "c")
    assert _holds("contains", "inputs.payload", "k")
    assert not _holds("contains", "variables.count", 3)
    assert not _holds("contains", "variables.missing", "x")


def test_regex() -> None:
    assert _holds("regex", "nodes.gate.status", "^appr")
    assert not _holds("regex", "nodes.gate.status", "^rej")
    assert _holds("regex", "variables.count", r"^\d$")
    assert not _holds("regex", "variables.missing", ".*")
    with pytest.raises(InvalidInput, match="invalid regular expression"):
        _holds("regex", "nodes.gate.status", "(")


@pytest.mark.parametrize(
    ("left", "truthy"),
    [
        ("variables.prompt", True),
        ("variables.empty", False),
        ("variables.zero", False),
        ("variables.count", True),
        ("variables.tags", True),
        ("variables.missing", False),
        ("variables.flag", True),
        ("`false`", False),
        ("`[]`", False),
        ("`{}`", False),
        ("nodes.gate.score", True),
    ],
)
def test_truthy_and_falsy(left: str, truthy: bool) -> None:
    assert _holds("truthy", left, right="ignored") is truthy
    assert _holds("falsy", left) is not truthy


def test_condition_without_left_is_refused() -> None:
    with pytest.raises(InvalidInput, match="has no 'left'"):
        _holds("equals", right=1)
    with pytest.raises(InvalidInput, match="has no 'expression'"):
        _holds("expression")


def test_condition_left_error_quotes_the_expression() -> None:
    with pytest.raises(InvalidInput, match="'nodes.\\['"):
        _holds("truthy", "nodes.[")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        (False, False),
        (0, False),
        (0.0, False),
        (float("nan"), False),
        ("", False),
        ([], False),
        ({}, False),
        (True, True),
        (-1, True),
        ("0", True),
        ([0], True),
        ({"a": None}, True),
    ],
)
def test_is_truthy(value: Any, expected: bool) -> None:
    assert is_truthy(value) is expected

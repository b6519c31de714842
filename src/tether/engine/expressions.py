"""The safe expression language of ports, edge conditions and ``vendor.tether.template``.

Workflow authors write JMESPath, never Python: an expression can read and reshape data
but cannot call out, loop forever or touch the host. Everything here goes through the
``jmespath`` library; nothing is ever handed to ``eval``.

The context
-----------
The engine evaluates every expression of a node against one mapping::

    {
        "variables": {...},   # the run variables (declared defaults overlaid with inputs)
        "inputs":    {...},   # this node's resolved input ports, by port name
        "nodes":     {        # outputs of the nodes that have completed so far
            "<nodeId>": {...that node's outputs, by output key...},
        },
    }

so ``variables.prompt``, ``inputs.payload`` and ``nodes.ask.answers.q1`` are typical
expressions. Edge conditions see the same shape, with ``inputs`` empty.

Templates
---------
:func:`render` walks dicts and lists and replaces ``{{ expr }}`` placeholders inside
strings. A string that is exactly one placeholder yields the raw value, so
``"{{ length(variables.prompt) }}"`` renders to an ``int``; anything else is text
interpolation. An expression cannot itself contain ``}}``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import jmespath  # type: ignore[import-untyped]
from jmespath import exceptions as jmespath_errors
from jmespath.functions import Functions  # type: ignore[import-untyped]

from tether.errors import InvalidInput

if TYPE_CHECKING:
    from tether.engine.workflow import EdgeCondition

__all__ = [
    "compile_check",
    "condition_holds",
    "evaluate",
    "is_truthy",
    "placeholders",
    "render",
]

# Bounded so a flood of distinct expressions (templates built per request) cannot grow memory.
_CACHE_SIZE = 1024

_PLACEHOLDER = re.compile(r"\{\{\s*(.+?)\s*\}\}", re.DOTALL)
_SOLE_PLACEHOLDER = re.compile(r"\s*\{\{\s*(.+?)\s*\}\}\s*", re.DOTALL)

# The built-in function table, used to reject unknown functions at load time rather
# than half-way through a run (jmespath itself only notices when it calls them).
_FUNCTIONS: Mapping[str, Mapping[str, Any]] = Functions().FUNCTION_TABLE


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile(expression: str) -> Any:
    """Parse once per distinct expression; the engine evaluates the same ones on every run."""
    try:
        return jmespath.compile(expression)
    except jmespath_errors.JMESPathError as exc:
        raise InvalidInput(f"invalid expression {expression!r}: {_reason(exc)}") from exc


def _reason(exc: Exception) -> str:
    """jmespath messages span several lines (with a caret); keep the first for one-line errors."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    first = first.removeprefix("Invalid jmespath expression: ").removesuffix(":").removesuffix(", for expression")
    return first.strip() or type(exc).__name__


def _check_functions(node: Mapping[str, Any], expression: str) -> None:
    """Walk the parsed tree so misspelt functions and wrong arity fail at validation time."""
    if node.get("type") == "function_expression":
        name = node.get("value")
        entry = _FUNCTIONS.get(name) if isinstance(name, str) else None
        if entry is None:
            raise InvalidInput(f"invalid expression {expression!r}: unknown function {name}()")
        signature = entry["signature"]
        given = len(node.get("children", ()))
        variadic = bool(signature) and bool(signature[-1].get("variadic"))
        if (variadic and given < len(signature)) or (not variadic and given != len(signature)):
            expected = f"at least {len(signature)}" if variadic else str(len(signature))
            raise InvalidInput(f"invalid expression {expression!r}: {name}() takes {expected} argument(s), got {given}")
    for child in node.get("children", ()):
        if isinstance(child, Mapping):
            _check_functions(child, expression)


def compile_check(expression: str) -> None:
    """Reject an expression that could never evaluate, so a bad workflow fails at load.

    Parameters
    ----------
    expression:
        A JMESPath expression.

    Raises
    ------
    InvalidInput
        When it does not parse, or calls an unknown function or with the wrong arity.
        The message quotes the expression.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidInput(f"invalid expression {expression!r}: must be a non-empty string")
    parsed = _compile(expression)
    _check_functions(parsed.parsed, expression)


def evaluate(expression: str, context: Mapping[str, Any]) -> Any:
    """Evaluate one expression against the engine's context (see the module docstring).

    Parameters
    ----------
    expression:
        A JMESPath expression.
    context:
        The mapping the expression reads from.

    Returns
    -------
    The JSON value the expression selects; ``None`` when the path does not exist.

    Raises
    ------
    InvalidInput
        When the expression does not parse or fails at evaluation (for example a
        function given a value of the wrong type). The message quotes the expression.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidInput(f"invalid expression {expression!r}: must be a non-empty string")
    parsed = _compile(expression)
    try:
        return parsed.search(context)
    except jmespath_errors.JMESPathError as exc:
        raise InvalidInput(f"expression {expression!r} failed: {_reason(exc)}") from exc


def placeholders(template: Any) -> Iterator[str]:
    """Yield every ``{{ expr }}`` expression in a template, so callers can compile-check them early."""
    if isinstance(template, str):
        for match in _PLACEHOLDER.finditer(template):
            yield match.group(1)
    elif isinstance(template, Mapping):
        for value in template.values():
            yield from placeholders(value)
    elif isinstance(template, list):
        for item in template:
            yield from placeholders(item)


def render(template: Any, context: Mapping[str, Any]) -> Any:
    """Fill a template's ``{{ expr }}`` placeholders from the context, keeping its shape.

    Parameters
    ----------
    template:
        Any JSON value. Dict values and list items are rendered recursively (keys are not);
        strings have their placeholders replaced; other values are returned unchanged.
    context:
        The mapping expressions read from.

    Returns
    -------
    A new value. A string that is exactly one placeholder becomes the raw evaluated
    value (type preserved); otherwise strings are interpolated, other values as
    compact JSON.

    Raises
    ------
    InvalidInput
        When a placeholder's expression is invalid; the message quotes it.
    """
    if isinstance(template, str):
        return _render_string(template, context)
    if isinstance(template, Mapping):
        return {key: render(value, context) for key, value in template.items()}
    if isinstance(template, list):
        return [render(item, context) for item in template]
    return template


def _render_string(template: str, context: Mapping[str, Any]) -> Any:
    sole = _SOLE_PLACEHOLDER.fullmatch(template)
    if sole is not None and "{{" not in sole.group(1) and "}}" not in sole.group(1):
        return evaluate(sole.group(1), context)
    return _PLACEHOLDER.sub(lambda match: _as_text(evaluate(match.group(1), context)), template)


def _as_text(value: Any) -> str:
    """Strings verbatim, everything else as compact JSON (so ``None`` reads ``null``)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def is_truthy(value: Any) -> bool:
    """JSON truthiness as RFC 0134 uses it: null, false, 0, NaN, "", [] and {} are falsy."""
    if value is None or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, (str, list, tuple, dict)):
        return len(value) > 0
    return True


def _json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON sees it: ``true`` is not ``1``, though ``1`` equals ``1.0``."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left is right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_json_equal(a, b) for a, b in zip(left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    if isinstance(left, (list, dict)) or isinstance(right, (list, dict)):
        return False
    return bool(left == right)


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, str):
        return isinstance(item, str) and item in container
    if isinstance(container, list):
        return any(_json_equal(element, item) for element in container)
    if isinstance(container, dict):
        return isinstance(item, str) and item in container
    return False


def _regex_matches(subject: Any, pattern: Any) -> bool:
    if subject is None:
        return False  # an absent value matches no pattern, not even ".*"
    try:
        return re.search(str(pattern), _as_text(subject)) is not None
    except re.error as exc:
        raise InvalidInput(f"invalid regular expression {pattern!r}: {exc}") from exc


def condition_holds(condition: EdgeCondition, context: Mapping[str, Any]) -> bool:
    """Decide whether an edge's condition lets it fire.

    Parameters
    ----------
    condition:
        The edge's condition. For ``expression`` the ``expression`` is evaluated and its
        truthiness decides. For every other operator ``left`` is an expression
        evaluated against the context and ``right`` a literal JSON value:
        ``equals``/``notEquals`` compare with JSON equality, ``contains`` tests a
        substring (strings) or membership (list items, object keys), ``regex`` searches
        ``right`` as a pattern in ``left`` rendered as text, ``truthy``/``falsy`` test
        ``left`` and ignore ``right``.
    context:
        The engine's expression context.

    Raises
    ------
    InvalidInput
        When the condition lacks the operand its operator needs or an expression fails.
    """
    if condition.type == "expression":
        if condition.expression is None:
            raise InvalidInput("edge condition of type 'expression' has no 'expression'")
        return is_truthy(evaluate(condition.expression, context))
    if condition.left is None:
        raise InvalidInput(f"edge condition of type {condition.type!r} has no 'left'")
    left = evaluate(condition.left, context)
    if condition.type == "equals":
        return _json_equal(left, condition.right)
    if condition.type == "notEquals":
        return not _json_equal(left, condition.right)
    if condition.type == "contains":
        return _contains(left, condition.right)
    if condition.type == "regex":
        return _regex_matches(left, condition.right)
    if condition.type == "truthy":
        return is_truthy(left)
    return not is_truthy(left)  # "falsy"

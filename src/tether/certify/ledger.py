"""What one check of a floor file may conclude, and the row it leaves in the bundle.

A check is a function of a ``Leg``: it asserts with ``leg.expect`` (each call is one
assertion, counted), and ends early by raising one of the outcomes below. Whatever it
raises becomes its row's ``result`` and ``detail``; returning is a pass, and a pass with
no assertion is refused (a witness of nothing). The results are the bundle's five:

- ``executed-pass``: every assertion held;
- ``executed-fail``: one did not (``Failed``, or an unexpected exception);
- ``inapplicable``: the host does not advertise what the file needs (``Inapplicable``);
- ``blocked``: the check could not be run, by something on the checker's side or a
  floor behaviour this host has not built yet (``Blocked``);
- ``skipped``: the operator asked not to run it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NoReturn

if TYPE_CHECKING:
    from tether.certify.session import Session

__all__ = ["Blocked", "Check", "Failed", "Inapplicable", "Leg", "Outcome", "Result", "Row", "run_check"]

Result = Literal["executed-pass", "executed-fail", "skipped", "inapplicable", "blocked"]


class Outcome(Exception):
    """A check ended without passing; the message is the row's reason."""

    result: Result = "executed-fail"


class Failed(Outcome):
    """An assertion did not hold."""


class Inapplicable(Outcome):
    """The host does not advertise what the file exercises."""

    result: Result = "inapplicable"


class Blocked(Outcome):
    """The check could not run (the checker lacks something, or the host has not built the behaviour yet)."""

    result: Result = "blocked"


@dataclass(frozen=True, slots=True)
class Row:
    """One requirement row: ``openwop.floor.<file>``, its scenario file, the result and why."""

    id: str
    scenario: str
    result: Result
    assertions: int
    detail: str | None = None

    def document(self) -> dict[str, object]:
        row: dict[str, object] = {"id": self.id, "scenario": self.scenario, "result": self.result}
        row["assertions"] = self.assertions
        if self.detail is not None:
            row["detail"] = self.detail
        return row


class Leg:
    """What a check asserts with: counts assertions, turns a false one into ``Failed``."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.assertions = 0

    def expect(self, condition: object, what: str) -> None:
        """One assertion: ``what`` is the requirement, said as it must hold."""
        self.assertions += 1
        if not condition:
            raise Failed(what)

    def equal(self, got: object, wanted: object, what: str) -> None:
        self.expect(got == wanted, f"{what}: got {got!r}, wanted {wanted!r}")

    def valid(self, schema: str, document: object, what: str) -> None:
        """``document`` validates the official schema ``schema`` (``v2/capabilities``); blocked without schemas."""
        errors = self.session.schemas_errors(schema, document)
        self.expect(not errors, f"{what} does not validate {schema}: {'; '.join(errors[:3])}")

    def invalid(self, schema: str, document: object, what: str) -> None:
        errors = self.session.schemas_errors(schema, document)
        self.expect(errors, f"{what} validates {schema}, and must not")

    def blocked(self, why: str) -> NoReturn:
        raise Blocked(why)

    def inapplicable(self, why: str) -> NoReturn:
        raise Inapplicable(why)


@dataclass(frozen=True, slots=True)
class Check:
    """One floor file: its scenario name (``v2-run-cancel``), its profile, and the function that checks it."""

    scenario: str
    profile: str
    run: Callable[[Leg], None]

    @property
    def row_id(self) -> str:
        return f"openwop.floor.{self.scenario}"

    @property
    def file(self) -> str:
        """Where the check is: Tether's own replica of the official file, never the file itself."""
        return f"tether-certify/{self.scenario}"


def run_check(check: Check, session: Session) -> Row:
    """Run one check to its row; an unexpected exception is a failure that names it."""
    leg = Leg(session)
    try:
        check.run(leg)
    except Outcome as outcome:
        return Row(check.row_id, check.file, outcome.result, leg.assertions, str(outcome) or type(outcome).__name__)
    except Exception as exc:  # a crash of the check is recorded against the host, with what it was
        return Row(check.row_id, check.file, "executed-fail", leg.assertions, f"{type(exc).__name__}: {exc}")
    if leg.assertions == 0:
        return Row(check.row_id, check.file, "blocked", 0, "the check asserted nothing (a pass must witness something)")
    return Row(check.row_id, check.file, "executed-pass", leg.assertions)

"""The statuses spelt in SQL are the vocabulary of ``tether.types``, so none is new or misspelt.

Every ``.sql`` file of both stores is read: the named queries, and the migrations as the
schema they leave behind (an index a later migration drops is no longer checked). Each
status a statement compares (``status = 'x'``, ``status IN (...)``, ``$1 IN (...)``) is
taken as a run status or a delivery status by the table it belongs to, and then:

- a list of run statuses must be one of the named sets below, each made from
  ``tether.types``: a new status added to TERMINAL makes every list that spells TERMINAL
  out fail until it is added there too;
- every run status must be in RUN_STATUSES, every delivery status in DELIVERY_STATUSES.

The lists are checked, not generated: a migration is history and its text must not change
once applied, and a query stays readable SQL that the database prepares as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import tether.store as store_package
from tether.store._queries import parse_queries
from tether.types import ACTIVE, RUN_STATUSES, TERMINAL, WAITING

STORE_DIR = Path(store_package.__file__).parent

#: the sets a list of run statuses may spell, by the name a failure shows
RUN_STATUS_SETS: dict[str, frozenset[str]] = {
    "TERMINAL": TERMINAL,
    "WAITING": WAITING,
    "ACTIVE": ACTIVE,
    # the runs a host must drive now (orphaned_runs); a paused run waits for someone to
    # resume it, and its deadline-less wait needs no host
    "ACTIVE - WAITING - {paused}": ACTIVE - WAITING - {"paused"},
}
#: the outbox's vocabulary: egress/outbox.py writes these, ``tether deliveries --status`` offers them
DELIVERY_STATUSES = frozenset({"pending", "delivered", "dead"})
#: the tables with a status column, and whose vocabulary it holds
STATUS_TABLES = {"runs": "run", "outbox": "delivery"}

_LITERALS = r"'[^']*'(?:\s*,\s*'[^']*')*"
#: a column (or a bound parameter) compared with a list of literals: ``r.status NOT IN ('a', 'b')``
_LIST = re.compile(
    rf"(?P<left>(?:\b\w+\.)?\bstatus\b|\$\d+|\?|:\w+)\s+(?:NOT\s+)?IN\s*\(\s*(?P<items>{_LITERALS})\s*\)", re.IGNORECASE
)
#: a status column compared with (or set to) one literal
_ONE = re.compile(r"(?P<left>(?:\b\w+\.)?\bstatus)\s*(?:=|<>|!=)\s*'(?P<item>[^']*)'", re.IGNORECASE)
_ALIAS = re.compile(r"\b(?P<table>runs|outbox)\s+(?:AS\s+)?(?P<alias>[a-z])\b", re.IGNORECASE)
_INDEX = re.compile(r"^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_DROP_INDEX = re.compile(r"^\s*DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(\w+)", re.IGNORECASE)


@dataclass(frozen=True)
class Found:
    """One status comparison in one statement."""

    where: str  # the file, and the query's or the index's name (or the statement's number)
    vocabulary: str  # "run" or "delivery"
    statuses: tuple[str, ...]
    is_list: bool


def _statements(script: str) -> list[str]:
    text = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("--"))
    return [statement.strip() for statement in text.split(";") if statement.strip()]


def statements() -> list[tuple[str, str]]:
    """(where, SQL) of every named query, and of every migration statement still in force."""
    found: list[tuple[str, str]] = []
    for queries in sorted(STORE_DIR.glob("*/queries.sql")):
        for name, sql in parse_queries(queries.read_text(encoding="utf-8")).items():
            found.append((f"{queries.relative_to(STORE_DIR)}:{name}", sql))
    for migrations in sorted(STORE_DIR.glob("*/migrations")):
        indexes: dict[str, tuple[str, str]] = {}
        for path in sorted(migrations.glob("*.sql")):
            for i, sql in enumerate(_statements(path.read_text(encoding="utf-8")), start=1):
                if created := _INDEX.match(sql):
                    indexes[created.group(1)] = (f"{path.relative_to(STORE_DIR)}:{created.group(1)}", sql)
                elif dropped := _DROP_INDEX.match(sql):
                    indexes.pop(dropped.group(1), None)
                else:
                    found.append((f"{path.relative_to(STORE_DIR)}#{i}", sql))
        found.extend(indexes.values())
    return found


def _vocabulary(where: str, sql: str, left: str) -> str:
    """Whose status ``left`` is: its alias's table, else the statement's one table with a status."""
    if "." in left:
        qualifier = left.split(".", 1)[0].lower()
        aliases = {m["alias"].lower(): m["table"].lower() for m in _ALIAS.finditer(sql)}
        table = aliases.get(qualifier, qualifier)
        assert table in STATUS_TABLES, f"{where}: {left!r} is not a status column of {sorted(STATUS_TABLES)}"
        return STATUS_TABLES[table]
    tables = [table for table in STATUS_TABLES if re.search(rf"\b{table}\b", sql, re.IGNORECASE)]
    assert len(tables) == 1, f"{where}: which table's status is {left!r}? qualify it ({tables})"
    return STATUS_TABLES[tables[0]]


def status_comparisons(found_in: list[tuple[str, str]]) -> list[Found]:
    """Every status comparison of the statements ``found_in`` (where, SQL)."""
    found = []
    for where, sql in found_in:
        for match in _LIST.finditer(sql):
            items = tuple(re.findall(r"'([^']*)'", match["items"]))
            found.append(Found(where, _vocabulary(where, sql, match["left"]), items, True))
        for match in _ONE.finditer(sql):
            found.append(Found(where, _vocabulary(where, sql, match["left"]), (match["item"],), False))
    return found


def problem(found: Found) -> str | None:
    """What is wrong with one comparison's statuses, if anything."""
    if found.vocabulary == "delivery":
        unknown = set(found.statuses) - DELIVERY_STATUSES
        return f"{found.where}: not a delivery status: {sorted(unknown)}" if unknown else None
    unknown = set(found.statuses) - set(RUN_STATUSES)
    if unknown:
        return f"{found.where}: not a run status: {sorted(unknown)}"
    if len(set(found.statuses)) != len(found.statuses):
        return f"{found.where}: a status listed twice: {found.statuses}"
    if found.is_list and not any(set(found.statuses) == statuses for statuses in RUN_STATUS_SETS.values()):
        return f"{found.where}: {sorted(found.statuses)} is none of {sorted(RUN_STATUS_SETS)}"
    return None


IN_THE_STORES = status_comparisons(statements())


def test_the_parser_finds_the_status_lists_the_stores_are_known_to_spell() -> None:
    run_lists = {f.where for f in IN_THE_STORES if f.is_list and f.vocabulary == "run"}
    assert run_lists >= {
        "sqlite/queries.sql:active_runs",
        "postgres/queries.sql:active_runs",
        "sqlite/queries.sql:orphaned_runs",
        "postgres/queries.sql:orphaned_runs",
        "sqlite/migrations/0001_init.sql:runs_active",
        "postgres/migrations/0001_init.sql:runs_active",
    }
    delivery_places = {f.where for f in IN_THE_STORES if f.vocabulary == "delivery"}
    assert delivery_places >= {
        "sqlite/queries.sql:due_deliveries",
        "postgres/queries.sql:record_attempts",
        "sqlite/migrations/0007_outbox_heads.sql:outbox_due",
        "postgres/migrations/0003_outbox.sql:outbox_stream",
    }


@pytest.mark.parametrize("found", IN_THE_STORES, ids=lambda found: found.where)
def test_every_status_the_sql_spells_is_in_the_vocabulary(found: Found) -> None:
    assert problem(found) is None


@pytest.mark.parametrize(
    ("sql", "wrong"),
    [
        ("SELECT run_id FROM runs WHERE status NOT IN ('completed', 'failed', 'canceled')", "not a run status"),
        ("SELECT run_id FROM runs WHERE status NOT IN ('completed', 'failed')", "is none of"),
        ("SELECT r.run_id FROM runs r WHERE r.status IN ('waiting-input', 'waiting-input')", "listed twice"),
        ("SELECT run_id FROM runs WHERE status = 'paused-at-gate'", "not a run status"),
        ("SELECT o.delivery_id FROM outbox o WHERE o.status = 'pendng'", "not a delivery status"),
        ("UPDATE outbox SET status = 'cancelled' WHERE delivery_id = ?", "not a delivery status"),
    ],
)
def test_a_misspelt_a_missing_or_a_foreign_status_is_refused(sql: str, wrong: str) -> None:
    [found] = status_comparisons([("example", sql)])
    assert wrong in (problem(found) or "")


def test_a_status_whose_table_is_unclear_is_refused() -> None:
    sql = "SELECT 1 FROM runs JOIN outbox USING (run_id) WHERE status = 'pending'"
    with pytest.raises(AssertionError, match="qualify it"):
        status_comparisons([("example", sql)])

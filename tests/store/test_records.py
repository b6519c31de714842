"""Record maps read rows by column name and write the columns the queries name.

Both stores read every record through ``tether.store._records``; these tests pin what a
positional mapper could not promise: a SELECT in another order reads right, a column
missing is said, and the INSERTs that take a record's values name its columns in its order.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from store_records import NOW, claim, event, push_config, run_row, webhook

from tether.store import _records
from tether.store._records import RECORD_MAPS, RecordMap
from tether.store.base import (
    BlobRow,
    CredentialRow,
    DeliveryRow,
    KeyRow,
    RunBlob,
    TaskMessage,
    TaskRecord,
    WorkflowRow,
)
from tether.store.postgres._driver import Q as POSTGRES_Q
from tether.store.sqlite._driver import Q as SQLITE_Q

SAMPLES: dict[str, Any] = {
    "runs": run_row("run_1", due_at=NOW),
    "run_events": event("run_1", 3),
    "idempotency": claim("k1", "run_1"),
    "api_keys": KeyRow("key_1", "ci", "acme", ["runs:write"], "sha256:h", NOW),
    "workflows": WorkflowRow("wf", {"nodes": [{"id": "a"}]}, "fixtures", NOW),
    "a2a_tasks": TaskRecord("run_1", "acme", "key:alice", "ctx_1", {"state": "working"}, NOW),
    "a2a_messages": TaskMessage("run_1", "m1", {"text": "hi"}, NOW),
    "push_configs": push_config("run_1", "cfg_1"),
    "webhooks": webhook("wh_1", events=["run.completed"], tags=["blue"]),
    "blobs": BlobRow("sha256:" + "0" * 64, 3, NOW, b"abc"),
    "run_blobs": RunBlob("run_1", "sha256:" + "0" * 64),
    "outbound_credentials": CredentialRow("peer-b", "https://b.example:8443", "Bearer", b"sealed", "f" * 16, NOW),
    "outbox": DeliveryRow(
        "dlv_1",
        "acme",
        "callback",
        "run_1",
        "callback:run_1",
        "run_1",
        0,
        "https://x.example/cb",
        b"{}",
        True,
        "pending",
        0,
        NOW,
        None,
        NOW,
        NOW,
    ),
}

#: queries that take a whole record's values in the map's column order ($1, $2, ...)
POSTGRES_RECORD_QUERIES = {
    "insert_run": _records.RUN,
    "claim_idempotency": _records.IDEMPOTENCY,
    "insert_key": _records.KEY,
    "insert_workflow": _records.WORKFLOW,
    "update_workflow": _records.WORKFLOW,
    "upsert_task": _records.TASK,
    "insert_task_message": _records.MESSAGE,
    "upsert_push_config": _records.PUSH_CONFIG,
    "insert_webhook": _records.WEBHOOK,
    "insert_credential": _records.CREDENTIAL,
}
#: queries that take a whole record's values by column name (:name)
SQLITE_RECORD_QUERIES = {
    "insert_key": _records.KEY,
    "upsert_workflow": _records.WORKFLOW,
    "upsert_push_config": _records.PUSH_CONFIG,
    "insert_webhook": _records.WEBHOOK,
    "insert_credential": _records.CREDENTIAL,
}


def test_there_is_a_sample_of_every_mapped_record() -> None:
    assert sorted(SAMPLES) == sorted(records.table for records in RECORD_MAPS)


@pytest.mark.parametrize("records", RECORD_MAPS, ids=repr)
def test_a_record_written_and_read_back_in_any_column_order_is_the_same(records: RecordMap[Any]) -> None:
    record = SAMPLES[records.table]
    values = records.values(record)
    row = dict(zip(records.columns, values))
    shuffled = ["extra", *reversed(records.columns)]  # another order, and a column no field reads
    read = records.reader(f"test {records.table}", lambda: shuffled)
    assert read(tuple(row.get(name, "ignored") for name in shuffled)) == record


def test_a_value_stored_in_another_form_is_stored_as_both_backends_take_it() -> None:
    values = dict(zip(_records.WEBHOOK.columns, _records.WEBHOOK.values(SAMPLES["webhooks"])))
    assert values["events"] == '["run.completed"]' and values["tags"] == '["blue"]'  # TEXT / JSONB: text
    assert values["secret"] == b"sealed-secret"
    run = dict(zip(_records.RUN.columns, _records.RUN.values(SAMPLES["runs"])))
    assert orjson.loads(run["state"]) == SAMPLES["runs"].state and isinstance(run["state"], bytes)  # BLOB / BYTEA
    assert _records.EVENT.columns == ("run_id", "sequence", "doc")


def test_a_flag_reads_back_as_a_bool_from_an_integer() -> None:
    records = _records.DELIVERY
    row = [1 if name == "final" else value for name, value in zip(records.columns, records.values(SAMPLES["outbox"]))]
    read = records.reader("test flag", lambda: records.columns)
    assert read(row).final is True


def test_a_result_without_a_column_the_record_needs_is_refused() -> None:
    names = [name for name in _records.RUN.columns if name != "due_at"]
    with pytest.raises(ValueError, match=r"lacks the columns \['due_at'\]"):
        _records.RUN.reader("test missing", lambda: names)


def test_a_record_map_of_an_unknown_field_is_refused() -> None:
    with pytest.raises(ValueError, match="has no field"):
        RecordMap(KeyRow, "api_keys", {"scope": "json_text"})


@pytest.mark.parametrize("name", sorted(POSTGRES_RECORD_QUERIES))
def test_postgres_queries_take_a_records_values_in_its_column_order(name: str) -> None:
    records, sql = POSTGRES_RECORD_QUERIES[name], POSTGRES_Q[name]
    if insert := re.search(r"INSERT INTO (\w+) \(([^)]*)\)\s*VALUES \(([^)]*)\)", sql):
        table, columns, values = insert.group(1), insert.group(2), insert.group(3)
        placed = dict(zip((c.strip() for c in columns.split(",")), (v.strip() for v in values.split(","))))
    else:
        table = re.search(r"UPDATE (\w+)", sql).group(1)  # type: ignore[union-attr]
        placed = dict(re.findall(r"(\w+) = (\$\d+)", sql))
    assert table == records.table
    assert placed, f"{name}: no parameters found"
    for column, placeholder in placed.items():
        assert placeholder == f"${records.columns.index(column) + 1}", f"{name}: {column} is bound to {placeholder}"
    if insert:
        assert list(placed) == list(records.columns)


@pytest.mark.parametrize("name", sorted(SQLITE_RECORD_QUERIES))
def test_sqlite_queries_take_a_records_values_by_their_column_names(name: str) -> None:
    records, sql = SQLITE_RECORD_QUERIES[name], SQLITE_Q[name]
    assert set(re.findall(r":(\w+)", sql)) == set(records.columns)
    assert re.search(rf"INSERT INTO {records.table} \(", sql)

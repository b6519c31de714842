"""The storage contract: what every backend must do, run against SQLite and PostgreSQL.

This suite is the definition of a correct ``Store``.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import orjson
import pytest
from store_records import (
    NOW,
    TENANT,
    advance,
    at,
    callback_fanout,
    claim,
    create_run,
    event,
    push_config,
    push_fanout,
    run_row,
    webhook,
)

from tether.errors import Conflict, SequenceConflict, StoreUnavailable
from tether.files import Blob
from tether.ids import new_id
from tether.store.base import (
    Commit,
    CredentialRow,
    EventRow,
    Fanout,
    IdempotencyClaimed,
    KeyRow,
    RunRow,
    Store,
    TaskMessage,
    TaskRecord,
    WorkflowRow,
)
from tether.store.postgres import PostgresStore
from tether.store.sqlite import SqliteStore

pytestmark = pytest.mark.timeout(60)


# lifecycle ------------------------------------------------------------------------------


async def test_lifecycle_refuses_a_second_open_and_use_after_close(store: Store) -> None:
    with pytest.raises(RuntimeError):
        await store.open()
    await store.close()
    await store.close()  # closing again is harmless
    with pytest.raises(StoreUnavailable):
        await store.get_run("run_x")


MULTI_HOST = [
    "shared",
    "claim_run",
    "renew_leases",
    "release_run",
    "orphaned_runs",
    "announce",
    "on_announce",
    "on_hints_missed",
]


async def test_the_multi_host_surface_exists(store: Store) -> None:
    missing = [name for name in MULTI_HOST if not hasattr(store, name)]
    parameters = inspect.signature(store.due_deliveries).parameters
    missing += [f"due_deliveries({name}=)" for name in ("owner", "claim_seconds") if name not in parameters]
    if missing and isinstance(store, SqliteStore):
        pytest.skip(f"SqliteStore does not have {', '.join(missing)} yet (being added with migration 0004)")
    assert missing == []
    assert store.shared is isinstance(store, PostgresStore)


# runs, events and commits ----------------------------------------------------------------


async def test_a_created_run_reads_back_and_stays_in_its_tenant(store: Store) -> None:
    run = await create_run(store, status="pending")
    assert await store.get_run(run.run_id) == run
    assert await store.get_run(run.run_id, TENANT) == run
    assert await store.get_run(run.run_id, "someone-else") is None
    assert await store.get_run("run_missing") is None
    assert [e.sequence for e in await store.read_events(run.run_id)] == [0]


async def test_a_cas_update_moves_the_projection(store: Store) -> None:
    run = await create_run(store)
    moved, _ = await advance(store, run, status="waiting-approval", due_at=at(60))
    stored = await store.get_run(run.run_id)
    assert stored is not None
    assert (stored.status, stored.last_sequence, stored.state) == ("waiting-approval", 1, moved.state)
    assert stored.due_at == at(60)
    assert [e.sequence for e in await store.read_events(run.run_id)] == [0, 1]


async def test_a_lost_compare_and_swap_writes_nothing(store: Store) -> None:
    run = await create_run(store)
    await advance(store, run)  # now at sequence 1
    task = TaskRecord("task_1", TENANT, "key:alice", "ctx", {"state": "stale"}, NOW)
    stale = Commit(
        run_row(run.run_id, status="completed", last_sequence=1),
        [event(run.run_id, 1)],
        expected_sequence=0,
        idempotency=claim("k-stale", run.run_id),
        extras=[task, TaskMessage("task_1", "m1", {"text": "hi"}, NOW), callback_fanout(run.run_id)],
    )
    with pytest.raises(SequenceConflict):
        await store.commit(stale)
    stored = await store.get_run(run.run_id)
    assert stored is not None and (stored.status, stored.last_sequence) == ("running", 1)
    assert [e.doc_json for e in await store.read_events(run.run_id)] == [
        event(run.run_id, 0).doc_json,
        event(run.run_id, 1).doc_json,
    ]
    assert await store.get_task("task_1") is None
    assert await store.list_task_messages("task_1") == []
    assert await store.get_idempotency(TENANT, "runs.create", "k-stale") is None
    assert await store.list_deliveries(None, None) == []


async def test_concurrent_transitions_from_one_sequence_let_exactly_one_win(store: Store) -> None:
    run = await create_run(store)
    contenders = [
        Commit(run_row(run.run_id, status=f"s{i}", last_sequence=1), [event(run.run_id, 1)], 0) for i in range(6)
    ]
    outcomes = await asyncio.gather(*(store.commit(c) for c in contenders), return_exceptions=True)
    assert sum(1 for o in outcomes if o == 0) == 1
    assert sum(1 for o in outcomes if isinstance(o, SequenceConflict)) == 5
    assert [e.sequence for e in await store.read_events(run.run_id)] == [0, 1]


async def test_refusals_among_concurrent_commits_write_nothing_and_cost_the_others_nothing(store: Store) -> None:
    """Commits that arrive together share a transaction (SQLite writes their rows with one
    INSERT per table); each refusal is still reported precisely and writes nothing."""
    existing = await create_run(store)
    await create_run(store, idempotency=claim("taken", "first"))
    await create_run(
        store,
        extras=[
            TaskRecord("task_seen", TENANT, "key:alice", "ctx", {"n": 0}, NOW),
            TaskMessage("task_seen", "m1", {"text": "first"}, NOW),
        ],
    )
    moving = await create_run(store)

    def full(run_id: str) -> Commit:
        return Commit(
            run_row(run_id, last_sequence=1),
            [event(run_id, 0), event(run_id, 1)],
            None,
            claim(f"k-{run_id}", run_id),
            [
                TaskRecord(run_id, TENANT, "key:alice", "ctx", {"state": "completed"}, NOW),
                TaskMessage(run_id, "m1", {"text": run_id}, NOW),
                callback_fanout(run_id),
            ],
        )

    async def landed_whole(run_ids: list[str]) -> None:
        for run_id in run_ids:
            stored = await store.get_run(run_id)
            assert stored is not None and stored.last_sequence == 1
            assert [e.sequence for e in await store.read_events(run_id)] == [0, 1]
            task = await store.get_task(run_id)
            assert task is not None and task.record == {"state": "completed"}
            assert await store.list_task_messages(run_id) == [{"text": run_id}]
            assert (await store.get_idempotency(TENANT, "runs.create", f"k-{run_id}")) is not None
        assert sorted(d.run_id for d in await store.list_deliveries(None, None) if d.run_id in run_ids) == sorted(
            run_ids
        )

    together = [new_id("run_") for _ in range(12)]
    assert await asyncio.gather(*(store.commit(full(run_id)) for run_id in together)) == [1] * len(together)
    await landed_whole(together)

    fresh = [new_id("run_") for _ in range(12)]
    duplicate_id = Commit(run_row(existing.run_id), [event(existing.run_id, 0)], None)
    claimed_key = Commit(
        run_row(new_id("run_")), [event("unused", 0)], None, claim("taken", "second"), [callback_fanout("unused")]
    )
    duplicate_message = Commit(
        run_row(new_id("run_")), [], None, None, [TaskMessage("task_seen", "m1", {"text": "again"}, NOW)]
    )
    stale = Commit(run_row(moving.run_id, status="completed", last_sequence=1), [event(moving.run_id, 1)], 7)
    commits = [
        full(fresh[0]),
        duplicate_id,
        *map(full, fresh[1:6]),
        claimed_key,
        stale,
        *map(full, fresh[6:]),
        duplicate_message,
    ]
    outcomes = await asyncio.gather(*(store.commit(c) for c in commits), return_exceptions=True)

    refusals = [o for o in outcomes if isinstance(o, BaseException)]
    assert [type(o) for o in refusals] == [SequenceConflict, IdempotencyClaimed, SequenceConflict, Conflict], outcomes
    assert isinstance(refusals[1], IdempotencyClaimed) and refusals[1].existing.run_id == "first"
    assert isinstance(refusals[3], Conflict) and refusals[3].code == "message_already_recorded"
    assert sum(1 for o in outcomes if o == 1) == len(fresh)  # each full commit enqueued its callback
    await landed_whole(fresh)
    assert sorted(d.run_id for d in await store.list_deliveries(None, None)) == sorted(together + fresh)
    assert (await store.get_run(existing.run_id)) == existing
    assert await store.list_task_messages("task_seen") == [{"text": "first"}]
    assert await store.get_run(claimed_key.run.run_id) is None and await store.read_events("unused") == []
    assert await store.get_run(duplicate_message.run.run_id) is None
    assert [e.sequence for e in await store.read_events(moving.run_id)] == [0]


async def test_creating_a_run_that_exists_is_a_sequence_conflict(store: Store) -> None:
    run = await create_run(store)
    with pytest.raises(SequenceConflict):
        await create_run(store, run.run_id, status="completed")
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.status == "running"


async def test_events_come_back_byte_identical(store: Store) -> None:
    run_id = new_id("run_")
    docs = [
        b'{"z":1,  "a" : [1, 2.50, 1e400, "\\u00e9"],\n"k":null}',
        '{"text":"caf\u00e9 \u2713 \U0001f600","n":-0.0}'.encode(),
        orjson.dumps({"sequence": 2, "blob": "x" * 200_000}),
        b'{"dup":1,"dup":2}',
    ]
    events = [EventRow(run_id, i, doc) for i, doc in enumerate(docs)]
    await store.commit(Commit(run_row(run_id, last_sequence=3), events, None))
    assert await store.read_events(run_id) == events
    assert await store.read_events(run_id, after=1) == events[2:]
    assert await store.read_events(run_id, after=0, limit=2) == events[1:3]
    assert await store.read_events(run_id, after=3) == []


async def test_a_commit_of_more_events_than_one_statement_takes_lands_whole(store: Store) -> None:
    run_id = new_id("run_")
    events = [event(run_id, i) for i in range(1_234)]
    await store.commit(Commit(run_row(run_id, last_sequence=1_233), events, None))
    assert await store.read_events(run_id, limit=2_000) == events


async def test_list_runs_filters_pages_newest_first_within_a_tenant(store: Store) -> None:
    mine = [
        await create_run(store, status=status, workflow_id=workflow)
        for status, workflow in [
            ("running", "wf-a"),
            ("completed", "wf-b"),
            ("running", "wf-b"),
            ("failed", "wf-a"),
            ("running", "wf-a"),
            ("completed", "wf-a"),
        ]
    ]
    theirs = [await create_run(store, tenant="globex", status="running", workflow_id="wf-a") for _ in range(2)]
    newest_first = [r.run_id for r in reversed(mine)]

    assert [r.run_id for r in await store.list_runs(TENANT)] == newest_first
    assert [r.run_id for r in await store.list_runs("globex")] == [r.run_id for r in reversed(theirs)]
    assert [r.run_id for r in await store.list_runs(TENANT, status="running")] == [
        mine[4].run_id,
        mine[2].run_id,
        mine[0].run_id,
    ]
    assert [r.run_id for r in await store.list_runs(TENANT, workflow_id="wf-b")] == [mine[2].run_id, mine[1].run_id]
    assert [r.run_id for r in await store.list_runs(TENANT, status="running", workflow_id="wf-a")] == [
        mine[4].run_id,
        mine[0].run_id,
    ]
    assert await store.list_runs("nobody") == []

    pages, before = [], None
    while True:
        page = await store.list_runs(TENANT, limit=4, before=before)
        if not page:
            break
        pages.append([r.run_id for r in page])
        before = page[-1].run_id
    assert pages == [newest_first[:4], newest_first[4:]]
    assert [r.run_id for r in await store.list_runs(TENANT, status="completed", before=mine[5].run_id)] == [
        mine[1].run_id
    ]


async def test_active_runs_are_the_unfinished_ones_in_id_order(store: Store) -> None:
    runs = [
        await create_run(store, status=s)
        for s in ["running", "completed", "waiting-input", "cancelled", "pending", "failed"]
    ]
    assert [r.run_id for r in await store.active_runs()] == [runs[0].run_id, runs[2].run_id, runs[4].run_id]


# idempotency ------------------------------------------------------------------------------


async def test_a_claimed_idempotency_key_refuses_the_repeat_and_writes_nothing(store: Store) -> None:
    first = await create_run(store, idempotency=claim("k1", "will-be-replaced"))
    record = await store.get_idempotency(TENANT, "runs.create", "k1")
    assert record is not None and record.body == {"runId": "will-be-replaced"} and record.status_code == 201
    second_id = new_id("run_")
    with pytest.raises(IdempotencyClaimed) as refused:
        await create_run(store, second_id, idempotency=claim("k1", second_id), extras=[callback_fanout(second_id)])
    assert refused.value.existing == record
    assert await store.get_run(second_id) is None
    assert await store.read_events(second_id) == []
    assert await store.list_deliveries(None, None) == []
    # the key is per tenant
    await create_run(store, tenant="globex", idempotency=claim("k1", "other", tenant="globex"))
    assert await store.get_run(first.run_id) is not None


async def test_concurrent_commits_with_one_idempotency_key_create_one_run(store: Store) -> None:
    ids = [new_id("run_") for _ in range(8)]
    outcomes = await asyncio.gather(
        *(create_run(store, run_id, idempotency=claim("race", run_id)) for run_id in ids), return_exceptions=True
    )
    winners = [o for o in outcomes if isinstance(o, RunRow)]
    losers = [o for o in outcomes if isinstance(o, IdempotencyClaimed)]
    assert len(winners) == 1 and len(losers) == 7, outcomes
    assert {loser.existing.run_id for loser in losers} == {winners[0].run_id}
    assert [r.run_id for r in await store.list_runs(TENANT)] == [winners[0].run_id]


# keys and workflows -------------------------------------------------------------------------


async def test_keys_insert_list_revoke_and_refuse_a_second_active_name(store: Store) -> None:
    ops = KeyRow("key_1", "ops", TENANT, ["runs:read", "runs:write"], "hash1", at(1))
    await store.insert_key(ops)
    await store.insert_key(KeyRow("key_0", "ci", "globex", [], "hash0", at(0)))
    assert await store.get_key("key_1") == ops
    assert await store.get_key("key_missing") is None
    with pytest.raises(Conflict) as duplicate:
        await store.insert_key(KeyRow("key_2", "ops", TENANT, [], "hash2", at(2)))
    assert duplicate.value.code == "key_exists"
    assert await store.revoke_key("ops", at(3)) is True
    assert await store.revoke_key("ops", at(4)) is False
    await store.insert_key(KeyRow("key_3", "ops", TENANT, ["runs:read"], "hash3", at(5)))  # the name is free again
    listed = await store.list_keys()
    assert [(k.key_id, k.revoked_at) for k in listed] == [("key_0", None), ("key_1", at(3)), ("key_3", None)]


async def test_credentials_insert_get_list_delete_and_refuse_a_second_of_one_name(store: Store) -> None:
    b = CredentialRow("peer-b", "https://b.example:8443", "Bearer", b"\x00sealed\xff", "0123456789abcdef", at(1))
    await store.insert_credential(b)
    await store.insert_credential(CredentialRow("a-peer", "https://a.example", "Basic", b"s", "f" * 16, at(2)))
    assert await store.get_credential("peer-b") == b
    assert await store.get_credential("missing") is None
    with pytest.raises(Conflict) as duplicate:
        await store.insert_credential(CredentialRow("peer-b", "https://c.example", "Bearer", b"x", "e" * 16, at(3)))
    assert duplicate.value.code == "credential_exists"
    assert await store.get_credential("peer-b") == b, "the first one stands"
    assert [c.name for c in await store.list_credentials()] == ["a-peer", "peer-b"]
    assert await store.delete_credential("peer-b") is True
    assert await store.delete_credential("peer-b") is False
    assert [c.name for c in await store.list_credentials()] == ["a-peer"]


async def test_putting_the_same_workflow_again_is_a_no_op(store: Store) -> None:
    definition = {"id": "wf", "name": "Workflow", "nodes": [{"id": "a"}], "settings": {"b": 1, "a": 2}}
    assert await store.put_workflow(WorkflowRow("wf", definition, "bundled", at(1))) is True
    reordered = {"settings": {"a": 2, "b": 1}, "nodes": [{"id": "a"}], "name": "Workflow", "id": "wf"}
    assert await store.put_workflow(WorkflowRow("wf", reordered, "bundled", at(2))) is False
    changed = {**definition, "name": "Renamed"}
    assert await store.put_workflow(WorkflowRow("wf", changed, "fixtures", at(3))) is True
    await store.put_workflow(WorkflowRow("another", {"id": "another"}, "bundled", at(4)))
    assert await store.list_workflows() == [
        WorkflowRow("another", {"id": "another"}, "bundled", at(4)),
        WorkflowRow("wf", changed, "fixtures", at(3)),
    ]


# A2A tasks ----------------------------------------------------------------------------------


async def test_task_records_and_messages_are_written_with_the_run(store: Store) -> None:
    record = TaskRecord("task_1", TENANT, "key:alice", "ctx_1", {"state": "submitted", "n": 1}, NOW)
    run = await create_run(
        store,
        extras=[
            record,
            TaskMessage("task_1", "m1", {"role": "user", "text": "first"}, NOW),
            TaskMessage("task_1", "m2", {"role": "agent", "text": "second"}, NOW),
        ],
    )
    assert await store.get_task("task_1") == record
    assert await store.get_task("task_1", TENANT) == record
    assert await store.get_task("task_1", "globex") is None
    newer = TaskRecord("task_1", TENANT, "key:alice", "ctx_1", {"state": "working"}, at(1))
    run, _ = await advance(store, run, extras=[newer, TaskMessage("task_1", "m3", {"text": "third"}, at(1))])
    assert await store.get_task("task_1") == newer
    assert [m.get("text") for m in await store.list_task_messages("task_1")] == ["first", "second", "third"]


async def test_a_task_is_read_whole_and_only_by_its_tenant(store: Store) -> None:
    record = TaskRecord("run_t1", TENANT, "key:alice", "ctx_1", {"state": "working"}, NOW)
    run = await create_run(store, "run_t1", extras=[record, TaskMessage("run_t1", "m1", {"text": "hi"}, NOW)])
    found = await store.read_task("run_t1", TENANT, history=True)
    assert found is not None
    assert found[0] == record and found[1].run_id == run.run_id and found[1].state == run.state
    assert found[2] == [{"text": "hi"}]
    without = await store.read_task("run_t1", TENANT)
    assert without is not None and without[2] is None
    assert await store.read_task("run_t1", "globex") is None, "another tenant's task reads as missing"
    assert await store.read_task("run_nope", TENANT) is None


async def test_a_message_recorded_twice_is_a_conflict_and_nothing_is_written(store: Store) -> None:
    run = await create_run(store, extras=[TaskMessage("task_1", "m1", {"text": "once"}, NOW)])
    with pytest.raises(Conflict) as twice:
        await advance(
            store,
            run,
            extras=[
                TaskRecord("task_1", TENANT, "p", "c", {"state": "changed"}, NOW),
                TaskMessage("task_1", "m1", {"text": "again"}, NOW),
            ],
        )
    assert twice.value.code == "message_already_recorded"
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.last_sequence == 0
    assert await store.get_task("task_1") is None
    assert await store.list_task_messages("task_1") == [{"text": "once"}]


# push configs and webhooks ----------------------------------------------------------------------


async def test_push_configs_keep_registration_order_and_replace_in_place(store: Store) -> None:
    await store.put_push_config(push_config("task_1", "c2"))
    await store.put_push_config(push_config("task_1", "c1"))
    await store.put_push_config(push_config("task_2", "c9"))
    await store.put_push_config(push_config("task_1", "c2", url="https://hooks.example/moved"))
    configs = await store.list_push_configs("task_1")
    assert [(c.config_id, c.url) for c in configs] == [
        ("c2", "https://hooks.example/moved"),
        ("c1", "https://hooks.example/push"),
    ]
    assert configs[1] == push_config("task_1", "c1")
    assert await store.delete_push_config("task_1", "c2") is True
    assert await store.delete_push_config("task_1", "c2") is False
    assert [c.config_id for c in await store.list_push_configs("task_1")] == ["c1"]


async def test_webhooks_put_get_and_delete_only_within_their_tenant(store: Store) -> None:
    hook = webhook("wh_1", events=["run.completed", "run.failed"], tags=["blue"])
    await store.put_webhook(hook)
    assert await store.get_webhook("wh_1") == hook
    assert await store.delete_webhook("globex", "wh_1") is False
    assert await store.delete_webhook(TENANT, "wh_1") is True
    assert await store.get_webhook("wh_1") is None


# fan-out and the outbox ---------------------------------------------------------------------------


async def test_fan_out_follows_webhooks_registered_and_deleted_between_commits(store: Store) -> None:
    run = await create_run(store)

    def completed(sequence: int) -> Fanout:
        return Fanout("webhook", TENANT, run.run_id, sequence, b"{}", event_type="run.completed")

    run, enqueued = await advance(store, run, extras=[completed(1)])
    assert enqueued == 0
    await store.put_webhook(webhook("wh_late", events=["run.completed"]))
    run, enqueued = await advance(store, run, extras=[completed(2)])
    assert enqueued == 1
    await store.put_webhook(webhook("wh_second", events=["run.completed"]))
    assert await store.delete_webhook(TENANT, "wh_late") is True
    run, enqueued = await advance(store, run, extras=[completed(3)])
    assert enqueued == 1
    assert await store.delete_webhook(TENANT, "wh_second") is True
    run, enqueued = await advance(store, run, extras=[completed(4)])
    assert enqueued == 0
    assert sorted((d.target_id, d.sequence) for d in await store.list_deliveries(TENANT, None)) == [
        ("wh_late", 2),
        ("wh_second", 3),
    ]


async def test_fan_out_enqueues_one_delivery_per_matching_subscriber(store: Store) -> None:
    for config_id in ("p1", "p2"):
        await store.put_push_config(push_config("task_1", config_id))
    await store.put_push_config(push_config("task_other", "p9"))
    await store.put_webhook(webhook("wh_any", events=["run.completed"]))
    await store.put_webhook(webhook("wh_blue", events=["run.completed"], tags=["blue"]))
    await store.put_webhook(webhook("wh_red", events=["run.completed"], tags=["red"]))
    await store.put_webhook(webhook("wh_started", events=["run.started"]))
    await store.put_webhook(webhook("wh_globex", events=["run.completed"], tenant="globex"))

    run = run_row(new_id("run_"))
    completed = Fanout(
        "webhook",
        TENANT,
        run.run_id,
        0,
        b'{"event":"run.completed"}',
        event_type="run.completed",
        tags=["blue", "green"],
    )
    enqueued = await store.commit(
        Commit(
            run,
            [event(run.run_id, 0)],
            None,
            extras=[
                push_config("task_1", "p3"),  # registered in the same commit: it takes part
                push_fanout(run.run_id, "task_1"),
                completed,
                callback_fanout(run.run_id),
            ],
        )
    )
    assert enqueued == 3 + 2 + 1
    deliveries = await store.list_deliveries(TENANT, "pending")
    assert sorted(d.stream_key for d in deliveries) == sorted(
        [
            "push:task_1:p1",
            "push:task_1:p2",
            "push:task_1:p3",
            f"webhook:wh_any:{run.run_id}",
            f"webhook:wh_blue:{run.run_id}",
            f"callback:{run.run_id}",
        ]
    )
    hook = next(d for d in deliveries if d.target_id == "wh_blue")
    assert (hook.kind, hook.url, hook.body, hook.sequence, hook.attempts, hook.next_attempt_at, hook.final) == (
        "webhook",
        "https://hooks.example/wh_blue",
        b'{"event":"run.completed"}',
        0,
        0,
        NOW,
        False,
    )
    assert await store.list_deliveries("globex", None) == []
    # no subscriber, no delivery
    other = run_row(new_id("run_"), tenant="initech")
    assert (
        await store.commit(
            Commit(
                other, [event(other.run_id, 0)], None, extras=[push_fanout(other.run_id, "task_none", tenant="initech")]
            )
        )
        == 0
    )


async def test_due_deliveries_go_out_in_order_one_per_stream_head(store: Store) -> None:
    await store.put_push_config(push_config("task_1", "p1"))
    run = await create_run(store)
    for sequence in (1, 2):  # two pushes queue up on one stream
        run, _ = await advance(store, run, extras=[push_fanout(run.run_id, "task_1", sequence=sequence)])
    call = new_id("run_")
    await create_run(store, call, extras=[callback_fanout(call)])
    later = new_id("run_")
    await create_run(store, later, updated_at=at(30), extras=[callback_fanout(later)])

    due = await store.due_deliveries(at(1), 10)
    assert {(d.stream_key, d.sequence) for d in due} == {("push:task_1:p1", 1), (f"callback:{call}", 0)}
    assert [d.delivery_id for d in due] == sorted(d.delivery_id for d in due)  # same due time: by delivery id
    [head_row] = [d for d in due if d.kind == "a2a-push"]
    [callback_row] = [d for d in due if d.kind == "callback"]

    await store.record_attempt(
        head_row.delivery_id, status="pending", attempts=1, next_attempt_at=at(5), last_error="HTTP 503", now=at(1)
    )
    await store.record_attempt(
        callback_row.delivery_id, status="delivered", attempts=1, next_attempt_at=at(1), last_error=None, now=at(1)
    )
    assert await store.due_deliveries(at(2), 10) == []  # the head waits for its retry, its stream waits for the head

    retried = await store.due_deliveries(at(5), 10)
    assert [(d.delivery_id, d.attempts, d.last_error) for d in retried] == [(head_row.delivery_id, 1, "HTTP 503")]
    await store.record_attempt(
        head_row.delivery_id, status="delivered", attempts=2, next_attempt_at=at(5), last_error=None, now=at(5)
    )
    assert [(d.stream_key, d.sequence) for d in await store.due_deliveries(at(6), 10)] == [("push:task_1:p1", 2)]


async def test_due_deliveries_order_by_due_time_then_id_and_honour_the_limit(store: Store) -> None:
    for seconds in (3, 1, 2, 1):
        run = await create_run(store, updated_at=at(seconds), extras=[])
        await store.commit(
            Commit(
                run_row(run.run_id, last_sequence=1, updated_at=at(seconds)),
                [event(run.run_id, 1)],
                0,
                extras=[callback_fanout(run.run_id, sequence=1)],
            )
        )
    due = await store.due_deliveries(at(10), 3)
    expected = sorted((d.next_attempt_at, d.delivery_id) for d in await store.list_deliveries(None, "pending"))[:3]
    assert [(d.next_attempt_at, d.delivery_id) for d in due] == expected
    assert [d.next_attempt_at for d in due] == [at(1), at(1), at(2)]
    assert await store.due_deliveries(at(0.5), 10) == []


async def test_next_delivery_at_is_the_earliest_due_time(store: Store) -> None:
    assert await store.next_delivery_at() is None
    await create_run(store, updated_at=at(7), extras=[callback_fanout("r1")])
    await create_run(store, updated_at=at(4), extras=[callback_fanout("r2")])
    assert await store.next_delivery_at() == at(4)


async def test_next_delivery_at_skips_rows_waiting_behind_their_stream_head(store: Store) -> None:
    await store.put_push_config(push_config("task_1", "p1"))
    run = await create_run(store, extras=[push_fanout("x", "task_1")])
    await advance(store, run, extras=[push_fanout("x", "task_1", sequence=1)])
    [head] = await store.due_deliveries(at(1), 10)
    await store.record_attempt(
        head.delivery_id, status="pending", attempts=1, next_attempt_at=at(30), last_error="timeout", now=at(1)
    )
    assert await store.next_delivery_at() == at(30)


async def test_a_final_push_that_is_done_discards_its_config_secrets(store: Store) -> None:
    for config_id in ("p1", "p2"):
        await store.put_push_config(push_config("task_1", config_id))
    await store.put_push_config(push_config("task_2", "p1"))
    run = await create_run(store, extras=[push_fanout("x", "task_1", final=True)])
    by_target = {d.target_id: d for d in await store.due_deliveries(at(1), 10)}

    await store.record_attempt(
        by_target["p1"].delivery_id, status="pending", attempts=1, next_attempt_at=at(2), last_error="e", now=at(1)
    )
    assert all(c.token_secret == b"sealed-token" for c in await store.list_push_configs("task_1"))  # still retrying
    await store.record_attempt(
        by_target["p1"].delivery_id, status="delivered", attempts=2, next_attempt_at=at(3), last_error=None, now=at(3)
    )
    await store.record_attempt(
        by_target["p2"].delivery_id, status="dead", attempts=9, next_attempt_at=at(3), last_error="gone", now=at(3)
    )
    secrets = {
        c.config_id: (c.token_secret, c.auth_secret, c.token_fingerprint)
        for c in await store.list_push_configs("task_1")
    }
    assert secrets == {"p1": (None, None, "fp:token"), "p2": (None, None, "fp:token")}
    assert [(c.token_secret, c.auth_secret) for c in await store.list_push_configs("task_2")] == [
        (b"sealed-token", b"sealed-auth")
    ]

    # a push that is not final keeps them
    await store.put_push_config(push_config("task_3", "p1"))
    await advance(store, run, extras=[push_fanout("x", "task_3", sequence=1)])
    [plain] = [d for d in await store.due_deliveries(at(4), 10) if d.stream_key == "push:task_3:p1"]
    await store.record_attempt(
        plain.delivery_id, status="delivered", attempts=1, next_attempt_at=at(4), last_error=None, now=at(4)
    )
    assert [c.token_secret for c in await store.list_push_configs("task_3")] == [b"sealed-token"]


async def test_attempts_are_recorded_and_listed_newest_first(store: Store) -> None:
    await create_run(store, extras=[callback_fanout("r1")])
    await create_run(store, tenant="globex", extras=[callback_fanout("r2", tenant="globex")])
    first, second = await store.due_deliveries(at(1), 10)
    await store.record_attempt(
        first.delivery_id, status="dead", attempts=1, next_attempt_at=at(1), last_error="HTTP 410", now=at(1)
    )
    [dead] = await store.list_deliveries(None, "dead")
    assert (dead.delivery_id, dead.status, dead.attempts, dead.last_error, dead.updated_at) == (
        first.delivery_id,
        "dead",
        1,
        "HTTP 410",
        at(1),
    )
    assert [d.delivery_id for d in await store.list_deliveries(None, None)] == [second.delivery_id, first.delivery_id]
    assert [d.delivery_id for d in await store.list_deliveries(None, None, limit=1)] == [second.delivery_id]
    assert [d.delivery_id for d in await store.list_deliveries("globex", None)] == [second.delivery_id]
    assert await store.list_deliveries("globex", "dead") == []


async def test_webhooks_remember_the_major_they_were_registered_under(store: Store) -> None:
    await store.put_webhook(webhook("wh_v1", events=["run.completed"]))
    await store.put_webhook(webhook("wh_v2", events=["run.completed"], major=2))
    assert [(await store.get_webhook(w)) for w in ("wh_v1", "wh_v2")] == [
        webhook("wh_v1", events=["run.completed"]),
        webhook("wh_v2", events=["run.completed"], major=2),
    ]


async def test_dead_letters_of_one_subscriber_are_read_newest_first_a_page_at_a_time(store: Store) -> None:
    await store.put_webhook(webhook("wh_dead", events=["run.completed"]))
    await store.put_webhook(webhook("wh_other", events=["run.completed"]))
    await store.put_webhook(webhook("wh_globex", events=["run.completed"], tenant="globex"))
    for _ in range(3):
        run = await create_run(store)
        await advance(store, run, extras=[Fanout("webhook", TENANT, run.run_id, 1, b"{}", event_type="run.completed")])
    globex = await create_run(store, tenant="globex")
    await advance(
        store, globex, extras=[Fanout("webhook", "globex", globex.run_id, 1, b"{}", event_type="run.completed")]
    )
    due = await store.due_deliveries(at(1), 20)
    alive = next(d for d in due if d.target_id == "wh_dead")  # one of wh_dead's stays pending
    for row in due:
        if row is not alive:
            await store.record_attempt(
                row.delivery_id, status="dead", attempts=4, next_attempt_at=at(2), last_error="HTTP 500", now=at(2)
            )
    dead = sorted((d.delivery_id for d in due if d.target_id == "wh_dead" and d is not alive), reverse=True)
    assert len(dead) == 2
    assert [d.delivery_id for d in await store.dead_letters(TENANT, "wh_dead", 10)] == dead
    [first] = await store.dead_letters(TENANT, "wh_dead", 1)
    assert (first.delivery_id, first.status, first.attempts, first.last_error, first.updated_at) == (
        dead[0],
        "dead",
        4,
        "HTTP 500",
        at(2),
    )
    assert [d.delivery_id for d in await store.dead_letters(TENANT, "wh_dead", 10, before=dead[0])] == dead[1:]
    assert await store.dead_letters(TENANT, "wh_dead", 10, before=dead[1]) == []
    assert await store.dead_letters("globex", "wh_dead", 10) == [], "only the caller's tenant"
    assert len(await store.dead_letters("globex", "wh_globex", 10)) == 1


async def test_a_run_is_purged_only_once_its_dead_letters_are_past_the_cutoff(store: Store) -> None:
    """A dead letter stays readable as long as a run is kept after it ended: its run waits for it."""
    await store.put_webhook(webhook("wh_1", events=["run.completed"]))
    run = await create_run(store)
    await advance(
        store,
        run,
        status="completed",
        extras=[Fanout("webhook", TENANT, run.run_id, 1, b"{}", event_type="run.completed")],
    )
    [row] = await store.due_deliveries(at(1), 10)
    await store.record_attempt(
        row.delivery_id, status="dead", attempts=4, next_attempt_at=at(60), last_error="HTTP 500", now=at(60)
    )
    assert await store.purge_runs(at(30), 10) == [], "the run ended before 30 s, its dead letter died after"
    assert [d.delivery_id for d in await store.dead_letters(TENANT, "wh_1", 10)] == [row.delivery_id]
    assert await store.purge_runs(at(61), 10) == [run.run_id]
    assert await store.dead_letters(TENANT, "wh_1", 10) == []


async def test_redeliver_sends_a_dead_delivery_again_from_the_first_attempt(store: Store) -> None:
    await create_run(store, extras=[callback_fanout("r1")])
    [row] = await store.due_deliveries(at(1), 10)
    assert await store.redeliver(row.delivery_id, None, at(2)) is False  # only dead ones
    await store.record_attempt(
        row.delivery_id, status="dead", attempts=8, next_attempt_at=at(2), last_error="HTTP 500", now=at(2)
    )
    assert await store.redeliver(row.delivery_id, "globex", at(3)) is False
    assert await store.redeliver("dlv_missing", None, at(3)) is False
    assert await store.redeliver(row.delivery_id, TENANT, at(3)) is True
    [again] = await store.due_deliveries(at(3), 10)
    assert (again.delivery_id, again.status, again.attempts, again.next_attempt_at, again.updated_at) == (
        row.delivery_id,
        "pending",
        0,
        at(3),
        at(3),
    )


async def test_a_setting_is_claimed_once(store: Store) -> None:
    assert await store.claim_setting("host_key_fingerprint", "first") == "first"
    assert await store.claim_setting("host_key_fingerprint", "second") == "first", "the first value stays"
    assert await store.claim_setting("other", "x") == "x"


async def test_settings_are_read_by_prefix(store: Store) -> None:
    for name in ("keys:b", "keys:a", "keysx", "key_", "other"):
        await store.claim_setting(name, name.upper())
    assert await store.settings_under("keys:") == {"keys:a": "KEYS:A", "keys:b": "KEYS:B"}
    assert await store.settings_under("key_") == {"key_": "KEY_"}, "'_' is a character, not a wildcard"
    assert await store.settings_under("none:") == {}


# file bytes ---------------------------------------------------------------------------------------


def _blob(text: str) -> Blob:
    return Blob.of(text.encode())


async def _committed_with(store: Store, *blobs: Blob, run_id: str | None = None, **fields: Any) -> RunRow:
    run = run_row(run_id or new_id("run_"), **fields)
    await store.commit(Commit(run, [event(run.run_id, 0)], None, blobs=list(blobs)))
    return run


async def test_file_bytes_are_committed_with_the_run_and_read_only_through_it(store: Store) -> None:
    report, photo = _blob("the Q3 report"), _blob("a photo")
    run = await _committed_with(store, report, photo, report)  # the same bytes twice: one blob
    other = await _committed_with(store, photo)
    found = await store.read_blobs(run.run_id, [report.digest, photo.digest, _blob("never").digest])
    assert found == {report.digest: report.data, photo.digest: photo.data}
    assert await store.read_blobs(other.run_id, [report.digest, photo.digest]) == {photo.digest: photo.data}, (
        "a run reads only the blobs linked to it, even by a digest it somehow holds"
    )
    assert await store.read_blobs(run.run_id, []) == {}
    moved, _ = await advance(store, run)  # a later commit that links a blob again changes nothing
    await store.commit(Commit(run_row(run.run_id, last_sequence=2), [event(run.run_id, 2)], 1, blobs=[report]))
    assert (await store.read_blobs(moved.run_id, [report.digest]))[report.digest] == report.data


async def test_a_refused_commit_stores_no_file_bytes(store: Store) -> None:
    run = await _committed_with(store)
    stale = Commit(run_row(run.run_id, last_sequence=1), [event(run.run_id, 1)], -1, blobs=[_blob("late")])
    with pytest.raises(SequenceConflict):
        await store.commit(stale)
    assert await store.read_blobs(run.run_id, [_blob("late").digest]) == {}


async def test_a_purge_takes_the_blobs_only_its_runs_refer_to(store: Store) -> None:
    shared, own, live = _blob("shared"), _blob("own"), _blob("live")
    ended = await _committed_with(store, shared, own, status="completed")
    kept = await _committed_with(store, shared, status="completed", updated_at=at(100))
    running = await _committed_with(store, live)
    assert await store.purge_runs(at(50), 10) == [ended.run_id]
    assert await store.read_blobs(ended.run_id, [shared.digest, own.digest]) == {}
    assert await store.read_blobs(kept.run_id, [shared.digest]) == {shared.digest: shared.data}
    assert await store.purge_runs(at(200), 10) == [kept.run_id], "the running run is never purged"
    assert await store.read_blobs(running.run_id, [live.digest]) == {live.digest: live.data}
    again = await _committed_with(store, shared)  # the same bytes after every run that had them went
    assert await store.read_blobs(again.run_id, [shared.digest]) == {shared.digest: shared.data}

-- File bytes: the inline bytes of A2A file parts, stored once per content, and the runs that
-- refer to each.
--
-- A blob is named by the sha256 of its bytes (``sha256:<hex>``), so the same file sent twice
-- is kept once. It is written in the commit whose events or messages first refer to it, and
-- linked to that run; events, run state and task history hold the reference only. A run reads
-- only the blobs linked to it, and the purge that deletes a run deletes the blobs no other run
-- is linked to. The small columns come first: what follows a blob of many pages would be read
-- only after it.
CREATE TABLE blobs (
    digest     TEXT PRIMARY KEY,
    size       INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    data       BLOB NOT NULL
);

CREATE TABLE run_blobs (
    run_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (run_id, digest)
) WITHOUT ROWID;
-- the purge asks whether another run still refers to a blob
CREATE INDEX run_blobs_by_digest ON run_blobs (digest);

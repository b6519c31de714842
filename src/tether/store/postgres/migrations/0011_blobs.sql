-- PostgreSQL twin of sqlite/migrations/0011_blobs.sql.
CREATE TABLE blobs (
    digest     TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    data       BYTEA NOT NULL
);

CREATE TABLE run_blobs (
    run_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (run_id, digest)
);
CREATE INDEX run_blobs_by_digest ON run_blobs (digest);

-- Outbound credentials (the same as sqlite/migrations/0008_*.sql): secrets this host
-- presents to another agent when a hand-off names them (`tether credentials add`).
-- The secret is sealed with the host key, its origin bound in as associated data, so a row
-- moved to another origin no longer opens; only the fingerprint is ever shown.
CREATE TABLE outbound_credentials (
    name               TEXT PRIMARY KEY,
    origin             TEXT NOT NULL,
    scheme             TEXT NOT NULL,
    secret             BYTEA NOT NULL,
    secret_fingerprint TEXT NOT NULL,
    created_at         TEXT NOT NULL
);

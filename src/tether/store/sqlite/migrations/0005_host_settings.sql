-- Facts every host of one store must agree on (e.g. the fingerprint of the shared host
-- key): the first host writes them, the others check against them.
CREATE TABLE host_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

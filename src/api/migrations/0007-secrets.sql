-- Credentials (issue 10, docs/architecture.md "Credentials"): secrets the
-- egress gateway injects into a sandbox's requests, so they never enter it.
--
-- sealed is the value as src/shared/sealed-secret.h seals it to space-gw's
-- public key ("s1." + base64), with the secret's name as associated data:
-- space-api stores it and hands it to the node with the policy, but holds no
-- key that opens it (only space-gw does), and no API ever returns it.
--
-- owner is the scope of the API key's owner (sandboxes.client_id); name is
-- unique per owner ([A-Za-z0-9_-]{1,64}, the name rules use in
-- {{secret:NAME}}). sandbox_id is NULL for the owner's own secrets; it names
-- the sandbox for the literal header values an E2B network.rules transform
-- gave at create (their names start with '_', which user names cannot),
-- which are deleted with that sandbox. version counts rotations (1 at
-- create): E2B's currentVersion. metadata is an object of strings as TEXT.
CREATE TABLE secrets (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    sandbox_id TEXT,
    sealed TEXT NOT NULL,
    metadata TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE UNIQUE INDEX secrets_owner_name ON secrets (owner, name);
CREATE INDEX secrets_sandbox_id ON secrets (sandbox_id);

-- The secret names a request's injection used (gw-proto.h audit records,
-- "secret": comma-joined names), copied out of the record like proto and
-- verdict. Never a value. NULL for records without an injection.
ALTER TABLE egress_audit ADD COLUMN secret TEXT;

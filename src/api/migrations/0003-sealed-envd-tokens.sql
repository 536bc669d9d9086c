-- Envd access tokens at rest (issue 7 item 6, docs/security.md "Tokens at
-- rest"): the api must hand a sandbox's token back (E2B connect), so it
-- cannot keep only a hash; it keeps the token sealed (src/api/secretbox.h,
-- AES-256-GCM under <data>/store.key, never in the database) in this
-- column. store.c seals the plaintext tokens an older release left in
-- envd_access_token right after this script, in the same transaction
-- (migration_steps[]), and migration 4 drops the plaintext column.

ALTER TABLE sandboxes ADD COLUMN envd_access_token_sealed TEXT;

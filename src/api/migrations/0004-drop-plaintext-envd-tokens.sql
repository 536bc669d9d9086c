-- Migration 3 sealed every token into envd_access_token_sealed and cleared
-- envd_access_token; dropping the column means no code can write a
-- plaintext token there again. (SQLite >= 3.35 knows DROP COLUMN.)

ALTER TABLE sandboxes DROP COLUMN envd_access_token;

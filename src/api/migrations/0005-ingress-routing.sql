-- What the ingress needs beyond 0001 (docs/architecture.md "Ingress").

-- The route cache's poll (src/api/route-cache.h): every tick each space-api
-- reads the sandboxes whose updated_at moved since its previous poll, so a
-- sandbox another replica created or killed on the same database is routed
-- (or refused) by this replica's ingress within about a second. Every write
-- of a sandbox row stamps updated_at; this index keeps the poll cheap
-- however long the history of killed rows grows.
CREATE INDEX sandboxes_updated_at ON sandboxes (updated_at);

-- E2B network.allowPublicTraffic: false. 1 when the sandbox's user ports (all
-- but envd's) demand its traffic access token (e2b-traffic-access-token).
-- The token itself is not stored: it is derived from the envd access token
-- (sandbox_traffic_token()), so it is protected at rest exactly as that is.
ALTER TABLE sandboxes ADD COLUMN private_traffic BIGINT NOT NULL DEFAULT 0;

-- Per-template default egress policy (issue 10 "Injection rules per sandbox
-- (and per template as a default)", docs/architecture.md "Credentials").
--
-- network is the stored text of a native policy exactly as a sandbox's
-- sandboxes.network holds it (api/egress.h: {"native": {...}}), checked by
-- the same parser (gw/policy.c) when it is set. A create that gives no
-- network policy of its own copies it into the new sandbox's row; one that
-- gives a policy gets that one instead (the request's replaces the
-- template's, nothing is merged). Its inject rules name secrets, never hold
-- one. owner is the scope secrets are keyed by (secrets.owner); template is
-- a template name (sandbox-id.h template_name_is_valid()). No foreign key:
-- templates live on the nodes, not in this database.
CREATE TABLE template_network (
    owner TEXT NOT NULL,
    template TEXT NOT NULL,
    network TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (owner, template)
);

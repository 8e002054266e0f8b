-- Current definitions: what the human decision needs beyond the core tables (migration
-- 0008): the lookups of the API and the audit chain over manual decisions. Before
-- 06_commits.sql, whose manual commit writes the chain.
-- Applied in file-name order onto an empty schema, these files build what the migrations build
-- step by step (tests/integration/test_schema_files.py compares the two catalogs). A schema
-- change edits the definition here AND adds a migration under resolver/db/migrations/sql/.

-- Lookup of a case by the approval it executes.
CREATE INDEX ix_approved_action_dispatches_approval_request_id
    ON approved_action_dispatches (approval_request_id);

-- The decisions list, newest first.
CREATE INDEX ix_recovery_resolutions_manual
    ON approved_action_recovery_resolutions (resolved_at_ms, resolution_id)
    WHERE source = 'manual';

-- The audit chain: one link per manual decision, written by the decision's own statement.
-- `content` is the canonical JSON of the decision as committed (resolution and authorization
-- facts); `hash` = sha256(prev_hash || content), hex. The link holds its content; an
-- --include-audit prune exports it, then deletes it with its decision (migration 0015), and
-- `resolver audit verify --export` walks the pruned range from the export.
CREATE TABLE recovery_audit_chain (
    seq bigint NOT NULL,
    mutation_id text NOT NULL,
    dispatch_id text NOT NULL,
    content text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    recorded_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_audit_chain PRIMARY KEY (seq),
    CONSTRAINT uq_recovery_audit_chain_mutation_id UNIQUE (mutation_id),
    CONSTRAINT ck_recovery_audit_chain_seq_positive CHECK (seq >= 1),
    CONSTRAINT ck_recovery_audit_chain_hashes_hex
        CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_audit_chain_content_bounded CHECK (octet_length(content) <= 8192)
);
CREATE TRIGGER recovery_audit_chain_immutable BEFORE UPDATE OR DELETE ON recovery_audit_chain
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

-- The chain's head: one row. Each decision updates it (seq + 1, the new hash; prev_hash keeps
-- the old one, which RETURNING cannot see otherwise) before it inserts its link, so
-- concurrent decisions queue on this row lock and each links to the head committed before it
-- (READ COMMITTED re-reads the row after the wait).
CREATE TABLE recovery_audit_head (
    id smallint NOT NULL,
    seq bigint NOT NULL,
    hash text NOT NULL,
    prev_hash text NOT NULL,
    CONSTRAINT pk_recovery_audit_head PRIMARY KEY (id),
    CONSTRAINT ck_recovery_audit_head_one_row CHECK (id = 1),
    CONSTRAINT ck_recovery_audit_head_hashes_hex
        CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$')
);
INSERT INTO recovery_audit_head (id, seq, hash, prev_hash)
VALUES (1, 0, repeat('0', 64), repeat('0', 64));

-- The canonical content of a manual decision's audit link: resolver_commit_manual writes it,
-- `resolver audit verify` rebuilds it from the stored facts with the same functions, so the
-- two agree only while the facts are unchanged. json, not jsonb: the text keeps this order.
CREATE FUNCTION resolver_audit_authorization(
    p_user_id text, p_permission text, p_project_id text, p_project_version bigint,
    p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[],
    p_authorized_at_ms bigint)
RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'user_id', p_user_id, 'permission', p_permission, 'project_id', p_project_id,
        'project_version', p_project_version, 'role_binding_version', p_role_binding_version,
        'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', p_authorized_at_ms)
$$;

CREATE FUNCTION resolver_audit_content(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text,
    p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text,
    p_reason_code text, p_resolved_at_ms bigint, p_authorizations json)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'v', 1, 'dispatch_id', p_dispatch_id, 'mutation_id', p_mutation_id,
        'source', 'manual', 'outcome', p_outcome, 'overridden_finding', p_finding,
        'evidence_digest', p_evidence_digest,
        'expected_execution_version', p_expected_execution_version,
        'actor_user_id', p_actor_user_id, 'reason_code', p_reason_code,
        'resolved_at_ms', p_resolved_at_ms, 'authorizations', p_authorizations)::text
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint),
    resolver_audit_content(text, text, text, text, text, bigint, text, text, bigint, json)
FROM PUBLIC;

-- Ledger entries are insert-only: the resolver's own guard refuses every UPDATE and DELETE
-- but the prune's. Applied again by `resolver migrate` whenever it must (idempotent).
DROP TRIGGER IF EXISTS ledger_entries_immutable ON ledger_entries;
CREATE TRIGGER ledger_entries_immutable
    BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

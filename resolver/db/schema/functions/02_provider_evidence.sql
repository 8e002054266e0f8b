-- Internal receipts are insert-only. Providers' own tables get their triggers from the
-- provider's definitions (resolver/db/provider_schemas.py).
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

CREATE TRIGGER action_receipts_immutable
    BEFORE UPDATE OR DELETE ON action_receipts
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

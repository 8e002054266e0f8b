-- The ledger's table: the executor books entries, the evidence reader reads them.
GRANT SELECT, INSERT ON ledger_entries TO resolver_executor;
GRANT SELECT ON ledger_entries TO resolver_evidence_reader;

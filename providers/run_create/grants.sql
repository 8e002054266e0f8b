-- The run service writes and settles its origin facts (as the executor role); providers only read them.
GRANT SELECT, INSERT, UPDATE ON run_origin_facts TO resolver_executor;
GRANT SELECT ON run_origin_facts TO resolver_evidence_reader;

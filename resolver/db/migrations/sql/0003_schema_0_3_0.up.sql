-- From the tables of release 0.2.0 to those of release 0.3.0, in one step. Tables, columns,
-- constraints, indexes and privileges only: `resolver migrate` has already replaced the
-- functions and adds the triggers after this file (resolver/db/README.md).

-- The sessions that LISTEN on the outcome feed's channel, each until its registration lapses:
-- a settling commit notifies only while one is registered (resolver_outcomes_notify).
CREATE TABLE recovery_outcome_listeners (
    pid integer NOT NULL,
    listening_until_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_outcome_listeners PRIMARY KEY (pid)
);

-- Back to the tables of release 0.2.0: the feed's listener registrations go (a 0.2.0 commit
-- notifies whether anyone listens or not).

DROP TABLE recovery_outcome_listeners;

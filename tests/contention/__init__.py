"""Multi-replica contention and fault-injection suite with a history checker."""

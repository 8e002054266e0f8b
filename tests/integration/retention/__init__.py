"""Retention: the prune command and its batches."""

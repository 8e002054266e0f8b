"""Retention: which terminal records may go, and the batched prune that removes them."""

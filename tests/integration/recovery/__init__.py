"""The recovery cycle: claim, inspect, fenced commit, and the replica loop."""

"""The `resolver` command and the demo, run as an operator runs them."""

"""The approved-action recovery resolver: evidence-only recovery of outcome-unknown executions."""

__version__ = "0.3.0"

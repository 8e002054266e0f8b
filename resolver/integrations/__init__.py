"""Integrations with agent and workflow frameworks, each an optional extra of its own."""

"""The manual-resolution API, its edge and the operator console."""

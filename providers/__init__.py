"""Built-in evidence providers, one module each."""

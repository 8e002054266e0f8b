"""`python -m resolver` is the `resolver` command."""

from resolver.app.cli import main

main()

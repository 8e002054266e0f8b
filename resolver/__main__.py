"""`python -m resolver` is the `resolver` command."""

from resolver.cli import main

main()

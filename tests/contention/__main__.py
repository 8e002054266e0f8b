"""`python -m tests.contention [--soak] [--seed N]`: run a profile and print its report."""

from __future__ import annotations

import argparse
import logging
import random
import sys

from .harness import PROFILES, run_profile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.contention")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--soak", action="store_true", help="shorthand for --profile soak")
    parser.add_argument("--seed", type=int, default=None, help="replay a run from its seed")
    parser.add_argument("--keep", action="store_true", help="keep histories even on success")
    args = parser.parse_args(argv)
    # The pool logs every connection the faults break; the report says what matters.
    logging.getLogger("psycopg").setLevel(logging.CRITICAL)
    profile = PROFILES["soak" if args.soak else args.profile]
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"running contention profile {profile.name} with seed {seed}", flush=True)
    report = run_profile(profile, seed, keep=args.keep)
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

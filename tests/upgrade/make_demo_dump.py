"""Writes tests/upgrade/release-<version>.sql for a release after 0.1.0: a database that
release's own `resolver migrate` built and its own `resolver demo` filled (automatic
resolutions, the manual queue, receipts, the outcome feed), for the upgrade tests. Run it with a
checkout of that release first on the path, against an empty database:

    git worktree add --detach /tmp/release-0.2.0 67d83c4
    PYTHONPATH=/tmp/release-0.2.0 python tests/upgrade/make_demo_dump.py \
        postgresql://postgres@127.0.0.1:5432/empty tests/upgrade/release-0.2.0.sql

(67d83c4 is the commit that recorded 0.2.0's public surface as released.) It is not part of
the suite: the dump it writes is. The demo's dispatch ids are random, its ephemeral receipt
key too: a dump written again differs in its rows, never in its schema.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from release_dump import write_dump

import resolver
from resolver.db import migrate


def main(url: str, out: Path) -> None:
    env = dict(os.environ, RESOLVER_DATABASE_URL=url)
    # `-m` puts the working directory first on the path: the release's checkout, not this one.
    release = Path(resolver.__file__).parents[1]
    for command in (["migrate"], ["demo", "--count", "2"]):
        subprocess.run(
            [sys.executable, "-m", "resolver", *command], check=True, env=env, cwd=release
        )
    heading = (
        f"A database release {resolver.__version__} migrated ({migrate.head_revision()}) and"
        " filled by its demo (tests/upgrade/make_demo_dump.py)."
    )
    write_dump(url, out, heading)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))

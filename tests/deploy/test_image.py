"""deploy/Dockerfile built for real (buildah, a debootstrapped Debian base) and run.

The image runs as the non-root user, holds no shell, no compiler and nothing from tests/,
and its `resolver migrate` and `resolver run --once` work against the test PostgreSQL: a
crashed execution whose receipt was written is settled `succeeded` by the image.
Skipped, with the reason, where buildah or debootstrap is missing (.ci/run installs them).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as pgsql

from resolver import __version__
from resolver.core.domain import Outcome
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import ExecutionClient
from resolver.executor.side_effects import SideEffect, SideEffectRunner
from tests.helpers import image as img
from tests.helpers.database import new_spec
from tests.helpers.postgres import with_database
from tests.helpers.stores import Storage

pytestmark = pytest.mark.skipif(img.missing_tools() is not None, reason=str(img.missing_tools()))

KID, SECRET = "image-k1", "1d" * 32
UID = "10001"
SHELLS = ("bin/sh", "bin/bash", "bin/dash", "usr/bin/sh", "usr/bin/bash", "usr/bin/dash")
COMPILERS = ("cc", "gcc", "c++", "g++", "clang", "tcc", "ld", "as", "make")


@pytest.fixture(scope="module")
def built(request: pytest.FixtureRequest) -> img.BuiltImage:
    # Tagged with the release's version, as a release's image is (docs/versioning.md).
    result = img.build(f"localhost/approved-action-resolver:{__version__}")
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():  # type: ignore[union-attr]
        print(
            f"\nimage {result.name}: {result.size}, built in {result.build_seconds:.0f} s "
            f"(base {img.BASE_IMAGE})"
        )
    return result


@pytest.fixture(scope="module")
def rootfs(built: img.BuiltImage) -> Iterator[Path]:
    with img.container(built.name) as name, img.mounted(name) as path:
        yield path


def test_the_image_is_configured_to_run_as_the_non_root_user(built: img.BuiltImage) -> None:
    user = img.run(
        ["buildah", "inspect", "--type", "image", "--format", "{{.OCIv1.Config.User}}", built.name]
    )
    assert user.strip() == f"{UID}:{UID}"
    with img.container(built.name) as name:
        done = img.run_in(
            name, ["/opt/resolver/bin/python", "-c", "import os; print(os.getuid(), os.getgid())"]
        )
    assert (done.returncode, done.stdout.split()) == (0, [UID, UID]), done.stderr


def test_the_image_says_its_version(built: img.BuiltImage) -> None:
    label = img.run(
        [
            "buildah",
            "inspect",
            "--type",
            "image",
            "--format",
            '{{index .OCIv1.Config.Labels "org.opencontainers.image.version"}}',
            built.name,
        ]
    )
    assert label.strip() == __version__
    assert built.name.endswith(f":{__version__}")
    with img.container(built.name) as name:
        done = img.run_in(name, ["/opt/resolver/bin/resolver", "--version"])
    assert done.returncode == 0 and done.stdout.strip().endswith(__version__), done.stderr


def test_the_image_has_no_shell(built: img.BuiltImage, rootfs: Path) -> None:
    assert [p for p in SHELLS if (rootfs / p).exists() or (rootfs / p).is_symlink()] == []
    with img.container(built.name) as name:
        assert img.run_in(name, ["/bin/sh", "-c", "true"]).returncode != 0


def test_the_image_has_no_compiler(rootfs: Path) -> None:
    found = [
        str(path.relative_to(rootfs))
        for directory in ("usr/bin", "usr/local/bin", "bin")
        for path in (rootfs / directory).glob("*")
        if path.name in COMPILERS or path.name.startswith(("gcc-", "x86_64-linux-gnu-gcc"))
    ]
    assert found == []
    assert not (rootfs / "usr" / "lib" / "gcc").exists() or not list(
        (rootfs / "usr" / "lib" / "gcc").rglob("cc1")
    )


def test_nothing_from_tests_reaches_the_image(rootfs: Path) -> None:
    assert not (rootfs / "src").exists(), "the build stage's sources stay in the build stage"
    installed = rootfs / "opt" / "resolver"
    assert (installed / "bin" / "resolver").exists()
    leaked = [
        str(path.relative_to(rootfs))
        for path in installed.rglob("*")
        if path.name in {"resolver_test_support", "conftest.py", "providers_for_tests.py"}
        or (path.name == "tests" and (path / "support").exists())
    ]
    assert leaked == []


@pytest.fixture
def empty_database(pg_server: str) -> Iterator[str]:
    name = f"image_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
    yield with_database(pg_server, name)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(pgsql.Identifier(name)))


def test_the_image_migrates_and_settles_a_crash_from_its_receipt(
    built: img.BuiltImage, empty_database: str, tmp_path: Path
) -> None:
    with img.container(built.name) as name:
        migrated = img.run_in(
            name, ["resolver", "migrate"], env={"RESOLVER_DATABASE_URL": empty_database}
        )
        assert migrated.returncode == 0, migrated.stderr
        dispatch_id = crashed_after_its_receipt(empty_database)
        (tmp_path / "providers.yaml").write_text(
            "action_types:\n  db.mutation: {provider: internal_mutation}\n"
        )
        tmp_path.chmod(0o755)
        settled = img.run_in(
            name,
            ["resolver", "run", "--once"],
            env={
                "RESOLVER_DATABASE_URL": empty_database,
                "RESOLVER_CONFIG": "/config/providers.yaml",
                "RESOLVER_RECEIPT_KEYS": f"{KID}={SECRET}",
            },
            volumes=[f"{tmp_path}:/config:ro"],
        )
    assert settled.returncode == 0, settled.stderr
    with psycopg.connect(empty_database) as conn:
        row = conn.execute(
            "SELECT e.state, r.source FROM approved_action_executions AS e"
            " JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)"
            " WHERE dispatch_id = %s",
            (dispatch_id,),
        ).fetchone()
    assert row == ("succeeded", "automatic")


class ExecutorCrashed(Exception):
    """Leaves the SDK's block without completing, as a dead executor would."""


def die_after_the_receipt(effect: SideEffect) -> None:
    with effect.transaction() as conn:
        effect.write_receipt(conn, Outcome.SUCCEEDED, "applied", receipt_id="image-1")
    raise ExecutorCrashed


def crashed_after_its_receipt(database_url: str) -> str:
    """An execution past the barrier whose receipt committed and whose executor then died;
    returns once its lease has run out on the database clock."""
    keys = KeyRing({KID: bytes.fromhex(SECRET)}, signing_kid=KID)
    with Storage(database_url) as store:
        spec = ExecutionClient(store, owner="platform").create_dispatch(new_spec("db.mutation"))
        with (
            SideEffectRunner(
                store, database_url=database_url, owner="image-test", keys=keys, lease_seconds=2.0
            ) as runner,
            pytest.raises(ExecutorCrashed),
        ):
            runner.run_once(spec.dispatch_id, die_after_the_receipt)
        deadline = time.monotonic() + 30
        while not (view := store.get_execution(spec.dispatch_id)) or not view.recovery_required:
            assert time.monotonic() < deadline, "the lease never ran out"
            time.sleep(0.02)
    return spec.dispatch_id

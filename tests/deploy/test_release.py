"""A release as adopters get it: the sdist, the wheel built from that sdist, installed on its
own and migrating a real database with nothing but what it ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import psycopg
import pytest

import resolver
from tests.helpers.k8s import ROOT
from tests.helpers.postgres import DatabaseFactory


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # From a copy of what a release packs: a build/ or egg-info left in the work tree would
    # otherwise leak into it.
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("sdist")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("resolver", "providers"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob("*.tar.gz")
    return built


@pytest.fixture(scope="module")
def installed(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from the sdist, installed into a directory of its own."""
    wheels, target = tmp_path_factory.mktemp("wheels"), tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", str(sdist), "-w", str(wheels)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("*.whl")
    assert f"-{resolver.__version__}-" in wheel.name
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target


def _run_installed(site: Path, *args: str, env: dict[str, str] | None = None) -> str:
    # The installed copy first on the path: the work tree's editable install never answers.
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from resolver.app.cli import main; main()", *args],
        env={**os.environ, **(env or {}), "PYTHONPATH": str(site)},
        cwd=site,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_sdist_is_named_for_the_version_and_holds_the_schema(sdist: Path) -> None:
    assert sdist.name == f"approved_action_resolver-{resolver.__version__}.tar.gz"
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    for needed in (
        "resolver/db/definitions.sql",
        "resolver/db/grants.sql",
        "resolver/db/migrations/sql/0001_schema_0_1_0.up.sql",
        "resolver/db/schema/functions/08_commits.sql",
        "resolver/human/console/index.html",
    ):
        assert any(name.endswith(needed) for name in names), needed


def test_the_installed_release_says_its_version_and_migrates_a_database(
    installed: Path, databases: DatabaseFactory
) -> None:
    where = subprocess.run(
        [sys.executable, "-c", "import resolver; print(resolver.__file__)"],
        env={**os.environ, "PYTHONPATH": str(installed)},
        cwd=installed,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(where.strip()).is_relative_to(installed)
    assert _run_installed(installed, "--version").strip().endswith(resolver.__version__)
    url = databases.create_empty()
    try:
        out = _run_installed(installed, "migrate", env={"RESOLVER_DATABASE_URL": url})
        assert "schema at revision" in out
        with psycopg.connect(url) as conn:
            functions = conn.execute(
                "SELECT count(*) FROM pg_proc WHERE proname LIKE 'resolver\\_%'"
            ).fetchone()
        assert functions is not None and functions[0] > 40
    finally:
        databases.drop(url)

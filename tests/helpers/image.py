"""Build deploy/Dockerfile without a container engine: debootstrap + buildah (chroot isolation).

The Debian bookworm base is made once by `debootstrap --variant=minbase` and cached as a tar
under ~/.cache (CI pays for it once); buildah imports it as a local image whose tag is the
recipe's hash. The build installs from a wheel directory the host fills with `pip wheel`,
mounted into the build, so it needs no package index of its own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.cache import cache_root, locked_cache_dir

ROOT = Path(__file__).resolve().parents[2]
CACHE = cache_root() / "image"
SUITE = "bookworm"
APT_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")


def _apt_mirror() -> str | None:
    """The Debian mirror this machine's apt already uses (its first `URIs:` ending in /debian)."""
    if not APT_SOURCES.is_file():
        return None
    for line in APT_SOURCES.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "URIs" and value.strip().rstrip("/").endswith("/debian"):
            return value.strip()
    return None


# debootstrap needs a mirror: the one named by DEBOOTSTRAP_MIRROR, else apt's own.
MIRROR = os.environ.get("DEBOOTSTRAP_MIRROR") or _apt_mirror()
# What the Dockerfile needs of a base: Debian's python3 with venv (ensurepip), and CA
# certificates for TLS to PostgreSQL and OTLP endpoints.
PACKAGES = ("python3", "python3-venv", "ca-certificates")
# Trimmed from the root filesystem, as slim images do: no documentation, manuals or
# translations (the resolver logs in English, JSON). Part of the recipe's hash.
TRIMMED = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale")
RECIPE = hashlib.sha256(
    f"{SUITE} minbase {' '.join(PACKAGES)} trim {' '.join(TRIMMED)} v2".encode()
).hexdigest()[:12]
BASE_IMAGE = f"localhost/debian-bookworm-python:{RECIPE}"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def missing_tools() -> str | None:
    for tool in ("buildah", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install buildah debootstrap)"
    if os.geteuid() != 0:
        return "debootstrap and buildah's chroot isolation need root here"
    if MIRROR is None:
        return f"no Debian mirror: set DEBOOTSTRAP_MIRROR ({APT_SOURCES} names none)"
    return None


def run(args: Sequence[str], *, timeout: float = 600, check: bool = True) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args[:3])} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def base_tarball() -> Path:
    """The debootstrapped root filesystem as a tar, made once per recipe."""
    tar = CACHE / f"debian-{SUITE}-minbase-{RECIPE}.tar"
    if tar.exists():
        return tar
    CACHE.mkdir(parents=True, exist_ok=True)
    rootfs = CACHE / f"rootfs-{RECIPE}"
    shutil.rmtree(rootfs, ignore_errors=True)
    include = ",".join(PACKAGES)
    assert MIRROR is not None, missing_tools()
    run(
        ["debootstrap", "--variant=minbase", f"--include={include}", SUITE, str(rootfs), MIRROR],
        timeout=1800,
    )
    pack_rootfs(rootfs, tar)
    shutil.rmtree(rootfs)
    return tar


def pack_rootfs(rootfs: Path, tar: Path) -> None:
    # Downloaded packages and indexes are not part of a base; /dev comes from the runtime.
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists", "dev", *TRIMMED):
        for path in (rootfs / leftover).glob("*"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    partial = tar.with_suffix(".partial")
    run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."])
    partial.rename(tar)


def image_exists(name: str) -> bool:
    return (
        subprocess.run(
            ["buildah", "inspect", "--type", "image", name], capture_output=True, check=False
        ).returncode
        == 0
    )


def base_image() -> str:
    """The debootstrap base as a local image (imported from the cached tar when missing)."""
    if image_exists(BASE_IMAGE):
        return BASE_IMAGE
    tar = base_tarball()
    container = run(["buildah", "from", "scratch"]).strip()
    try:
        run(["buildah", "add", container, str(tar), "/"])
        # A scratch image has no PATH: give RUN steps and `python3` the usual one.
        run(["buildah", "config", "--env", f"PATH={DEFAULT_PATH}", container])
        run(["buildah", "commit", "--quiet", container, BASE_IMAGE])
    finally:
        run(["buildah", "rm", container], check=False)
    return BASE_IMAGE


def wheelhouse() -> Path:
    """Wheels of the resolver's dependencies (with the otlp extra) and its build backend, from
    the host; the build installs the resolver itself from its source. Kept while
    pyproject.toml and the host's Python are unchanged."""
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + sys.version.encode()).hexdigest()[
        :12
    ]
    out = CACHE / f"wheels-{key}"
    if out.is_dir():
        return out
    partial = CACHE / f"wheels-{key}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    pip = [sys.executable, "-m", "pip"]
    run([*pip, "wheel", "--quiet", "--wheel-dir", str(partial), f"{ROOT}[otlp]"])
    run([*pip, "download", "--quiet", "--dest", str(partial), "setuptools>=69", "wheel"])
    for own in partial.glob("approved_action_resolver-*.whl"):
        own.unlink()
    partial.rename(out)
    return out


@dataclass(frozen=True)
class BuiltImage:
    name: str
    build_seconds: float
    size: str


def build(tag: str) -> BuiltImage:
    with locked_cache_dir("image"):  # one debootstrap and one wheelhouse at a time
        base = base_image()
        wheels = wheelhouse()
    started = time.monotonic()
    run(
        [
            "buildah",
            "bud",
            "--isolation",
            "chroot",
            "--quiet",
            "--build-arg",
            f"PYTHON_IMAGE={base}",
            "--build-arg",
            "PIP_FIND_LINKS=/wheels",
            "--build-arg",
            "PIP_NO_INDEX=1",
            "--volume",
            f"{wheels}:/wheels:ro",
            "-f",
            str(ROOT / "deploy" / "Dockerfile"),
            "-t",
            tag,
            str(ROOT),
        ],
        timeout=1800,
    )
    seconds = time.monotonic() - started
    size = run(["buildah", "images", "--format", "{{.Size}}", tag]).strip().splitlines()[0]
    return BuiltImage(tag, seconds, size)


@contextmanager
def container(image: str) -> Iterator[str]:
    name = run(["buildah", "from", "--quiet", image]).strip()
    try:
        yield name
    finally:
        run(["buildah", "rm", name], check=False)


@contextmanager
def mounted(container_name: str) -> Iterator[Path]:
    path = Path(run(["buildah", "mount", container_name]).strip())
    try:
        yield path
    finally:
        run(["buildah", "umount", container_name], check=False)


def run_in(
    container_name: str,
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    volumes: Sequence[str] = (),
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    args = ["buildah", "run", "--isolation", "chroot"]
    for key, value in (env or {}).items():
        args += ["--env", f"{key}={value}"]
    for volume in volumes:
        args += ["--volume", volume]
    return subprocess.run(
        [*args, container_name, "--", *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )

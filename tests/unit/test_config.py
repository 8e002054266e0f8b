"""Configuration errors name the variable and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from resolver.app.config import load_provider_config, load_settings
from resolver.core.errors import ConfigError
from resolver.core.provider import build_registry


def test_defaults_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RESOLVER_PAGE_SIZE", raising=False)
    settings = load_settings()
    assert settings.page_size == 16


def test_page_size_over_the_hard_cap_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOLVER_PAGE_SIZE", "65")
    with pytest.raises(
        ConfigError, match=r"RESOLVER_PAGE_SIZE: must be between 1 and 64.*got '65'"
    ):
        load_settings()


def test_non_numeric_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOLVER_CADENCE_SECONDS", "soon")
    with pytest.raises(ConfigError, match="RESOLVER_CADENCE_SECONDS"):
        load_settings()


def test_recovery_lease_must_exceed_provider_timeout_plus_margin() -> None:
    with pytest.raises(ConfigError, match=r"RESOLVER_RECOVERY_LEASE_SECONDS=10 must exceed"):
        load_settings(
            recovery_lease_seconds=10, default_provider_timeout_seconds=8, commit_margin_seconds=5
        )


def test_lease_budget_names_the_default_timeout_when_it_sets_the_figure() -> None:
    """Every provider at 2 s, the default at 10 s: the error must say it is the default."""
    settings = load_settings(
        recovery_lease_seconds=16, default_provider_timeout_seconds=1, commit_margin_seconds=5
    )
    settings.check_lease_budget(2)  # 2 + 5 < 16
    with pytest.raises(
        ConfigError,
        match=r"longest provider timeout \(10s: RESOLVER_DEFAULT_PROVIDER_TIMEOUT_SECONDS, "
        r"which counts even when every provider sets its own timeout_seconds\)",
    ):
        load_settings(
            recovery_lease_seconds=14, default_provider_timeout_seconds=10, commit_margin_seconds=5
        ).check_lease_budget(2)


def test_lease_budget_names_a_provider_timeout_when_it_is_longer() -> None:
    settings = load_settings(
        recovery_lease_seconds=20, default_provider_timeout_seconds=2, commit_margin_seconds=5
    )
    with pytest.raises(
        ConfigError, match=r"\(30s: a provider's timeout_seconds in the provider config\)"
    ):
        settings.check_lease_budget(30)


def test_missing_database_url_says_how_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RESOLVER_DATABASE_URL", raising=False)
    with pytest.raises(ConfigError, match="RESOLVER_DATABASE_URL is not set"):
        load_settings().require_database_url()


def test_provider_config_rejects_unknown_provider(tmp_path: Path) -> None:
    path = tmp_path / "providers.yaml"
    path.write_text("action_types:\n  shell.exec: {provider: telepathy}\n")
    with pytest.raises(ConfigError, match=r"action_types.shell.exec.provider: 'telepathy'"):
        build_registry(load_provider_config(path))


def test_provider_config_rejects_unknown_top_level_key(tmp_path: Path) -> None:
    path = tmp_path / "providers.yaml"
    path.write_text("actions: {}\n")
    with pytest.raises(ConfigError, match="one top-level key, action_types"):
        load_provider_config(path)


def test_provider_settings_are_validated(tmp_path: Path) -> None:
    path = tmp_path / "providers.yaml"
    path.write_text("action_types:\n  shell.exec: {provider: manual_only, colour: red}\n")
    with pytest.raises(
        ConfigError,
        match=r"action_types.shell.exec: colour: provider manual_only takes no settings",
    ):
        build_registry(load_provider_config(path))


def test_manual_only_is_discovered_through_entry_points(tmp_path: Path) -> None:
    path = tmp_path / "providers.yaml"
    path.write_text("action_types:\n  shell.exec: {provider: manual_only}\n")
    registry = build_registry(load_provider_config(path))
    assert registry.for_action("shell.exec") is not None
    assert registry.for_action("other") is None


def test_unknown_variables_get_the_closest_known_name() -> None:
    from resolver.app.config import unknown_variables

    environ = {
        "RESOLVER_PAGESIZE": "1",
        "RESOLVER_DATABASE_URL": "postgresql://x@h/d",
        "RESOLVER_TEST_WHATEVER": "1",
        "RESOLVER_APP_TOKEN": "t",
        "RESOLVER_COMPLETELY_OFF": "1",
        "PATH": "/bin",
    }
    assert unknown_variables(environ, extra={"RESOLVER_APP_TOKEN"}) == [
        ("RESOLVER_COMPLETELY_OFF", None),
        ("RESOLVER_PAGESIZE", "RESOLVER_PAGE_SIZE"),
    ]


def test_every_resolver_variable_the_code_reads_is_known() -> None:
    """A name read anywhere in the product but missing from the known set would be warned
    about as a typo while it works."""
    import re

    from resolver.app.config import TEST_PREFIX, known_variables

    root = Path(__file__).resolve().parents[2]
    named = {
        name
        for folder in ("resolver", "providers")
        for path in (root / folder).rglob("*.py")
        if "testing" not in path.parts
        for name in re.findall(r"\bRESOLVER_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text())
    }
    named = {n for n in named if not n.startswith(TEST_PREFIX)}
    assert named, "the scan found nothing: the pattern is broken"
    assert named - known_variables() == set()


def test_a_bad_database_url_is_refused_without_echoing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOLVER_DATABASE_URL", "mysql://u:s3cret@h/d")
    with pytest.raises(ConfigError) as raised:
        load_settings()
    assert "RESOLVER_DATABASE_URL: mysql:// is not a PostgreSQL" in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_every_variable_is_documented() -> None:
    from resolver.app.config import known_variables

    # configuration.md is "every setting": each variable has its row there, the ones read
    # outside Settings (receipt keys, the evidence URL) included.
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    missing = sorted(
        n for n in known_variables() if f"| `{n}`" not in doc and f", `{n}`" not in doc
    )
    assert missing == []


def test_settings_read_each_field_from_its_variable_in_any_case(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RESOLVER_PAGE_SIZE", "7")
    monkeypatch.setenv("resolver_cadence_seconds", "3.5")
    monkeypatch.setenv("RESOLVER_CONFIG", "/etc/resolver/providers.yaml")
    monkeypatch.setenv("RESOLVERPAGE_SIZE", "9")  # not the prefix: ignored
    settings = load_settings()
    assert (settings.page_size, settings.cadence_seconds) == (7, 3.5)
    assert settings.config == Path("/etc/resolver/providers.yaml")
    # A value passed in (a command-line option) wins over the environment's.
    assert load_settings(page_size=12).page_size == 12


def test_settings_validate_their_defaults_and_stay_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "h" * 200)
    with pytest.raises(ConfigError, match="RESOLVER_REPLICA_ID"):
        load_settings()
    settings = load_settings(replica_id="r1")
    with pytest.raises(ValidationError):
        settings.page_size = 3  # type: ignore[misc]

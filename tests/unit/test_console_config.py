"""The console's configuration: link-out templates, reason codes, OIDC client and its CSP."""

from __future__ import annotations

import json

import pytest

from resolver.app.config import load_settings
from resolver.core.errors import ConfigError
from resolver.human.console_config import DEFAULT_REASON_CODES, console_config


def test_defaults_offer_reason_codes_and_no_sign_in() -> None:
    config = console_config(client_id=None, issuer="https://idp.example")
    assert config.oidc is None and config.links == ()
    assert config.reason_codes == DEFAULT_REASON_CODES
    assert "connect-src 'self';" in config.content_security_policy()


def test_oidc_client_widens_connect_src_to_the_issuer_origin_only() -> None:
    config = console_config(client_id="console", issuer="https://idp.example/realms/ops/")
    assert config.oidc is not None and config.oidc.issuer == "https://idp.example/realms/ops"
    policy = config.content_security_policy()
    assert "connect-src 'self' https://idp.example;" in policy
    assert "script-src 'self';" in policy and "default-src 'none'" in policy


def test_links_and_codes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    links = [{"label": "Approval", "template": "https://p.example/a/{approval_request_id}"}]
    monkeypatch.setenv("RESOLVER_CONSOLE_LINKS", json.dumps(links))
    monkeypatch.setenv("RESOLVER_CONSOLE_REASON_CODES", "vendor_confirmed, node_lost")
    monkeypatch.setenv("RESOLVER_CONSOLE_OIDC_CLIENT_ID", "console")
    monkeypatch.setenv("RESOLVER_OIDC_ISSUER", "https://idp.example")
    config = load_settings().console()
    assert config.public_document() == {
        "oidc": {
            "issuer": "https://idp.example",
            "client_id": "console",
            "scope": "openid",
            "resource": None,
        },
        "links": links,
        "reason_codes": ["vendor_confirmed", "node_lost"],
    }


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ({"links": "not json"}, "RESOLVER_CONSOLE_LINKS"),
        ({"links": '{"label": "x"}'}, "RESOLVER_CONSOLE_LINKS"),
        (
            {"links": '[{"label": "x", "template": "javascript:alert(1)//{dispatch_id}"}]'},
            "http(s)",
        ),
        ({"links": '[{"label": "x", "template": "https://x.example/{secret}"}]'}, "secret"),
        ({"links": '[{"label": "x", "template": "https://x.example/", "y": 1}]'}, "y"),
        ({"reason_codes": "Fine Reason"}, "RESOLVER_CONSOLE_REASON_CODES"),
        ({"client_id": "console", "issuer": None}, "RESOLVER_OIDC_ISSUER"),
        ({"client_id": "console", "issuer": "http://idp.example"}, "https://"),
    ],
)
def test_bad_values_are_config_errors_naming_the_variable(
    fields: dict[str, str | None], names: str
) -> None:
    arguments: dict[str, str | None] = {
        "client_id": None,
        "issuer": "https://idp.example",
        **fields,
    }
    with pytest.raises(ConfigError, match=names.replace("(", r"\(").replace(")", r"\)")):
        console_config(**arguments)  # type: ignore[arg-type]

"""Connection strings in every form libpq takes: parsed, translated and redacted alike."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from resolver.core.errors import ConfigError
from resolver.db import dsn

SECRET = "pa ss%w0rd"
FORMS = {
    "url": "postgresql://app:pa%20ss%25w0rd@db:5432/main?sslmode=require",
    "postgres scheme": "postgres://app:pa%20ss%25w0rd@db:5432/main?sslmode=require",
    "sqlalchemy driver": "postgresql+psycopg://app:pa%20ss%25w0rd@db:5432/main?sslmode=require",
    "query password": "postgresql://app@db:5432/main?password=pa%20ss%25w0rd&sslmode=require",
    "key=value": "host=db port=5432 dbname=main user=app password='pa ss%w0rd' sslmode=require",
}
PARAMS = {
    "host": "db",
    "port": "5432",
    "dbname": "main",
    "user": "app",
    "password": SECRET,
    "sslmode": "require",
}


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_every_form_parses_to_the_same_parameters(form: str) -> None:
    assert dsn.parse(form) == PARAMS


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_every_form_is_redacted(form: str) -> None:
    redacted = dsn.redact(form)
    assert "pa ss" not in redacted and "w0rd" not in redacted
    assert "password=***" in redacted and "host=db" in redacted and "dbname=main" in redacted


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_every_form_translates_for_libpq_and_sqlalchemy(form: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    assert conninfo_to_dict(dsn.libpq_dsn(form)) == PARAMS
    url = dsn.sqlalchemy_url(form)
    assert url.drivername == "postgresql+psycopg" and url.password == SECRET
    assert SECRET not in repr(url)
    rendered = sa.engine.make_url(url.render_as_string(hide_password=False))
    assert (rendered.username, rendered.password, rendered.database) == ("app", SECRET, "main")
    assert dict(rendered.query) == {"host": "db", "port": "5432", "sslmode": "require"}


def test_several_hosts_and_a_socket_directory_survive() -> None:
    assert dsn.parse("postgresql://h1:5432,h2:5433/d")["host"] == "h1,h2"
    assert dict(dsn.sqlalchemy_url("postgresql:///d?host=/var/run/postgresql").query) == {
        "host": "/var/run/postgresql"
    }


def test_sslpassword_is_a_secret_too() -> None:
    assert "k3y" not in dsn.redact("host=db sslpassword=k3y")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("garbage", "not a PostgreSQL URL or key=value"),
        ("mysql://u:s3cret@h/d", "mysql:// is not a PostgreSQL connection string"),
        ("mysql+pymysql://u:s3cret@h/d", r"mysql\+pymysql:// is not a PostgreSQL"),
        ("http://h/d", "http:// is not a PostgreSQL"),
        ("", "empty"),
        ("host=h bogus=s3cret", "not a PostgreSQL URL or key=value"),
        ("postgresql://u:s3cret@h:0/d", "port '0' is not a TCP port"),
        ("postgresql://u:s3cret@h:x/d", "port 'x' is not a TCP port"),
    ],
)
def test_bad_strings_are_refused_without_quoting_them(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        dsn.parse(value)
    assert "s3cret" not in str(raised.value)
    assert "postgresql://" in str(raised.value)  # the fix: what a valid one looks like
    assert dsn.redact(value) == "<invalid connection string>"

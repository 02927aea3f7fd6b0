"""What pyproject.toml promises about installing and importing the plugin: the pytest11
entry points import where `fcntl` and `resource` do not (Windows), and the undocumented aiohttp helper
the HTTP client relies on is still there and behaves as it expects (the canary the
`aiohttp<4` bound in pyproject.toml names)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aiohttp.helpers
import pytest
from yarl import URL

from pytest_agenteval.models.http.client import HttpClient

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PROXY = "http://user:pw@proxy:3128"
CREDENTIALS = "Basic dXNlcjpwdw=="  # user:pw


def _entry_points() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project["entry-points"]["pytest11"].values())


def test_the_entry_points_are_the_modules_this_file_imports() -> None:
    assert sorted(_entry_points()) == ["pytest_agenteval.plugin.hooks", "pytest_agenteval.testing.fixtures"]


POSIX_ONLY = ("fcntl", "resource", "termios", "pwd", "grp")


def test_the_entry_points_import_without_posix_only_modules() -> None:
    """fcntl and resource (POSIX only) are imported where they are used (a ledger's lock,
    the controller's own usage), never at module top: with them unimportable, as on
    Windows, every module pytest loads at start-up still imports."""
    imports = "; ".join(f"import {module}" for module in _entry_points())
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in POSIX_ONLY)
    code = f"import sys; {blocked}; {imports}; print('imported')"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout.strip() == "imported", result.stderr


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """An environment with HTTP_PROXY=PROXY and no other proxy setting of this machine's."""
    import os

    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name == "REQUEST_METHOD":  # CGI: HTTP_PROXY ignored
            monkeypatch.delenv(name)
    monkeypatch.setenv("HTTP_PROXY", PROXY)
    return monkeypatch


def test_aiohttp_proxy_helper_returns_the_proxy_and_its_credentials(proxy_env: pytest.MonkeyPatch) -> None:
    """client.py `_proxy_for`: `get_env_proxy_for_url(URL)` -> (proxy URL, auth or None),
    the auth with `.encode()` giving the Proxy-Authorization header."""
    proxy, auth = aiohttp.helpers.get_env_proxy_for_url(URL("http://api.example.com/v1/chat/completions"))
    assert str(proxy) == "http://proxy:3128"
    assert isinstance(auth, aiohttp.BasicAuth)
    assert (auth.login, auth.password) == ("user", "pw")
    assert auth.encode() == CREDENTIALS


def test_aiohttp_proxy_helper_raises_lookup_error(proxy_env: pytest.MonkeyPatch) -> None:
    """Where NO_PROXY names the host, or no proxy is set for the scheme: LookupError (a
    subclass of it: KeyError is one), which `_proxy_for` reads as "no proxy"."""
    proxy_env.setenv("NO_PROXY", "api.example.com")
    with pytest.raises(LookupError):
        aiohttp.helpers.get_env_proxy_for_url(URL("http://api.example.com/v1/chat/completions"))
    proxy_env.delenv("NO_PROXY")
    with pytest.raises(LookupError):
        aiohttp.helpers.get_env_proxy_for_url(URL("https://api.example.com/v1/chat/completions"))


def test_the_client_takes_the_proxy_from_the_helper(proxy_env: pytest.MonkeyPatch) -> None:
    """What `_proxy_for` makes of the helper's answers: the proxy and its header; none for
    a host NO_PROXY names."""
    proxy, headers = HttpClient()._proxy_for("http://api.example.com/v1/chat/completions")
    assert str(proxy) == "http://proxy:3128"
    assert headers == {"Proxy-Authorization": CREDENTIALS}
    proxy_env.setenv("NO_PROXY", "api.example.com")
    assert HttpClient()._proxy_for("http://api.example.com/v1/chat/completions") == (None, {})

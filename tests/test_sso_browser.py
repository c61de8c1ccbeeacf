"""The login page with OpenID Connect configured, in chromium as an operator sees it:
the local form and the "Sign in with" button; the whole redirect flow through the real
provider's login page back to the console; a refusal's reason on the login page.
Screenshots in test-output/console/sso-*.png."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from console.roles import VIEWER, role_of
from tests.console_helpers import OUT, chromium_page
from tests.sso_helpers import (
    PROVIDER_NAME,
    apply_sso,
    oidc_env,
    op,  # noqa: F401 - the module's provider
    password,
)

pytestmark = pytest.mark.django_db(transaction=True)


def sign_in_at_provider(page, user: str) -> None:
    page.click("#sso-login")
    page.wait_for_selector("#op-username")
    page.fill("#op-username", user)
    page.fill("#op-password", password(user))
    page.click("#op-submit")


def test_sso_login_in_chromium(settings, monkeypatch, op, live_server):  # noqa: F811
    apply_sso(settings, monkeypatch, oidc_env(op))
    url = live_server.url
    with chromium_page(OUT) as page:
        page.goto(f"{url}/accounts/login/?next=/account/tokens/")
        button = page.locator("#sso-login")
        assert button.inner_text() == f"Sign in with {PROVIDER_NAME}"
        assert page.locator("input[name=password]").is_visible()
        page.screenshot(path=str(OUT / "sso-login-page.png"), full_page=True)

        sign_in_at_provider(page, "vera")
        page.wait_for_url(f"{url}/account/tokens/")
        assert page.locator(".who .role").inner_text() == "viewer"
        page.screenshot(path=str(OUT / "sso-signed-in.png"))

        page.click("button:has-text('log out')")
        page.wait_for_url(f"{url}/accounts/login/")
        page.context.clear_cookies()  # out of the provider too: the next user signs in
        page.goto(f"{url}/accounts/login/")
        sign_in_at_provider(page, "nora")
        page.wait_for_url(f"{url}/accounts/login/")
        message = page.locator("ul.messages li").inner_text()
        assert message.startswith(f"Sign-in with {PROVIDER_NAME} failed: nora signed in with")
        page.screenshot(path=str(OUT / "sso-refused.png"), full_page=True)
    assert role_of(get_user_model().objects.get(username="vera")) == VIEWER

"""The login page (local form, plus a "Sign in with <provider>" button when OIDC is
configured) and the OIDC redirect and callback views around mozilla-django-oidc's."""

from __future__ import annotations

import logging

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.http import Http404
from django.shortcuts import redirect
from mozilla_django_oidc import views as oidc_views

from console import audit
from console.sso.refusal import refusal

log = logging.getLogger(__name__)


class ConsoleAuthenticationForm(AuthenticationForm):
    """Says why an SSO login was refused (no mapped group, directory down); otherwise
    the usual wrong-name-or-password sentence."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Wrong username or password.",
    }

    def get_invalid_login_error(self):
        reason = refusal(self.request)
        if reason:
            return ValidationError(reason, code="invalid_login")
        return super().get_invalid_login_error()


class LoginView(auth_views.LoginView):
    authentication_form = ConsoleAuthenticationForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if getattr(settings, "QUILL_OIDC_ENABLED", False):
            context["sso_provider_name"] = settings.QUILL_OIDC_PROVIDER_NAME
        return context


class OIDCCallback(oidc_views.OIDCAuthenticationCallbackView):
    """The provider's redirect back: a failure of any kind (the provider's error, an
    unknown state, a token that fails its checks, no mapped group, the provider
    unreachable) goes to the audit log and back to the login page with the reason."""

    def get(self, request):
        self.error_text = provider_error(request)  # before the library uses the state up
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            return self.refused(str(exc))
        except requests.RequestException as exc:
            log.warning("OIDC provider unreachable or refusing: %s", exc)
            return self.refused(
                f"the provider could not be reached or refused the request ({type(exc).__name__})"
            )

    def login_failure(self):
        return self.refused(refusal(self.request) or self.error_text)

    def refused(self, reason: str):
        name = settings.QUILL_OIDC_PROVIDER_NAME
        audit.sso_login_failed(self.request, name, reason)
        messages.error(self.request, f"Sign-in with {name} failed: {reason}")
        return redirect("login")


PROVIDER_TEXT_MAX = 200  # of the provider's error_description kept and shown
NOT_OURS = "the provider's answer belongs to no sign-in started in this browser"


def provider_error(request) -> str:
    """The provider's own error text, only for a sign-in this browser started (its
    `state` pending in the session; the library then uses it up) and cut to PROVIDER_TEXT_MAX: the
    callback is open to anyone, so otherwise its text is nobody's to write into the
    audit log or the page."""
    error = request.GET.get("error", "")
    pending = request.session.get("oidc_states") or {}
    state = request.GET.get("state", "")
    if not error:
        return "sign-in failed"
    if not state or state not in pending:
        return NOT_OURS
    return (request.GET.get("error_description") or error)[:PROVIDER_TEXT_MAX]


def _when_configured(view):
    """404 while OIDC is not configured (the library's views read its settings)."""

    @login_not_required
    def wrapper(request, *args, **kwargs):
        if not getattr(settings, "QUILL_OIDC_ENABLED", False):
            raise Http404("OpenID Connect sign-on is not configured")
        return view(request, *args, **kwargs)

    return wrapper


# Redirects the browser to the provider (state, nonce and PKCE verifier in the session).
oidc_start = _when_configured(oidc_views.OIDCAuthenticationRequestView.as_view())
oidc_callback = _when_configured(OIDCCallback.as_view())

"""Why a login was refused, kept on the request for the login page and the audit log."""

from __future__ import annotations

ATTRIBUTE = "quill_login_refusal"


def refuse(request, message: str) -> None:
    if request is not None:
        setattr(request, ATTRIBUTE, message)


def refusal(request) -> str:
    return getattr(request, ATTRIBUTE, "") if request is not None else ""


def ldap_unreachable(sender, context=None, request=None, exception=None, **kwargs) -> None:
    """django-auth-ldap's ldap_error: the directory is down, its certificate is not
    trusted, or it refused the console's own bind."""
    info = exception.args[0] if exception is not None and exception.args else {}
    why = info.get("desc", "") if isinstance(info, dict) else str(info)
    refuse(
        request,
        f"The console could not use the LDAP directory ({why or type(exception).__name__}): "
        "directory accounts cannot log in now; local console accounts still can.",
    )

"""Console logins, roles and API tokens (admins manage users; everyone their tokens)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from cluster_client.errors import NotFound, OpError
from console.changes import Actor
from console.models import ApiToken
from console.roles import ADMIN, ROLES, role_of, set_role
from console.sso.accounts import is_sso


def _role(role: str) -> str:
    if role not in ROLES:
        raise OpError(f"Role must be one of {', '.join(ROLES)}.", "role")
    return role


def create_user(actor: Actor, username: str, password: str, role: str):
    actor.require(ADMIN)
    users = get_user_model().objects
    username = (username or "").strip()
    if not username:
        raise OpError("A login needs a username.", "username")
    if users.filter(username=username).exists():
        raise OpError(f"{username!r} already exists.", "username")
    role = _role(role)
    try:
        validate_password(password or "", get_user_model()(username=username))
    except ValidationError as exc:
        raise OpError(" ".join(exc.messages), "password") from None
    user = users.create_user(username=username, password=password)
    set_role(user, role)
    actor.done("user.create", f"user:{username}", None, {"role": role})
    return user


def _existing(username: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f"No login {username!r}.", "username")
    return user


def change_role(actor: Actor, username: str, role: str):
    actor.require(ADMIN)
    user = _existing(username)
    if user.is_superuser:
        raise OpError(f"{username!r} is a superuser and always an admin.", "role")
    if is_sso(user):
        raise OpError(
            f"{username!r} signs in with single sign-on: the role comes from their groups "
            "at each login; change their groups in the directory or at the provider.",
            "role",
        )
    before = role_of(user)
    set_role(user, _role(role))
    actor.done("user.role", f"user:{username}", {"role": before}, {"role": role})
    return user


def set_active(actor: Actor, username: str, active: bool):
    actor.require(ADMIN)
    user = _existing(username)
    if user == actor.user:
        raise OpError("You cannot deactivate your own login.", "username")
    user.is_active = active
    user.save(update_fields=["is_active"])
    actor.done("user.active", f"user:{username}", {"active": not active}, {"active": active})


def issue_token(actor: Actor, name: str) -> tuple[ApiToken, str]:
    name = (name or "").strip()
    if not name:
        raise OpError("Name the token (what script uses it?).", "name")
    token, raw = ApiToken.issue(actor.user, name)
    actor.done("token.create", f"token:{token.prefix}", None, {"name": name})
    return token, raw


def revoke_token(actor: Actor, token_id: int) -> None:
    token = ApiToken.objects.filter(id=token_id).first()
    if token is None or (token.user_id != actor.user.id and role_of(actor.user) != ADMIN):
        raise NotFound("No such token.", "token")
    token.delete()
    actor.done("token.revoke", f"token:{token.prefix}", {"name": token.name}, None)

"""The REST admin API under /api/ (django-ninja): OpenAPI schema at /api/schema, docs
at /api/docs (both for a viewer's bearer token or session). Bearer tokens for scripts
or the browser session (with CSRF); the same roles as the UI; errors are JSON
{"detail": sentence, "errors": {field: message}}."""

from __future__ import annotations

from functools import wraps

from django.http import JsonResponse
from django.utils import timezone
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer, SessionAuth

from cluster_client.errors import OpError
from console.models import ApiToken
from console.roles import VIEWER, has_role, role_required


class TokenAuth(HttpBearer):
    """`Authorization: Bearer qk_...` (make one on the API tokens page)."""

    def authenticate(self, request, token: str):
        found = ApiToken.lookup(token)
        if found is None or not found.user.is_active:
            return None
        ApiToken.objects.filter(id=found.id).update(last_used=timezone.now())
        request.user = found.user
        return found.user


def docs_access(view):
    """The schema and docs pages: a viewer's `Authorization: Bearer <token>` (what
    scripts and schema-driven tools send) or, without one, a viewer's session."""
    session_view = role_required(VIEWER)(view)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return session_view(request, *args, **kwargs)
        user = TokenAuth().authenticate(request, token.strip())
        if user is None:
            return JsonResponse(
                {"detail": "That bearer token is unknown or its user is inactive.", "errors": {}},
                status=401,
            )
        if not has_role(user, VIEWER):
            return JsonResponse(
                {"detail": f"This needs the {VIEWER} role.", "errors": {}}, status=403
            )
        return view(request, *args, **kwargs)

    return wrapper


api = NinjaAPI(
    title="Quill console API",
    version="1",
    description=(
        "Operate a Quill (Kafka) cluster: brokers, topics, consumer groups, quotas, messages, "
        "SCRAM users and ACLs, cluster events and the audit log. "
        "Authenticate with `Authorization: Bearer <token>` "
        "(tokens: /account/tokens/) or a console session. Roles: viewer reads, operator "
        "changes topics, configs, groups, quotas and produces, admin also deletes. "
        'Errors: `{"detail": sentence, "errors": {field: message}}`.'
    ),
    openapi_url="/schema",
    docs_url="/docs",
    docs_decorator=docs_access,
    auth=[TokenAuth(), SessionAuth()],
    urls_namespace="api",
)


@api.exception_handler(OpError)
def op_error(request, exc: OpError):
    return api.create_response(request, exc.as_dict(), status=exc.status)


@api.exception_handler(ValidationError)
def validation_error(request, exc: ValidationError):
    errors = {}
    for e in exc.errors:
        loc = [str(x) for x in e.get("loc", ()) if x not in ("body", "query", "path", "payload")]
        errors[".".join(loc) or "__all__"] = e.get("msg", "invalid")
    first = next(iter(errors.items()))
    detail = f"{first[0]}: {first[1]}" if len(errors) == 1 else f"{len(errors)} fields are invalid."
    return api.create_response(request, {"detail": detail, "errors": errors}, status=400)


@api.exception_handler(AuthenticationError)
def unauthenticated(request, exc):
    return api.create_response(
        request,
        {"detail": "Log in or send Authorization: Bearer <token>.", "errors": {}},
        status=401,
    )


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    return api.create_response(request, {"detail": str(exc), "errors": {}}, status=exc.status_code)


from console.api import alerts, cluster, groups, operations, security, topics  # noqa: E402  (routers register on import)

api.add_router("/", cluster.router)
api.add_router("/topics", topics.router)
api.add_router("/groups", groups.router)
api.add_router("/operations", operations.router)
api.add_router("/alerts", alerts.router)
api.add_router("/security", security.router)

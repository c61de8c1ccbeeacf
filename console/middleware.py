"""Login required everywhere: pages redirect anonymous visitors to the login page; the
API (which answers 401 itself, in JSON; its schema and docs take a bearer token or send
a browser to the login page) and /healthz are left to their own checks."""

from django.contrib.auth.middleware import LoginRequiredMiddleware


class ConsoleLoginRequired(LoginRequiredMiddleware):
    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class AuditDenied:
    """Every 403 the console answers goes to the audit log (who, what, from where)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code == 403:
            from console import audit

            user = getattr(request, "auth", None) or getattr(request, "user", None)
            audit.denied(request, user if getattr(user, "is_authenticated", False) else None)
        return response

"""A real OpenID provider for the console's sign-on tests: django-oidc-provider run as
its own small Django project (its own process, database and port), with a login page,
users in groups and a `groups` claim. sso_helpers.oidc_provider starts it."""

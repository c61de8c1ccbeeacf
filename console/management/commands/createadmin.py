"""`manage.py createadmin`: create the first admin login once and print its password.

Idempotent: when a superuser exists it says so and changes nothing (the password is
never stored in clear, so it can only be shown when it is made).
"""

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the first admin login (once) and print its password."
    # as Django's createsuperuser: the containers run it right after migrate, which ran
    # the system checks (importing every URLconf and view again cost seconds per start)
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "--username",
            default=os.environ.get("QUILL_ADMIN_USER", "admin"),
            help="login name (default: QUILL_ADMIN_USER or 'admin')",
        )

    def handle(self, *args, username: str, **options) -> None:
        users = get_user_model().objects
        existing = list(users.filter(is_superuser=True).values_list("username", flat=True))
        if existing:
            self.stdout.write(
                f"Console admin login exists ({', '.join(existing)}); its password was shown "
                f"when it was created. To set a new one: python manage.py changepassword "
                f"{existing[0]}"
            )
            return
        password = secrets.token_urlsafe(12)
        users.create_superuser(username=username, email="", password=password)
        rule = "=" * 64
        self.stdout.write(
            f"{rule}\nCreated the console's first admin login (shown only this once):\n"
            f"  username: {username}\n  password: {password}\n{rule}"
        )

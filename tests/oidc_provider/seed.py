"""python -m tests.oidc_provider.seed SEED.json: migrate, then users (with passwords and
groups), the console as a confidential client, and the RSA signing key.
python -m tests.oidc_provider.seed --groups USER [GROUP...]: USER's groups, now."""

import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.oidc_provider.settings")


def main(path: str) -> None:
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oidc_provider.models import Client, ResponseType, RSAKey

    seed = json.loads(open(path).read())
    call_command("migrate", verbosity=0)
    for name, spec in seed["users"].items():
        user = User.objects.create_user(name, email=f"{name}@quill.test", password=spec["password"])
        for group in spec["groups"]:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
    client = Client.objects.create(
        name="Quill console",
        client_type="confidential",
        client_id=seed["client_id"],
        client_secret=seed["client_secret"],
        jwt_alg="RS256",
        require_consent=False,
        reuse_consent=True,
    )
    client.redirect_uris = seed["redirect_uris"]
    client.save()
    client.response_types.add(ResponseType.objects.get(value="code"))
    RSAKey.objects.create(key=seed["rsa_key_pem"])


def set_groups(username: str, groups: list[str]) -> None:
    import django

    django.setup()
    from django.contrib.auth.models import Group, User

    user = User.objects.get(username=username)
    user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])


if __name__ == "__main__":
    if sys.argv[1] == "--groups":
        set_groups(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1])

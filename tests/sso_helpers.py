"""Real servers for the console's sign-on tests: slapd (Debian's OpenLDAP server, run on
a free 127.0.0.1 port with its own slapd.conf and database in a temp dir, loaded from an
LDIF with users and groups) and an OpenID provider (django-oidc-provider as its own
Django project, tests/oidc_provider), plus a token-endpoint relay that spoils the id
token on request, for the bad-token cases."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from quill_stack.ports import free_port, free_ports
from quill_stack.services import PROJECT_ROOT
from tests.wait_helpers import wait_until

SUFFIX = "dc=quill,dc=test"
ROOT_DN, ROOT_PW = f"cn=admin,{SUFFIX}", "root-secret"
PEOPLE, GROUPS = f"ou=people,{SUFFIX}", f"ou=groups,{SUFFIX}"
ROLE_GROUPS = {"admin": "quill-admins", "operator": "quill-operators", "viewer": "quill-viewers"}
# user -> the groups they are in (nora: none; admin: a directory entry named like the
# console's local admin; bob: viewer and admin, so admin)
DIRECTORY = {
    "alice": ["quill-admins"],
    "oscar": ["quill-operators"],
    "vera": ["quill-viewers"],
    "bob": ["quill-viewers", "quill-admins"],
    "nora": ["staff"],
    "admin": ["quill-admins"],
}


def password(user: str) -> str:
    return f"pw-{user}-7"


def group_dn(group: str) -> str:
    return f"cn={group},{GROUPS}"


def user_dn(user: str) -> str:
    return f"uid={user},{PEOPLE}"


def directory_ldif() -> str:
    entries = [
        f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: quill\no: Quill",
        f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people",
        f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups",
    ]
    for user in DIRECTORY:
        entries.append(
            f"dn: {user_dn(user)}\nobjectClass: inetOrgPerson\nuid: {user}\ncn: {user}\n"
            f"sn: {user.title()}\nmail: {user}@quill.test\nuserPassword: {password(user)}"
        )
    groups = sorted({g for gs in DIRECTORY.values() for g in gs})
    for group in groups:
        members = "".join(f"\nmember: {user_dn(u)}" for u, gs in DIRECTORY.items() if group in gs)
        entries.append(f"dn: {group_dn(group)}\nobjectClass: groupOfNames\ncn: {group}{members}")
    return "\n\n".join(entries) + "\n"


SLAPD_CONF = """\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile {dir}/slapd.pid
argsfile {dir}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 10485760
suffix "{suffix}"
rootdn "{rootdn}"
rootpw {rootpw}
directory {dir}/data
TLSCACertificateFile {ca}
TLSCertificateFile {cert}
TLSCertificateKeyFile {key}
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
"""


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def tls_files(tls_dir: Path, name: str) -> tuple[Path, Path, Path]:
    """(CA certificate, certificate, key) for a server on 127.0.0.1, from quill_stack's
    test CA in `tls_dir` (one PEM there, split as slapd wants it)."""
    from quill_stack.tls import ensure_server_cert

    pem = ensure_server_cert(tls_dir, name, ["127.0.0.1"]).read_text()
    blocks = [f"-----BEGIN{b}" for b in pem.split("-----BEGIN")[1:]]
    key = tls_dir / f"{name}.key"
    key.write_text("".join(b for b in blocks if "PRIVATE KEY" in b))
    cert = tls_dir / f"{name}.crt"
    cert.write_text(next(b for b in blocks if "CERTIFICATE" in b))
    return tls_dir / "ca.crt", cert, key


class Slapd:
    """slapd in `root` (config, data, log) on ldap://127.0.0.1:<port>/ (StartTLS offered)
    and ldaps://127.0.0.1:<tls_port>/, its certificate from the CA `ca`; stop() and
    start() again to take the directory down and up."""

    def __init__(self, root: Path) -> None:
        self.root, (self.port, self.tls_port) = root, free_ports(2)
        self.uri = f"ldap://127.0.0.1:{self.port}/"
        self.ldaps_uri = f"ldaps://127.0.0.1:{self.tls_port}/"
        self.conf = root / "slapd.conf"
        (root / "data").mkdir(parents=True)
        (root / "tls").mkdir()
        self.ca, cert, key = tls_files(root / "tls", "slapd")
        self.conf.write_text(
            SLAPD_CONF.format(
                dir=root,
                suffix=SUFFIX,
                rootdn=ROOT_DN,
                rootpw=ROOT_PW,
                ca=self.ca,
                cert=cert,
                key=key,
            )
        )
        ldif = root / "directory.ldif"
        ldif.write_text(directory_ldif())
        subprocess.run(["slapadd", "-f", str(self.conf), "-l", str(ldif)], check=True)
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.root / "slapd.log", "ab")
        # -d 0: stay in the foreground (a child we can stop), no debug output
        urls = f"{self.uri} {self.ldaps_uri}"
        cmd = ["slapd", "-d", "0", "-f", str(self.conf), "-h", urls]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        wait_until(lambda: _listening(self.port), 30, f"slapd on {self.uri}")
        wait_until(lambda: _listening(self.tls_port), 30, f"slapd on {self.ldaps_uri}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None

    def modify(self, ldif: str) -> None:
        """ldapmodify as the directory's root."""
        cmd = ["ldapmodify", "-x", "-H", self.uri, "-D", ROOT_DN, "-w", ROOT_PW]
        subprocess.run(cmd, input=ldif.encode(), check=True, capture_output=True)


@pytest.fixture(scope="module")
def slapd(tmp_path_factory):
    if not shutil.which("slapd") and not Path("/usr/sbin/slapd").exists():
        pytest.fail("slapd is missing: run `make install` (apt-get install slapd ldap-utils)")
    server = Slapd(tmp_path_factory.mktemp("slapd"))
    server.start()
    yield server
    server.stop()


def ldap_env(server: Slapd) -> dict[str, str]:
    """The QUILL_LDAP_* an operator would set for this directory."""
    return {
        "QUILL_LDAP_SERVER_URI": server.uri,
        "QUILL_LDAP_BIND_DN": ROOT_DN,
        "QUILL_LDAP_BIND_PASSWORD": ROOT_PW,
        "QUILL_LDAP_USER_SEARCH_BASE": PEOPLE,
        "QUILL_LDAP_GROUP_SEARCH_BASE": GROUPS,
        "QUILL_LDAP_TIMEOUT_S": "3",
        **{f"QUILL_LDAP_{r.upper()}_GROUPS": group_dn(g) for r, g in ROLE_GROUPS.items()},
    }


# ---------------------------------------------------------------- the OpenID provider
CLIENT_ID, CLIENT_SECRET = "quill-console", "console-secret-5"
PROVIDER_NAME = "Quill IdP"


def _rsa_pem() -> tuple[rsa.RSAPrivateKey, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return key, pem.decode()


@contextmanager
def oidc_provider(root: Path, redirect_uri: str):
    """django-oidc-provider on a free port, seeded with DIRECTORY's users and groups; yields
    its issuer, endpoints and private key (`.key`, `.kid`)."""
    from hashlib import md5

    port = free_port()
    site = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        "OP_STATE_DIR": str(root),
        "OP_SITE_URL": site,
        "PYTHONPATH": str(PROJECT_ROOT),
    }
    key, pem = _rsa_pem()
    seed = {
        "users": {u: {"password": password(u), "groups": g} for u, g in DIRECTORY.items()},
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [redirect_uri],
        "rsa_key_pem": pem,
    }
    (root / "seed.json").write_text(json.dumps(seed))
    seed_cmd = [sys.executable, "-m", "tests.oidc_provider.seed", str(root / "seed.json")]
    subprocess.run(seed_cmd, env=env, cwd=PROJECT_ROOT, check=True)
    log = open(root / "provider.log", "ab")
    cmd = [sys.executable, "-m", "django", "runserver", "--noreload", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, env=env, cwd=PROJECT_ROOT, stdout=log, stderr=log)
    try:
        issuer = f"{site}/openid"
        wait_until(lambda: _answers(f"{issuer}/.well-known/openid-configuration"), 60, "the OP")
        discovery = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()

        def set_groups(user: str, groups: list[str]) -> None:
            cmd = [sys.executable, "-m", "tests.oidc_provider.seed", "--groups", user, *groups]
            subprocess.run(cmd, env=env, cwd=PROJECT_ROOT, check=True)

        yield SimpleNamespace(
            issuer=discovery["issuer"],
            discovery=discovery,
            key=key,
            kid=md5(pem.encode()).hexdigest(),
            site=site,
            set_groups=set_groups,
        )
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def op(tmp_path_factory, live_server):
    """The module's OpenID provider, its client's redirect URI on the console's live server."""
    root = tmp_path_factory.mktemp("oidc-provider")
    with oidc_provider(root, f"{live_server.url}/accounts/oidc/callback") as provider:
        yield provider


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def oidc_env(op, token_endpoint: str = "") -> dict[str, str]:
    """The QUILL_OIDC_* an operator would set for this provider (from its discovery)."""
    d = op.discovery
    return {
        "QUILL_OIDC_PROVIDER_NAME": PROVIDER_NAME,
        "QUILL_OIDC_CLIENT_ID": CLIENT_ID,
        "QUILL_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "QUILL_OIDC_ISSUER": d["issuer"],
        "QUILL_OIDC_AUTHORIZATION_ENDPOINT": d["authorization_endpoint"],
        "QUILL_OIDC_TOKEN_ENDPOINT": token_endpoint or d["token_endpoint"],
        "QUILL_OIDC_USERINFO_ENDPOINT": d["userinfo_endpoint"],
        "QUILL_OIDC_JWKS_URI": d["jwks_uri"],
        "QUILL_OIDC_SCOPES": "openid email profile groups",
        **{f"QUILL_OIDC_{r.upper()}_GROUPS": g for r, g in ROLE_GROUPS.items()},
    }


def to_callback(session: requests.Session, console: str, user: str, secret: str, next_="/"):
    """From the console's "Sign in with" link through the provider's login to the
    redirect back to the console; returns (the authorize URL, the callback URL), the
    callback not yet visited."""
    start = f"{console}/accounts/oidc/start?next={next_}"
    first = session.get(start, allow_redirects=False)
    assert first.status_code == 302, first.text[:500]
    authorize = first.headers["Location"]
    page = session.get(authorize)  # the provider's login page (its /login/?next=...)
    assert "Test identity provider" in page.text, page.text[:500]
    answer = session.post(
        page.url,
        data={
            "username": user,
            "password": secret,
            "csrfmiddlewaretoken": session.cookies.get("op_csrftoken"),
        },
        allow_redirects=False,
    )
    while answer.status_code == 302:
        location = requests.compat.urljoin(answer.url, answer.headers["Location"])
        if location.startswith(f"{console}/accounts/oidc/callback"):
            return authorize, location
        answer = session.get(location, allow_redirects=False)
    return authorize, None


class TokenRelay:
    """Stands between the console and the provider's token endpoint and rewrites the
    id token the provider signed, by `mode`: None (as it came), 'flip-signature',
    'alg-none', 'other-key' (same kid, another RSA key), 'expired' (re-signed with the
    provider's own key, exp an hour ago), 'wrong-audience' (the provider's key)."""

    def __init__(self, op) -> None:
        self.op, self.mode = op, None
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k: v for k, v in self.headers.items() if k.lower() == "authorization"}
                headers["Content-Type"] = self.headers.get("Content-Type", "")
                upstream = requests.post(
                    op.discovery["token_endpoint"], data=body, headers=headers, timeout=10
                )
                answer = upstream.json()
                if "id_token" in answer:
                    answer["id_token"] = relay.spoil(answer["id_token"])
                data = json.dumps(answer).encode()
                self.send_response(upstream.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spoil(self, token: str) -> str:
        claims = jwt.decode(token, options={"verify_signature": False})
        head, body, sig = token.split(".")
        if self.mode == "flip-signature":
            return f"{head}.{body}.{sig[:-6]}{'AAAAAA' if sig[-6:] != 'AAAAAA' else 'BBBBBB'}"
        if self.mode == "alg-none":
            return jwt.encode(claims, None, algorithm="none")
        if self.mode == "other-key":
            other, _ = _rsa_pem()
            return jwt.encode(claims, other, algorithm="RS256", headers={"kid": self.op.kid})
        if self.mode == "expired":
            now = int(time.time())
            claims.update(iat=now - 7200, exp=now - 3600)
        elif self.mode == "wrong-audience":
            claims["aud"] = "another-client"
        else:
            return token
        return jwt.encode(claims, self.op.key, algorithm="RS256", headers={"kid": self.op.kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def apply_sso(settings, monkeypatch, env: dict[str, str]) -> None:
    """Set `env` as the console's environment and read the SSO settings from it as
    console/settings.py does at start (the backends appended after the local ones)."""
    from console.sso import config

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ldap, oidc = config.ldap_settings(), config.oidc_settings()
    for name, value in {**ldap, **oidc}.items():
        setattr(settings, name, value)
    base = [b for b in settings.AUTHENTICATION_BACKENDS if b.startswith(("axes.", "django."))]
    settings.AUTHENTICATION_BACKENDS = base + config.backends(ldap, oidc)
    settings.QUILL_OIDC_ENABLED = bool(oidc)


def log_in_form(client, username: str, secret: str):
    """POST the console's login form (with its CSRF token, as a browser would)."""
    page = client.get("/accounts/login/")
    token = page.cookies["csrftoken"].value
    return client.post(
        "/accounts/login/",
        {"username": username, "password": secret, "csrfmiddlewaretoken": token},
    )

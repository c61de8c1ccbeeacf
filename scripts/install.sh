#!/usr/bin/env bash
# Install what Quill needs, skipping whatever is already there (safe to run repeatedly):
#   1. Debian packages (apt-get update + install only when one is missing)
#   2. the virtualenv at .venv
#   3. the project, editable, with all its extras (only when pyproject.toml changed)
#   4. the console's database migrations
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

APT_PACKAGES=(zookeeper redis-server openjdk-17-jre-headless kcat docker-compose chromium burrow)
VENV=.venv
STAMP="$VENV/.quill-installed"
PYTHON=${PYTHON:-python3}

say() { printf 'install: %s\n' "$*"; }

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ! -x "$VENV/bin/python" ] && ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
if ((${#missing[@]})); then
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { say "need root (or sudo) to install: ${missing[*]}"; exit 1; }
        SUDO=(sudo)
    fi
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi

want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    say "installing the project into $VENV (pyproject.toml changed)"
    extras="$("$VENV/bin/python" -c 'import tomllib; print(",".join(tomllib.load(open("pyproject.toml", "rb"))["project"].get("optional-dependencies", {})))')"
    "$VENV/bin/python" -m pip install -q -e ".[$extras]"
    echo "$want" > "$STAMP"
fi

"$VENV/bin/python" manage.py migrate --noinput -v 0
say "ok"

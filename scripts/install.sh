#!/usr/bin/env bash
# Install what Quill needs, skipping whatever is already there (safe to run repeatedly):
#   1. Debian packages (apt-get update + install only when one is missing)
#   2. the virtualenv at .venv
#   3. the project, editable, with all its extras, at the versions in constraints.txt
#      (only when pyproject.toml or constraints.txt changed)
#   4. KafkaJS for the client conformance tests (npm ci in tests/kafkajs, only when its
#      package.json or package-lock.json changed)
#   5. the console's database migrations
#   6. the broker's hot path compiled with Cython (scripts/build_hotpath.py; only modules
#      whose source changed since their build; without a compiler the broker runs as Python)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# openssl: the tests sign a SHA-1 certificate with its CLI; gcc, python3-dev: twofish (a
# dependency of pyjks, for JKS keystores) is built from source, having no wheel, and the
# broker's hot path is compiled (scripts/build_hotpath.py)
# iproute2, iptables: the fault-injection harness (faults/) makes hosts of network namespaces
# libldap-dev, libsasl2-dev: python-ldap (the console's LDAP sign-on) is built from source;
# slapd, ldap-utils: the sign-on tests run a real OpenLDAP server (tests/sso_helpers.py)
# protobuf-compiler, libprotobuf-dev: the console compiles uploaded .proto schemas with protoc
# libnetfilter-queue-dev: NetfilterQueue is built from source; the fault harness delays
# packets through NFQUEUE where the kernel has no netem (faults/delay.py)
APT_PACKAGES=(zookeeper redis-server openjdk-17-jre-headless kcat docker-compose chromium burrow openssl gcc python3-dev iproute2 iptables libldap-dev libsasl2-dev slapd ldap-utils protobuf-compiler libprotobuf-dev libnetfilter-queue-dev)
VENV=.venv
STAMP="$VENV/.quill-installed"
PYTHON=${PYTHON:-python3}

say() { printf 'install: %s\n' "$*"; }

# Installing redis-server (or ZooKeeper's service package) starts the system's own
# service on the default port, where the stack runs its own; stop (and disable) only a
# service this install just started. quill-stack moves off ports still taken.
stop_new_service() {
    local svc=$1 why="installing it started it on the default port; Quill runs its own"
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
        if "${SUDO[@]}" systemctl disable --now --quiet "$svc"; then
            say "stopped and disabled the system's $svc service ($why)"
        else
            say "could not stop the system's $svc service; quill-stack will use other ports"
        fi
    elif command -v service >/dev/null && service "$svc" status >/dev/null 2>&1; then
        if "${SUDO[@]}" service "$svc" stop >/dev/null 2>&1; then
            say "stopped the system's $svc service ($why)"
        else
            say "could not stop the system's $svc service; quill-stack will use other ports"
        fi
    fi
}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ! -x "$VENV/bin/python" ] && ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
# Node and npm (KafkaJS's tests) from Debian only where there are none: a Node from
# elsewhere (NodeSource's nodejs bundles npm) is kept, and Debian's npm would clash with it.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
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
    for pkg in "${missing[@]}"; do
        case "$pkg" in
            redis-server) stop_new_service redis-server ;;
            zookeeper | zookeeperd) stop_new_service zookeeper ;;
            slapd) stop_new_service slapd ;;
        esac
    done
fi

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi

CONSTRAINTS=constraints.txt  # the versions the suite passed with (make constraints)
want="$(cat pyproject.toml "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    say "installing the project into $VENV (pyproject.toml or $CONSTRAINTS changed)"
    extras="$("$VENV/bin/python" -c 'import tomllib; print(",".join(tomllib.load(open("pyproject.toml", "rb"))["project"].get("optional-dependencies", {})))')"
    "$VENV/bin/python" -m pip install -q -c "$CONSTRAINTS" -e ".[$extras]"
    echo "$want" > "$STAMP"
fi

KAFKAJS=tests/kafkajs  # KafkaJS, pinned by its package-lock.json (tests/kafkajs_helpers.py)
KAFKAJS_STAMP="$KAFKAJS/node_modules/.quill-installed"  # npm ci empties node_modules first
want="$(cat "$KAFKAJS/package.json" "$KAFKAJS/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$KAFKAJS_STAMP" 2>/dev/null)" != "$want" ]; then
    say "installing KafkaJS into $KAFKAJS/node_modules (its package-lock.json changed)"
    npm ci --prefix "$KAFKAJS" --no-audit --no-fund --loglevel=error
    echo "$want" > "$KAFKAJS_STAMP"
fi

"$VENV/bin/python" manage.py migrate --noinput -v 0
"$VENV/bin/python" scripts/build_hotpath.py
say "ok"

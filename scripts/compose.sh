#!/usr/bin/env bash
# The stack in containers, on any machine with Debian's docker.io (or any Docker engine):
#   scripts/compose.sh build    the images (a local base when Docker Hub is unreachable)
#   scripts/compose.sh up       build, `up -d`, wait until every service is healthy, print
#                               the console's first admin login (only on the first start)
#   scripts/compose.sh down     stop and remove the containers; the volumes (data) stay
#   scripts/compose.sh clean    the same and delete the volumes: the next up starts clean
# Extra arguments go to docker-compose (e.g. `up --profile pipeline` is COMPOSE_PROFILES=pipeline).
# QUILL_SECURITY=sasl_ssl (make compose-up SECURE=1) adds docker-compose.secure.yml: SASL_SSL
# and ACLs; `up` then copies the CA and the admin's client properties to .state/compose-secure/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'compose: %s\n' "$*" >&2; }
COMPOSE_FILES=(-f docker-compose.yml)
# down and clean name it always, so that they also remove what the secure profile added
if [ "${QUILL_SECURITY:-plaintext}" = sasl_ssl ] || [[ "${1:-up}" =~ ^(down|clean)$ ]]; then
    COMPOSE_FILES+=(-f docker-compose.secure.yml)
fi
# QUILL_DOCKER_RESTART=1: the worker gets the Docker socket (rolling restarts through the
# engine; whoever controls the worker is then root on the host: README)
if [ "${QUILL_DOCKER_RESTART:-0}" = 1 ] || [[ "${1:-up}" =~ ^(down|clean)$ ]]; then
    COMPOSE_FILES+=(-f docker-compose.docker-restart.yml)
fi
# Grafana's admin password (monitoring profile): made once, never in the compose files;
# its directory is 0700 (the file stays readable by Grafana's user in its container)
export QUILL_GRAFANA_PASSWORD_FILE="${QUILL_GRAFANA_PASSWORD_FILE:-.state/compose/grafana-admin-password}"
if [ ! -s "$QUILL_GRAFANA_PASSWORD_FILE" ]; then
    mkdir -p -m 700 "$(dirname "$QUILL_GRAFANA_PASSWORD_FILE")"
    python3 -c 'import secrets; print(secrets.token_urlsafe(18))' >"$QUILL_GRAFANA_PASSWORD_FILE"
    chmod 644 "$QUILL_GRAFANA_PASSWORD_FILE"
fi
compose() { docker-compose "${COMPOSE_FILES[@]}" "$@"; }

# docker-compose 1.29 builds an image once for every service that names it (quill:latest
# six times, quill-zookeeper three: 8.5 s even when cached): build one service per image
# (of the active profiles), the others run what it built. python3-yaml comes with
# Debian's docker-compose. Service names among the arguments build just those.
build() {
    local arg
    for arg in "$@"; do [[ "$arg" == -* ]] || { compose build "$@"; return; }; done
    # shellcheck disable=SC2046
    compose build "$@" $(compose config | python3 -c '
import os, sys, yaml
active = set(filter(None, os.environ.get("COMPOSE_PROFILES", "").split(",")))
seen = {}
for name, service in sorted(yaml.safe_load(sys.stdin)["services"].items()):
    profiles = set(service.get("profiles") or ())
    if service.get("build") and (not profiles or profiles & active):
        seen.setdefault(service.get("image", name), name)
print(" ".join(seen.values()))')
}

scripts/docker-engine.sh
export QUILL_BASE_IMAGE="${QUILL_BASE_IMAGE:-$(scripts/base-image.sh)}"
# the worker restarts broker containers through the mounted socket: it needs its group
export QUILL_DOCKER_GID="${QUILL_DOCKER_GID:-$(stat -c %g /var/run/docker.sock 2>/dev/null || echo 0)}"

wait_healthy() {
    local deadline=$((SECONDS + ${QUILL_COMPOSE_TIMEOUT:-300})) ids="" out="" state waiting
    while :; do
        waiting=()
        # the containers `up -d` made (a restart keeps a container's id): asked once, as
        # docker-compose starts a Python interpreter; one docker inspect a round for all
        [ -n "$ids" ] || ids=$(compose ps -q)
        # every container answers, or the round counts as not healthy: an engine that
        # errs or a container gone meanwhile (a concurrent down) must not read as healthy
        if [ -n "$ids" ] && out=$(docker inspect -f '{{.Name}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}healthy{{end}} {{.State.ExitCode}}' $ids 2>/dev/null) \
            && [ "$(wc -l <<<"$out")" -eq "$(wc -w <<<"$ids")" ]; then
            while read -r state; do
                # a one-shot (the secure profile's secure-init) is done when it exited 0
                case "$state" in *" running healthy "*) ;; *" exited healthy 0") ;; *) waiting+=("${state#/}") ;; esac
            done <<<"$out"
            [ ${#waiting[@]} -eq 0 ] && return 0
        elif [ -n "$ids" ]; then
            waiting=("containers changed meanwhile (docker inspect did not answer for each)")
            ids=""  # asked again next round
        fi
        if ((SECONDS > deadline)); then
            say "not healthy after ${QUILL_COMPOSE_TIMEOUT:-300} s: ${waiting[*]}"
            compose ps >&2
            return 1
        fi
        sleep 1
    done
}

case "${1:-up}" in
build)
    shift || true
    say "building on $QUILL_BASE_IMAGE"
    build "$@"
    ;;
up)
    shift || true
    say "building on $QUILL_BASE_IMAGE"
    build
    compose up -d "$@"
    wait_healthy
    compose logs --no-color console | grep -B 1 -A 3 "first admin login" | sed 's/^[^|]*| //' || true
    if [ "${QUILL_SECURITY:-plaintext}" = sasl_ssl ]; then
        out=.state/compose-secure
        mkdir -p "$out"
        compose exec -T console cat /etc/quill/secure/tls/ca.crt >"$out/ca.crt"
        (umask 077 && compose exec -T console cat /etc/quill/secure/client-admin.properties |
            sed "s|^ssl.ca.location=.*|ssl.ca.location=$PWD/$out/ca.crt|" >"$out/client-admin.properties")
        say "SASL_SSL: clients on the host use --command-config $out/client-admin.properties"
    fi
    say "healthy: kcat -b localhost:${QUILL_BROKER_1_PORT:-9092} -L; console http://localhost:${QUILL_CONSOLE_PORT:-8000}/"
    ;;
down)
    shift || true
    compose down "$@"
    ;;
clean)
    shift || true
    compose down -v "$@"
    ;;
*)
    say "usage: $0 build|up|down|clean [docker-compose arguments]"
    exit 2
    ;;
esac

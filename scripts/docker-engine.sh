#!/usr/bin/env bash
# Make sure a Docker engine answers, installing and starting one when there is none:
# Debian's docker.io (dockerd) and docker-compose, dockerd started in the background
# (log: /var/log/quill-dockerd.log) when no service manager runs it. Needs root for that;
# as a user it only says what to do. Exits non-zero with a sentence when it cannot.
set -euo pipefail

say() { printf 'docker-engine: %s\n' "$*" >&2; }

if docker info >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    say "no Docker engine answers at ${DOCKER_HOST:-/var/run/docker.sock}, and starting one needs root:"
    say "run 'sudo $0', or add yourself to the docker group"
    exit 1
fi
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || missing+=(docker-compose)
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
if ! docker info >/dev/null 2>&1; then
    if ! pgrep -x dockerd >/dev/null; then
        say "starting dockerd (log: /var/log/quill-dockerd.log)"
        nohup dockerd >>/var/log/quill-dockerd.log 2>&1 &
    fi
    for _ in $(seq 1 120); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
fi
if ! docker info >/dev/null 2>&1; then
    say "dockerd did not answer within 60 s; the end of its log:"
    tail -n 20 /var/log/quill-dockerd.log >&2 || true
    exit 1
fi

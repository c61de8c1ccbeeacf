#!/usr/bin/env bash
# Print the base image the stack's images build FROM, making a local one when needed.
#
#   scripts/base-image.sh            -> prints e.g. python:3.11-slim-bookworm
#
# The Dockerfiles take `ARG BASE_IMAGE` (default python:3.11-slim-bookworm, the official
# slim image). When that image is neither present nor pullable (no Docker Hub: offline,
# air-gapped, rate-limited), this builds an equivalent from Debian's own packages:
# `debootstrap --variant=minbase bookworm` with python3 (3.11), python3-venv and
# ca-certificates (plus this machine's CAs from /usr/local/share/ca-certificates), imported
# as quill-base:bookworm. Only the Debian mirror is needed.
# Progress goes to stderr; stdout is only the image name (make compose-up uses it).
#
# Environment: QUILL_BASE_IMAGE (try this one first), QUILL_DEBIAN_MIRROR
# (default http://deb.debian.org/debian), QUILL_FORCE_LOCAL_BASE=1 (skip the pull).
set -euo pipefail

OFFICIAL=${QUILL_BASE_IMAGE:-python:3.11-slim-bookworm}
LOCAL=quill-base:bookworm
MIRROR=${QUILL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-venv,ca-certificates

say() { printf 'base-image: %s\n' "$*" >&2; }

have() { docker image inspect "$1" >/dev/null 2>&1; }

if [ "${QUILL_FORCE_LOCAL_BASE:-0}" != 1 ]; then
    if have "$OFFICIAL"; then
        echo "$OFFICIAL"
        exit 0
    fi
    if timeout 60 docker pull -q "$OFFICIAL" >/dev/null 2>&1; then
        say "pulled $OFFICIAL"
        echo "$OFFICIAL"
        exit 0
    fi
    say "cannot pull $OFFICIAL; using a local Debian bookworm base ($LOCAL)"
fi

if have "$LOCAL"; then
    echo "$LOCAL"
    exit 0
fi

if ! command -v debootstrap >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        say "debootstrap is missing: run 'sudo apt-get install -y debootstrap' and retry"
        exit 1
    fi
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2
fi
if [ "$(id -u)" -ne 0 ]; then
    say "debootstrap needs root: run 'sudo $0'"
    exit 1
fi

rootfs=$(mktemp -d /var/tmp/quill-base.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
say "debootstrap bookworm ($PACKAGES) from $MIRROR into $rootfs"
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "$MIRROR" >&2
# what the official slim images trim: apt lists, caches, docs, man pages
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
echo "deb $MIRROR bookworm main" > "$rootfs/etc/apt/sources.list"
echo "deb $MIRROR bookworm-updates main" >> "$rootfs/etc/apt/sources.list"
# the official images' `python`
ln -sf python3 "$rootfs/usr/bin/python"
# This machine's own CAs (a proxy that inspects TLS, a company CA) so pip in the image
# reaches PyPI as this machine does; an official base would need them added the same way.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    say "adding this machine's CAs from /usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >&2
fi
tar -C "$rootfs" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$LOCAL" >/dev/null
say "made $LOCAL"
echo "$LOCAL"

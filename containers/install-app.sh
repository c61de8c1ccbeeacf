#!/bin/sh
# The last layer of both Dockerfile targets: the project itself (its dependencies are
# already in the image), the broker's empty server.properties (settings come from QUILL_*
# variables) and the state directory the named volumes start from.
set -eu
pip install --no-deps -e /app
mkdir -p /etc/quill /var/lib/quill/data /var/lib/quill/spark
printf '# Broker settings come from QUILL_* environment variables (docker-compose.yml).\n' \
    > /etc/quill/server.properties
chown -R quill /var/lib/quill

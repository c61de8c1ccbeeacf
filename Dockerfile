# One image for every Python service of the stack (brokers, worker, console, monitor);
# docker-compose.yml picks the process with `command`. ZooKeeper and Redis use their
# official images.
FROM python:3.11-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=console.settings

RUN apt-get update \
    && apt-get install -y --no-install-recommends kcat \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . /app
RUN pip install -e /app \
    && useradd --system --home-dir /var/lib/quill --shell /usr/sbin/nologin quill \
    && mkdir -p /etc/quill /var/lib/quill/data \
    && printf '# Broker settings come from QUILL_* environment variables (docker-compose.yml).\n' \
        > /etc/quill/server.properties \
    && chown -R quill /var/lib/quill

USER quill
VOLUME ["/var/lib/quill"]
EXPOSE 9092 8000
CMD ["quill-broker", "/etc/quill/server.properties"]

# One image for every Python service of the stack (brokers, worker, console, monitor,
# and the pipeline's Spark master, worker and jobs); docker-compose.yml picks the process
# with `command`. ZooKeeper and Redis use their official images. Spark is the pyspark
# wheel's (`spark-class`, installed with the pipeline extra) on a Java 17 runtime
# (default-jre-headless on bookworm): no Spark download, no Maven.
FROM python:3.11-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=console.settings \
    PYSPARK_PYTHON=python

# (the JRE's post-install links its man page, and slim images have no man1 directory)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends kcat default-jre-headless \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . /app
RUN pip install -e "/app[pipeline]" \
    && useradd --system --home-dir /var/lib/quill --shell /usr/sbin/nologin quill \
    && mkdir -p /etc/quill /var/lib/quill/data /var/lib/quill/spark \
    && printf '# Broker settings come from QUILL_* environment variables (docker-compose.yml).\n' \
        > /etc/quill/server.properties \
    && chown -R quill /var/lib/quill

USER quill
VOLUME ["/var/lib/quill"]
EXPOSE 9092 8000 7077 8080 8081
CMD ["quill-broker", "/etc/quill/server.properties"]

# The image of every Python service of the stack (brokers, worker, console, monitor):
# `quill:latest`, target `quill`. The pipeline's Spark services (compose profile
# `pipeline`) use `quill-spark:latest`, target `spark`: the same plus a Java 17 runtime
# and the pipeline extra (pyspark brings `spark-class`), so the default stack builds
# without the ~500 MB Spark needs. ZooKeeper and Redis: containers/zookeeper and
# containers/redis, from Debian's packages on the same base.
#
# BASE_IMAGE defaults to the official slim Python image; where Docker Hub cannot be
# reached, scripts/base-image.sh makes an equivalent from Debian's packages
# (quill-base:bookworm) and `make compose-up` passes it in. Layers, slowest-changing
# first: apt, the Python dependencies (from pyproject.toml alone), then the code, so a
# code change rebuilds only the last two layers of either target.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS deps
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    VIRTUAL_ENV=/opt/quill \
    PATH=/opt/quill/bin:$PATH \
    DJANGO_SETTINGS_MODULE=console.settings \
    PYSPARK_PYTHON=python
# no Debian packages beyond the base: clients (kcat, ...) run on the host, through the
# published ports
RUN python3 -m venv /opt/quill \
    && useradd --system --home-dir /var/lib/quill --shell /usr/sbin/nologin quill
WORKDIR /app
COPY pyproject.toml /app/
COPY containers/requirements.py containers/install-app.sh /app/containers/
# the dependencies alone: cached until pyproject.toml changes. twofish (pyjks's, for JKS
# keystores) and python-ldap (the console's LDAP sign-on) have no wheel: a compiler,
# Python's and OpenLDAP's headers for their build, gone again in the same layer. What
# stays: OpenLDAP's and SASL's libraries (python-ldap links them) and protoc with the
# well-known .proto files (the console compiles uploaded Protobuf schemas with it)
RUN python containers/requirements.py > /tmp/requirements.txt \
    && apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev python3-dev libldap-dev libsasl2-dev \
    && pip install -r /tmp/requirements.txt \
    && apt-get purge -y gcc libc6-dev python3-dev libldap-dev libsasl2-dev \
    && apt-get install -y --no-install-recommends libldap-2.5-0 libsasl2-2 protobuf-compiler libprotobuf-dev \
    && rm -rf /var/lib/apt/lists/* /tmp/requirements.txt


FROM deps AS quill
COPY . /app
RUN containers/install-app.sh
USER quill
VOLUME ["/var/lib/quill"]
EXPOSE 9092 29092 8000
CMD ["quill-broker", "/etc/quill/server.properties"]


FROM deps AS spark
# (the JRE's post-install links its man page, and slim images have no man1 directory)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && python containers/requirements.py pipeline > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY . /app
RUN containers/install-app.sh
USER quill
VOLUME ["/var/lib/quill"]
EXPOSE 7077 8080 8081 4040

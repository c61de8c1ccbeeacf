"""What the operator tools share: options, client configuration, admin client, errors.

Every tool talks to the cluster over the Kafka protocol through confluent_kafka
(librdkafka), exactly as a third-party tool would. Client properties use Kafka's Java
client names where librdkafka understands them; the few Java-only ones are translated
or dropped with a warning (``client_config``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = [
    "CliError",
    "ToolParser",
    "add_bootstrap",
    "admin_client",
    "client_config",
    "describe_error",
    "parse_properties",
    "read_properties_file",
    "result",
    "run_tool",
]

DEFAULT_TIMEOUT_S = 30.0

# Java client properties that mean nothing to librdkafka: dropped with a warning.
_JAVA_ONLY = {
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "max.block.ms",
    "max.poll.records",
    "interceptor.classes",
    "partitioner.class",
    "default.api.timeout.ms",
    "exclude.internal.topics",
}


class CliError(Exception):
    """A failure to report to the operator as ``NAME: sentence``, with exit code 1."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def error_name(err) -> str:
    """Kafka's name for a librdkafka KafkaError: broker codes by Kafka's own table
    (librdkafka says UNKNOWN_TOPIC_OR_PART, Kafka UNKNOWN_TOPIC_OR_PARTITION), local
    errors by librdkafka's name (_TRANSPORT, _TIMED_OUT, ...)."""
    from kio.schema.errors import ErrorCode

    code = err.code()
    if code >= -1:
        try:
            return ErrorCode(code).name.upper()
        except ValueError:
            pass
    return err.name()


def describe_error(exc: BaseException) -> str:
    """``ERROR_NAME: sentence`` for a KafkaException / KafkaError / CliError / other."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, CliError):
        return str(exc)
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(err, KafkaError):
        return f"{error_name(err)}: {err.str()}"
    return f"{type(exc).__name__}: {exc}"


def kafka_error_name(exc: BaseException) -> str | None:
    """The Kafka error name carried by a KafkaException, if any."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return error_name(exc.args[0])
    return None


def run_tool(
    body,
    argv: Sequence[str] | None,
    *,
    prefix: str = "Error: ",
    catch: tuple[type[Exception], ...] | None = None,
    interrupt_code: int | None = 130,
) -> int:
    """Run ``body(argv)``; turn a failure into ``prefix`` + ``describe_error`` on stderr
    and exit code 1: the one main() every tool shares.

    ``prefix`` is the tool's own words before the error (Kafka's, e.g. ``"Error while
    executing topic command : "``). ``catch`` is what counts as a failure to report
    (default: CliError, KafkaException, OSError and ValueError; anything else keeps its
    traceback). Ctrl-C exits with ``interrupt_code``, or propagates when it is None.
    """
    if catch is None:
        from confluent_kafka import KafkaException

        catch = (CliError, KafkaException, OSError, ValueError)
    try:
        return body(argv) or 0
    except catch as exc:
        print(f"{prefix}{describe_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if interrupt_code is None:
            raise
        return interrupt_code


# --------------------------------------------------------------------------- options


class ToolParser(argparse.ArgumentParser):
    """argparse with the tool's module docstring (examples) as epilog, and exit code 1
    for bad usage like Kafka's tools (argparse's own is 2)."""

    def __init__(self, *, prog: str, description: str, examples: str | None = None) -> None:
        super().__init__(
            prog=prog,
            description=description,
            epilog=examples,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def add_bootstrap(
    parser: argparse.ArgumentParser, *, config_flag: str = "--command-config"
) -> None:
    """--bootstrap-server (required) and the client properties file option."""
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="the broker(s) to connect to",
    )
    parser.add_argument(
        config_flag,
        dest="command_config",
        metavar="FILE",
        help="a properties file of client configs (Kafka's names, e.g. security.protocol)",
    )


def parse_properties(items: Iterable[str] | None, *, what: str = "property") -> dict[str, str]:
    """``["k=v", "k2=v2 k3=v3"]`` -> dict. Each item may hold several space-separated pairs."""
    out: dict[str, str] = {}
    for item in items or ():
        for pair in item.split():
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise CliError("INVALID_CONFIG", f"Invalid {what} {pair!r}: expected key=value.")
            out[key.strip()] = value.strip()
    return out


def read_properties_file(path: str | None) -> dict[str, str]:
    """A Java .properties file (``k=v`` or ``k: v`` lines, ``#``/``!`` comments)."""
    if not path:
        return {}
    out: dict[str, str] = {}
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            out[line] = ""
        else:
            out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


def client_config(
    bootstrap: str,
    *,
    config_file: str | None = None,
    overrides: dict[str, str] | None = None,
    defaults: dict[str, str] | None = None,
) -> dict[str, str]:
    """librdkafka configuration: defaults < properties file < command-line overrides."""
    # librdkafka's informational logs (level 6) are noise for a command-line tool.
    conf: dict[str, str] = {"log_level": "4", **(defaults or {})}
    conf.update(read_properties_file(config_file))
    conf.update(overrides or {})
    if "buffer.memory" in conf:
        conf["queue.buffering.max.kbytes"] = str(max(1, int(conf.pop("buffer.memory")) // 1024))
    for key in sorted(_JAVA_ONLY & conf.keys()):
        print(f"WARNING: ignoring Java-only client property {key}", file=sys.stderr)
        del conf[key]
    mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "")).upper()
    if mechanism == "OAUTHBEARER" and "sasl.oauthbearer.config" in conf:
        # a file cannot carry an oauth_cb: its tokens are librdkafka's unsecured ones
        conf.setdefault("enable.sasl.oauthbearer.unsecure.jwt", "true")
    conf["bootstrap.servers"] = bootstrap
    return conf


class AuthFailures(list):
    """An ``error_cb`` keeping librdkafka's authentication failures: librdkafka retries a
    refused login until the request's timeout, where Kafka's tools fail at once."""

    def __call__(self, err) -> None:
        from confluent_kafka import KafkaError

        if err.code() == KafkaError._AUTHENTICATION:
            self.append(err)


def admin_client(args: argparse.Namespace):
    from confluent_kafka.admin import AdminClient

    failures = AuthFailures()
    conf = client_config(args.bootstrap_server, config_file=args.command_config)
    admin = AdminClient({**conf, "error_cb": failures})
    admin.auth_failures = failures
    return admin


def result(future, timeout: float = DEFAULT_TIMEOUT_S):
    """``future.result()`` with a timeout that names itself when it fires."""
    import concurrent.futures

    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise CliError(
            "REQUEST_TIMED_OUT", f"No answer from the cluster within {timeout:.0f} s."
        ) from None


_RETRIED = ("_TIMED_OUT", "_TRANSPORT")  # no broker answered yet: asked again until the timeout
# a login refused for this long ends the command: a broker that is starting may refuse a
# first SCRAM login before its credentials are loaded, an OIDC provider may fail once
REFUSED_FOR_S = 5.0


def cluster_topics(admin, timeout: float = DEFAULT_TIMEOUT_S) -> dict:
    """Metadata for all topics (name -> TopicMetadata); fails clearly if unreachable."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    failures = getattr(admin, "auth_failures", [])
    seen, refused_since, slice_s = len(failures), None, 1.0
    try:
        # in growing slices (an answer that comes after its slice is dropped), to stop at a
        # refused login instead of waiting out the timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return admin.list_topics(timeout=max(0.1, min(slice_s, left))).topics
            except KafkaException as exc:
                admin.poll(0)  # serves error_cb
                now = time.monotonic()
                if len(failures) > seen:  # refused during this call
                    seen = len(failures)
                    refused_since = refused_since or now
                if refused_since is not None and (
                    now - refused_since >= REFUSED_FOR_S or left <= slice_s
                ):
                    raise CliError("SASL_AUTHENTICATION_FAILED", failures[-1].str()) from None
                if kafka_error_name(exc) not in _RETRIED or left <= slice_s:
                    raise
                slice_s = min(slice_s * 2, 8.0)
    except KafkaException as exc:
        raise CliError(
            kafka_error_name(exc) or "NETWORK_EXCEPTION",
            f"Could not fetch metadata from the cluster: {exc.args[0].str() if exc.args else exc}",
        ) from None

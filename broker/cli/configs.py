"""quill-configs: describe and alter topic, broker and user configs (Kafka's kafka-configs.sh);
users' SCRAM credentials and quotas are in configs_users.py.

    quill-configs --bootstrap-server b:9092 --entity-type topics --entity-name t \\
        --alter --add-config retention.ms=1000,cleanup.policy=[compact,delete]
    Completed updating config for topic t.
    quill-configs --bootstrap-server b:9092 --entity-type topics --entity-name t --describe
    Dynamic configs for topic t are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, ...}
    quill-configs --bootstrap-server b:9092 --entity-type users --entity-name alice \\
        --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'
    Completed updating config for user alice.
    quill-configs --bootstrap-server b:9092 --entity-type users --describe
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from typing import NamedTuple

from ..zk.znodes import ConfigType
from . import configs_users
from .common import (
    CliError,
    ToolParser,
    add_bootstrap,
    client_config,
    cluster_topics,
    read_properties_file,
    result,
    run_tool,
)
from .controller_client import ControllerAdmin, broker_request, controller_request

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44

ENTITY_TYPES = (ConfigType.TOPIC, ConfigType.BROKER, ConfigType.USER)
# Kafka splits --add-config on commas that are not inside [...] (lists of values).
_SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        examples=__doc__,
        prog="quill-configs",
        description="Describe or change the configs of topics, brokers and users "
        "(SCRAM credentials, quotas), like kafka-configs.sh.",
    )
    add_bootstrap(p)
    p.add_argument("--entity-type", choices=ENTITY_TYPES, help="the type of entity")
    p.add_argument("--entity-name", help="the entity's name (topic name, broker id, user)")
    p.add_argument(
        "--entity-default",
        action="store_true",
        help="the cluster-wide default for brokers, the default user's quotas",
    )
    p.add_argument("--topic", help="shorthand for --entity-type topics --entity-name TOPIC")
    p.add_argument("--broker", help="shorthand for --entity-type brokers --entity-name BROKER")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list configs for the entity")
    action.add_argument("--alter", action="store_true", help="alter the configs of the entity")
    p.add_argument(
        "--all",
        action="store_true",
        help="with --describe: all configs, not only dynamic overrides",
    )
    p.add_argument(
        "--add-config",
        metavar="K1=V1,K2=[V1,V2],...",
        help="configs to add or update; lists of values go in square brackets",
    )
    p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to add")
    p.add_argument("--delete-config", metavar="K1,K2", help="config overrides to remove")
    return p


def main(argv: list[str] | None = None) -> int:
    # Every failure becomes a message and exit 1; Ctrl-C is left to Python.
    shown = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    return run_tool(
        lambda a: _run(_parser().parse_args(a)),
        argv,
        prefix=f"Error while executing config command with args '{shown}'\n",
        catch=(Exception,),
        interrupt_code=None,
    )


def _entity(args) -> tuple[str, str | None]:
    if args.topic is not None:
        return ConfigType.TOPIC, args.topic
    if args.broker is not None:
        return ConfigType.BROKER, args.broker
    if args.entity_type is None:
        raise CliError(
            "INVALID_REQUEST", "--entity-type (topics, brokers or users) must be specified."
        )
    if args.entity_default:
        if args.entity_type == ConfigType.TOPIC:
            raise CliError(
                "INVALID_REQUEST", "--entity-default is only valid for brokers and users."
            )
        return args.entity_type, ""
    return args.entity_type, args.entity_name


def _run(args) -> int:
    entity_type, name = _entity(args)
    if name is not None and entity_type == ConfigType.BROKER and name and not name.isdigit():
        raise CliError(
            "INVALID_REQUEST",
            f"The entity name for brokers must be a valid integer broker id, but it is: {name}",
        )
    admin = ControllerAdmin(client_config(args.bootstrap_server, config_file=args.command_config))
    if entity_type == ConfigType.USER:
        return _run_users(admin, args, name)
    if args.describe:
        if args.add_config or args.delete_config or args.add_config_file:
            raise CliError("INVALID_REQUEST", "--add-config/--delete-config need --alter.")
        names = [name] if name is not None else _all_names(admin, entity_type)
        for entity in names:
            _describe(admin, entity_type, entity, args.all)
        return 0
    if name is None:
        raise CliError("INVALID_REQUEST", "--entity-name must be specified with --alter.")
    return _alter(admin, args, entity_type, name)


def _run_users(admin, args, name: str | None) -> int:
    conf = read_properties_file(args.command_config)
    if args.describe:
        if args.add_config or args.delete_config or args.add_config_file:
            raise CliError("INVALID_REQUEST", "--add-config/--delete-config need --alter.")
        configs_users.describe_users(admin, conf, name)
        return 0
    if name is None:
        raise CliError("INVALID_REQUEST", "--entity-name must be specified with --alter.")
    adds, deletes = _changes(args)
    configs_users.alter_user(admin, conf, name, adds, deletes)
    return 0


def _all_names(admin, entity_type: str) -> list[str]:
    if entity_type == ConfigType.TOPIC:
        return sorted(cluster_topics(admin))
    return [str(b) for b in sorted(admin.list_topics(timeout=30).brokers)]


def _resource(entity_type: str, name: str):
    from confluent_kafka.admin import ConfigResource, ResourceType

    kind = ResourceType.TOPIC if entity_type == ConfigType.TOPIC else ResourceType.BROKER
    return ConfigResource(kind, name)


def _source_name(source) -> str:
    from confluent_kafka.admin import ConfigSource

    name = ConfigSource(source).name
    return "UNKNOWN" if name == "UNKNOWN_CONFIG" else name


class _Entry(NamedTuple):
    """A DescribeConfigs row read off the wire, shaped as confluent_kafka's ConfigEntry."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool
    synonyms: dict


def _default_alter(admin, body: dict) -> None:
    """The cluster-default broker resource (empty name) goes to any broker, as Kafka's
    admin client sends it; librdkafka cannot name it, so it goes on the broker's own
    client (to the controller, which is as good a broker as any)."""
    _checked(controller_request(admin, INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0])


def _checked(entry):
    if entry.error_code:
        raise CliError(entry.error_code.name.upper(), entry.error_message or "")
    return entry


def _describe_broker(admin, name: str) -> dict:
    """DescribeConfigs of a BROKER resource on the broker's own client: librdkafka keeps
    one synonym per name, and Kafka lists a key once per level (and cannot name the
    default resource). Broker ``name`` answers for itself; any broker for the default."""
    body = {
        "resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    if name:
        resp = broker_request(admin, int(name), DESCRIBE_CONFIGS, 4, body)
    else:
        resp = controller_request(admin, DESCRIBE_CONFIGS, 4, body)
    return {
        c.name: _Entry(
            c.name,
            c.value,
            int(c.config_source),
            c.is_sensitive,
            {
                (s.name, int(s.source)): _Entry(s.name, s.value, int(s.source), c.is_sensitive, {})
                for s in c.synonyms
            },
        )
        for c in _checked(resp.results[0]).configs
    }


def _fetch(admin, entity_type: str, name: str) -> dict:
    if entity_type == ConfigType.BROKER:
        return _describe_broker(admin, name)
    resource = _resource(entity_type, name)
    return result(admin.describe_configs([resource])[resource])


def _describe(admin, entity_type: str, name: str, describe_all: bool) -> None:
    entries = _fetch(admin, entity_type, name)
    wanted = (
        "DYNAMIC_TOPIC_CONFIG"
        if entity_type == ConfigType.TOPIC
        else ("DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG")
    )
    label = f"{entity_type[:-1]} {name}" if name else "brokers in the cluster"
    heading = "All" if describe_all else ("Dynamic" if name else "Default")
    print(f"{heading} configs for {label} are:")
    for entry in sorted(entries.values(), key=lambda e: e.name):
        if not describe_all and _source_name(entry.source) != wanted:
            continue
        synonyms = ", ".join(
            f"{_source_name(s.source)}:{s.name}={_shown(s)}" for s in entry.synonyms.values()
        )
        print(
            f"  {entry.name}={_shown(entry)} sensitive={str(entry.is_sensitive).lower()} "
            f"synonyms={{{synonyms}}}"
        )


def _shown(entry) -> str:
    return "null" if entry.is_sensitive or entry.value is None else entry.value


# --------------------------------------------------------------------------- alter


def parse_add_config(text: str | None) -> dict[str, str]:
    """Kafka's ``k1=v1,k2=[v1,v2],k3=v3`` syntax -> {"k1": "v1", "k2": "v1,v2", ...}."""
    out: dict[str, str] = {}
    if not text:
        return out
    for pair in _SPLIT.split(text):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(
                "INVALID_CONFIG",
                "Invalid entity config: all configs to be added must "
                'be in the format "key=val" or "key=[val1,val2]".',
            )
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _changes(args) -> tuple[dict[str, str], list[str]]:
    """--add-config / --add-config-file / --delete-config -> (adds, deletes), checked."""
    adds = read_properties_file(args.add_config_file)
    adds.update(parse_add_config(args.add_config))
    deletes = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not adds and not deletes:
        raise CliError(
            "INVALID_REQUEST", "--alter needs --add-config, --add-config-file or --delete-config."
        )
    both = sorted(set(adds) & set(deletes))
    if both:
        raise CliError(
            "INVALID_CONFIG", f"Config(s) {','.join(both)} cannot be both added and deleted."
        )
    return adds, deletes


def _alter(admin, args, entity_type: str, name: str) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    adds, deletes = _changes(args)
    current = _fetch(admin, entity_type, name)  # also: the entity must exist
    dynamic = {e.name for e in current.values() if _source_name(e.source).startswith("DYNAMIC")}
    unknown = [k for k in deletes if k not in dynamic]
    if unknown:
        raise CliError("INVALID_CONFIG", f"Invalid config(s): {','.join(unknown)}")
    if entity_type == ConfigType.BROKER and name == "":
        ops = [{"name": k, "config_operation": 0, "value": v} for k, v in adds.items()]
        ops += [{"name": k, "config_operation": 1, "value": None} for k in deletes]
        resource = {"resource_type": 4, "resource_name": "", "configs": ops}
        _default_alter(admin, {"resources": [resource], "validate_only": False})
        print("Completed updating default config for brokers in the cluster.")
        return 0
    resource = _resource(entity_type, name)
    for key, value in adds.items():
        resource.add_incremental_config(
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        )
    for key in deletes:
        resource.add_incremental_config(
            ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
        )
    result(admin.incremental_alter_configs([resource])[resource])
    label = f"{entity_type[:-1]} {name}" if name else "default config for brokers in the cluster"
    if name:
        print(f"Completed updating config for {label}.")
    else:
        print(f"Completed updating {label}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""quill-acls: add, remove and list ACLs (Kafka's kafka-acls.sh), same options and texts.

    quill-acls --bootstrap-server localhost:9092 --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders
    quill-acls --bootstrap-server localhost:9092 --add --allow-principal User:alice \\
        --consumer --topic orders --group billing
    quill-acls --bootstrap-server localhost:9092 --add --allow-principal User:bob \\
        --producer --topic 'orders-' --resource-pattern-type prefixed
    quill-acls --bootstrap-server localhost:9092 --add --deny-principal User:mallory \\
        --deny-host 10.0.0.7 --operation All --topic '*'
    quill-acls --bootstrap-server localhost:9092 --list --topic orders
    quill-acls --bootstrap-server localhost:9092 --remove --force --topic orders

Over the ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) with confluent-kafka's
AdminClient; ``--command-config`` takes client properties (security.protocol,
sasl.mechanism, sasl.username, ...). Without --operation, ACLs are for All.
"""

from __future__ import annotations

import sys

from ..security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    unsupported_operation,
)
from .common import CliError, ToolParser, add_bootstrap, admin_client, result, run_tool

TOOL = "quill-acls"


def _parser() -> ToolParser:
    p = ToolParser(prog=TOOL, description="Manage ACLs (like kafka-acls.sh).", examples=__doc__)
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    p.add_argument("--topic", action="append", default=[], help="topic (repeatable; * for all)")
    p.add_argument("--group", action="append", default=[], help="consumer group (repeatable)")
    p.add_argument("--transactional-id", action="append", default=[], help="transactional id")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", default="literal", type=str.upper,
                   choices=["LITERAL", "PREFIXED", "MATCH", "ANY"],
                   help="literal (default), prefixed; match or any for --list/--remove")  # fmt: skip
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--principal", action="append", default=[], help="with --list: whose ACLs")
    p.add_argument("--allow-host", action="append", default=[], help="default * (any)")
    p.add_argument("--deny-host", action="append", default=[], help="default * (any)")
    p.add_argument("--operation", action="append", default=[],
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                   "DescribeConfigs, AlterConfigs, IdempotentWrite, All (default)")  # fmt: skip
    p.add_argument("--producer", action="store_true",
                   help="Write, Describe, Create on the topics (+ the transactional id)")  # fmt: skip
    p.add_argument("--consumer", action="store_true",
                   help="Read, Describe on the topics, Read on the groups")  # fmt: skip
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: IdempotentWrite on the cluster")  # fmt: skip
    p.add_argument("--force", action="store_true", help="remove without asking")
    return p


def _resources(args) -> list[ResourcePattern]:
    pattern = PatternType.parse(args.resource_pattern_type)
    out = [ResourcePattern(ResourceType.TOPIC, t, pattern) for t in args.topic]
    out += [ResourcePattern(ResourceType.GROUP, g, pattern) for g in args.group]
    out += [
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in args.transactional_id
    ]
    if args.cluster:
        out.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return out


def _operations(args, rtype: ResourceType) -> set[AclOperation]:
    if args.producer or args.consumer:
        ops: set[AclOperation] = set()
        if args.producer:
            ops |= {
                ResourceType.TOPIC: {
                    AclOperation.WRITE,
                    AclOperation.DESCRIBE,
                    AclOperation.CREATE,
                },
                ResourceType.TRANSACTIONAL_ID: {AclOperation.WRITE, AclOperation.DESCRIBE},
                ResourceType.CLUSTER: {AclOperation.IDEMPOTENT_WRITE} if args.idempotent else set(),
            }.get(rtype, set())
        if args.consumer:
            ops |= {
                ResourceType.TOPIC: {AclOperation.READ, AclOperation.DESCRIBE},
                ResourceType.GROUP: {AclOperation.READ},
            }.get(rtype, set())
        return ops
    try:
        return {AclOperation.parse(op) for op in args.operation} or {AclOperation.ALL}
    except ValueError as exc:
        raise CliError("INVALID_REQUEST", f"{exc}.") from None


def _entries(args, rtype: ResourceType) -> list[AccessControlEntry]:
    ops = _operations(args, rtype)
    out = []
    for permission, principals, hosts in (
        (PermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (PermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for principal in principals:
            if ":" not in principal:
                raise CliError(
                    "INVALID_REQUEST", f"Invalid principal {principal!r}: expected Type:Name."
                )
            out += [AccessControlEntry(principal, h, op, permission) for h in hosts for op in ops]
    return out


def _bindings(args) -> dict[ResourcePattern, list[AccessControlEntry]]:
    resources = _resources(args)
    if args.producer and args.idempotent:
        resources.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME))
    if not resources:
        raise CliError("INVALID_REQUEST", "You must specify one of: --topic, --cluster, --group, "
                       "--transactional-id when using --add or --remove.")  # fmt: skip
    out = {}
    for r in resources:
        entries = _entries(args, r.resource_type)
        for e in entries:
            why = unsupported_operation(AclBinding(r, e))
            if why is not None:
                raise CliError("INVALID_REQUEST", f"{why}.")
        if entries or args.remove:
            out[r] = entries
    return out


# -- confluent-kafka conversions ------------------------------------------------------------
def _ck_binding(r: ResourcePattern, e: AccessControlEntry):
    from confluent_kafka.admin import AclBinding as CkBinding

    return CkBinding(int(r.resource_type), r.name, int(r.pattern_type), e.principal, e.host,
                     int(e.operation), int(e.permission))  # fmt: skip


def _ck_filter(r: ResourcePattern | None, e: AccessControlEntry | None = None, principal=None):
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(
        int(r.resource_type) if r else int(ResourceType.ANY),
        r.name if r else None,
        int(r.pattern_type) if r else int(PatternType.ANY),
        e.principal if e else principal,
        e.host if e else None,
        int(e.operation) if e else int(AclOperation.ANY),
        int(e.permission) if e else int(PermissionType.ANY),
    )


def _ours(b) -> tuple[ResourcePattern, AccessControlEntry]:
    return (
        ResourcePattern(
            ResourceType(int(b.restype.value)),
            b.name,
            PatternType(int(b.resource_pattern_type.value)),
        ),  # fmt: skip
        AccessControlEntry(
            b.principal,
            b.host,
            AclOperation(int(b.operation.value)),
            PermissionType(int(b.permission_type.value)),
        ),  # fmt: skip
    )


def _print_acls(title: str, by_resource: dict) -> None:
    """Kafka's AclCommand layout: title, a tab before each entry, a blank line after."""
    for r, entries in by_resource.items():
        lines = "\n".join(f"\t{e}" for e in sorted(entries, key=str))
        print(f"{title} `{r}`: \n {lines} \n")


def _describe(admin, filters) -> dict:
    found: dict = {}
    for f in filters:
        for b in result(admin.describe_acls(f)):
            r, e = _ours(b)
            found.setdefault(r, set()).add(e)
    return found


# -- actions ----------------------------------------------------------------------------
def _add(admin, args) -> int:
    if args.resource_pattern_type not in ("LITERAL", "PREFIXED"):
        raise CliError("INVALID_REQUEST", "A resource pattern type of literal or prefixed "
                       "is required with --add.")  # fmt: skip
    bindings = _bindings(args)
    if not any(bindings.values()):
        raise CliError("INVALID_REQUEST", "You must specify one of: --allow-principal, "
                       "--deny-principal when trying to add ACLs.")  # fmt: skip
    for r, entries in bindings.items():
        _print_acls("Adding ACLs for resource", {r: entries})
        futures = admin.create_acls([_ck_binding(r, e) for e in entries])
        for future in futures.values():
            result(future)
    _print_acls("Current ACLs for resource", _describe(admin, [_ck_filter(r) for r in bindings]))
    return 0


def _remove(admin, args) -> int:
    bindings = _bindings(args)
    for r, entries in bindings.items():
        question = f"Are you sure you want to delete all ACLs for resource filter `{r}`? (y/n)"
        if entries:
            listed = "\n".join(f"\t{e}" for e in entries)
            question = (
                f"Are you sure you want to remove ACLs: \n {listed} \n from resource filter "
                f"`{r}`? (y/n)"
            )
        if not args.force and not _confirm(question):
            continue
        filters = [_ck_filter(r, e) for e in entries] or [_ck_filter(r)]
        for future in admin.delete_acls(filters).values():
            result(future)
    _print_acls("Current ACLs for resource", _describe(admin, [_ck_filter(r) for r in bindings]))
    return 0


def _confirm(question: str) -> bool:
    print(question)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _list(admin, args) -> int:
    resources = _resources(args)
    filters = []
    principals = args.principal or [None]
    for principal in principals:
        if resources:
            filters += [
                _ck_filter(
                    ResourcePattern(r.resource_type, r.name, r.pattern_type), principal=principal
                )  # fmt: skip
                for r in resources
            ]
        else:
            filters.append(_ck_filter(None, principal=principal))
    found = _describe(admin, filters)
    title = "Current ACLs for resource"
    if args.principal:
        title = f"ACLs for principal `{', '.join(args.principal)}`\nCurrent ACLs for resource"
    _print_acls(title, dict(sorted(found.items(), key=lambda kv: str(kv[0]))))
    return 0


def _run(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    admin = admin_client(args)
    if args.add:
        return _add(admin, args)
    if args.remove:
        return _remove(admin, args)
    return _list(admin, args)


def main(argv: list[str] | None = None) -> int:
    return run_tool(_run, argv, prefix="Error while executing ACL command: ")


if __name__ == "__main__":
    sys.exit(main())

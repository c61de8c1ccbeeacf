"""/api/security (admin role): SCRAM users (list, set a password, delete a credential)
and ACLs (list with filters, add, remove), through the Kafka protocol, audited."""

from __future__ import annotations

from ninja import Query, Router, Schema, Status
from pydantic import Field

from console.api.common import actor
from console.changes import security as security_ops

router = Router(tags=["security"])


class ScramCredentialIn(Schema):
    user: str = Field(..., description="the SCRAM user name")
    mechanism: str = Field("SCRAM-SHA-512", description="SCRAM-SHA-256 or SCRAM-SHA-512")
    password: str = Field(..., description="the new password (sent salted, never stored)")
    iterations: int = Field(4096, description="PBKDF2 iterations, 4096 to 16384")


class AclFilter(Schema):
    resource_type: str = Field(
        "", description="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID; empty: any"
    )
    resource_name: str = Field("", description="exact resource name; empty: any")
    pattern_type: str = Field("", description="LITERAL or PREFIXED; empty: any")
    principal: str = Field("", description="e.g. User:alice; empty: any")
    host: str = Field("", description="empty: any")
    operation: str = Field("", description="READ, WRITE, ...; empty: any")
    permission: str = Field("", description="ALLOW or DENY; empty: any")


class AclIn(Schema):
    resource_type: str = Field(..., description="TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID")
    resource_name: str = Field(..., description="'*' for all; kafka-cluster for the cluster")
    pattern_type: str = Field("LITERAL", description="LITERAL or PREFIXED")
    principal: str = Field(..., description="Type:name, e.g. User:alice (User:* for everyone)")
    host: str = Field("*", description="'*' for any host")
    operation: str = Field(..., description="ALL, READ, WRITE, CREATE, DELETE, ALTER, ...")
    permission: str = Field("ALLOW", description="ALLOW or DENY")


@router.get("/scram-users", summary="SCRAM users: mechanisms and iterations (admin)")
def list_scram_users(request):
    return security_ops.scram_users(actor(request))


@router.post("/scram-users", summary="Add a SCRAM user or change its password (admin)")
def set_scram_password(request, body: ScramCredentialIn):
    return security_ops.set_password(
        actor(request), body.user, body.mechanism, body.password, body.iterations
    )


@router.delete(
    "/scram-users", response={204: None}, summary="Delete one SCRAM credential of a user (admin)"
)
def delete_scram_credential(request, user: str, mechanism: str):
    security_ops.delete_credential(actor(request), user, mechanism)
    return Status(204, None)


@router.get("/acls", summary="ACLs matching the filter (admin)")
def list_acls(request, filters: Query[AclFilter]):
    return security_ops.acls(actor(request), filters.dict())


@router.post("/acls", summary="Add an ACL (admin)")
def add_acl(request, body: AclIn):
    return security_ops.add_acl(actor(request), body.dict())


@router.delete("/acls", summary="Remove the ACL matching exactly; the ones removed (admin)")
def remove_acl(request, acl: Query[AclIn]):
    return security_ops.remove_acl(actor(request), acl.dict())

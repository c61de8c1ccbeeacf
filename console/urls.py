from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from console import converters  # noqa: F401 - registers <kname:...>
from console.api import api
from console.views import (
    audit,
    broker_configs,
    brokers,
    cluster,
    groups,
    messages,
    metrics,
    operations,
    quotas,
    search,
    security,
    topics,
    users,
)

urlpatterns = [
    path("", cluster.home, name="home"),
    path("events/", cluster.events, name="events"),
    path("brokers/<int:broker_id>/", brokers.broker_detail, name="broker"),
    # broker configs and the global search (issue 29)
    path("brokers/<str:broker>/configs/", broker_configs.broker_configs, name="broker-configs"),
    path(
        "brokers/<str:broker>/configs/change",
        broker_configs.broker_configs_change,
        name="broker-configs-change",
    ),
    path("search/", search.search, name="search"),
    path("topics/", topics.topic_list, name="topics"),
    path("topics/create", topics.topic_create, name="topic-create"),
    path("topics/<str:name>/", topics.topic_detail, name="topic"),
    path("topics/<str:name>/configs", topics.topic_configs, name="topic-configs"),
    path("topics/<str:name>/partitions", topics.topic_partitions, name="topic-partitions"),
    path("topics/<str:name>/delete", topics.topic_delete, name="topic-delete"),
    path("groups/", groups.group_list, name="groups"),
    path("groups/<kname:group_id>/", groups.group_detail, name="group"),
    path("groups/<kname:group_id>/reset", groups.group_reset, name="group-reset"),
    path("groups/<kname:group_id>/delete", groups.group_delete, name="group-delete"),
    path("quotas/", quotas.quota_list, name="quotas"),
    path("quotas/set", quotas.quota_set, name="quota-set"),
    path("messages/", messages.browse, name="messages"),
    path("messages/produce", messages.produce, name="produce"),
    path("operations/", operations.operation_list, name="operations"),
    path("operations/start", operations.operation_start, name="operation-start"),
    path("operations/<int:op_id>/", operations.operation_detail, name="operation"),
    path("operations/<int:op_id>/action", operations.operation_action, name="operation-action"),
    path("audit/", audit.audit_log, name="audit"),
    path("users/", users.user_list, name="users"),
    path("users/action", users.user_action, name="user-action"),
    path("security/scram-users/", security.scram_users, name="scram-users"),
    path("security/scram-users/action", security.scram_user_action, name="scram-user-action"),
    path("security/acls/", security.acls, name="acls"),
    path("security/acls/action", security.acl_action, name="acl-action"),
    path("account/tokens/", users.tokens, name="tokens"),
    path("account/tokens/action", users.token_action, name="token-action"),
    path("healthz", cluster.healthz, name="healthz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
]

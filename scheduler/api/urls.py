"""Routes under /api/ (included by osmo/urls.py)."""

from django.urls import path

from . import agent_views, backend_views, cluster_views, config_views, resource_views, views

urlpatterns = [
    path("kai/queues", views.KaiQueuesView.as_view(), name="kai-queues"),
    path("podgroups/<str:name>", views.PodGroupDetailView.as_view(), name="podgroup-detail"),
    path("workflow/<str:name>/kai", views.WorkflowKaiView.as_view(), name="workflow-kai"),
    path("kai/podgroups/validate", views.PodGroupValidateView.as_view(),
         name="kai-podgroup-validate"),
    path("configs/backend", backend_views.BackendListView.as_view(), name="backend-list"),
    path("configs/backend/<str:name>", backend_views.BackendDetailView.as_view(),
         name="backend-detail"),
    path("configs/backend/<str:name>/agent/register", agent_views.AgentRegisterView.as_view(),
         name="backend-agent-register"),
    path("configs/backend/<str:name>/agent/messages", agent_views.AgentMessagesView.as_view(),
         name="backend-agent-messages"),
    path("configs/backend/<str:name>/agent/work", agent_views.AgentWorkView.as_view(),
         name="backend-agent-work"),
    path("configs/history", config_views.ConfigHistoryView.as_view(), name="config-history"),
    path("configs/history/rollback", config_views.ConfigRollbackView.as_view(),
         name="config-rollback"),
    path("configs/history/<str:config_type>/revision/<int:revision>/tags",
         config_views.ConfigRevisionTagsView.as_view(), name="config-revision-tags"),
    path("configs/diff", config_views.ConfigDiffView.as_view(), name="config-diff"),
    path("cluster/nodes", cluster_views.NodeListView.as_view(), name="cluster-nodes"),
    path("cluster/nodes/<str:name>", cluster_views.NodeDetailView.as_view(),
         name="cluster-node"),
    path("cluster/topology", cluster_views.TopologyView.as_view(), name="cluster-topology"),
    path("scheduler/cycle", cluster_views.CycleView.as_view(), name="scheduler-cycle"),
    path("scheduler/status", cluster_views.SchedulerStatusView.as_view(),
         name="scheduler-status"),
    path("resources", resource_views.ResourceListView.as_view(), name="resources"),
    path("resources/<str:name>", resource_views.ResourceDetailView.as_view(),
         name="resource"),
    path("workflow/<str:name>/explain", cluster_views.ExplainView.as_view(),
         name="workflow-explain"),
]

from django.urls import path

from . import log_views, osmo_views, views

urlpatterns = [
    path("pool/<str:pool>/workflow", views.WorkflowSubmitView.as_view(), name="workflow-submit"),
    path("pool/<str:pool>/workload", views.WorkloadSubmitView.as_view(), name="workload-submit"),
    path("workflow", views.WorkflowListView.as_view(), name="workflow-list"),
    path("workflow/<str:name>", views.WorkflowDetailView.as_view(), name="workflow-detail"),
    path("workflow/<str:name>/cancel", views.WorkflowCancelView.as_view(),
         name="workflow-cancel"),
    path("workflow/<str:name>/logs", log_views.WorkflowLogsView.as_view(), name="workflow-logs"),
    path("workflow/<str:name>/error_logs", log_views.WorkflowErrorLogsView.as_view(),
         name="workflow-error-logs"),
    path("workflow/<str:name>/events", log_views.WorkflowEventsView.as_view(),
         name="workflow-events"),
    path("workflow/<str:name>/spec", osmo_views.WorkflowSpecView.as_view(),
         name="workflow-spec"),
    path("workflow/<str:name>/tag", osmo_views.WorkflowTagView.as_view(), name="workflow-tag"),
    path("pool/<str:pool>/workflow/<str:name>/restart", osmo_views.WorkflowRestartView.as_view(),
         name="workflow-restart"),
    path("task", osmo_views.TaskListView.as_view(), name="task-list"),
    path("tag", osmo_views.TagListView.as_view(), name="tag-list"),
    path("workflow/<str:name>/task/<str:task>/status", views.TaskStatusView.as_view(),
         name="task-status"),
]

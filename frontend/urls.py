from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from frontend.views import (
    accounts,
    history,
    jobs,
    nodes,
    notifications,
    overview,
    showback,
    teams,
    vendor,
    whatif,
)

app_name = "frontend"

urlpatterns = [
    path("accounts/login/", accounts.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", overview.overview, name="overview"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/<int:job_id>/", jobs.job_detail, name="job"),
    path("history/", history.history, name="history"),
    path("history.csv", history.history_csv, name="history-csv"),
    path("history.xlsx", history.history_xlsx, name="history-xlsx"),
    path("teams/", teams.teams, name="teams"),
    path("showback/", showback.showback, name="showback"),
    path("nodes/", nodes.nodes, name="nodes"),
    path("nodes/<str:name>/", nodes.node_detail, name="node"),
    path("what-if/", whatif.what_if, name="what-if"),
    path("notifications/", notifications.notifications_page, name="notifications"),
    # Small JSON endpoints the pages poll for live updates.
    path("ui/overview.json", overview.overview_json, name="overview-json"),
    path("ui/jobs.json", jobs.job_list_json, name="jobs-json"),
    path("ui/jobs/<int:job_id>.json", jobs.job_json, name="job-json"),
    path("ui/jobs/check.json", jobs.check_json, name="job-check"),
    path("ui/nodes.json", nodes.nodes_json, name="nodes-json"),
    path("ui/nodes/<str:name>.json", nodes.node_json, name="node-json"),
    path("ui/what-if.json", whatif.what_if_json, name="what-if-json"),
    path("ui/notifications.json", notifications.notifications_json, name="notifications-json"),
    path("ui/vendor/plotly-<str:version>.min.js", vendor.plotly_js, name="plotly-js-versioned"),
    # Pages that do not link our icon (the Django admin, the API's browsable views) make browsers
    # ask for /favicon.ico.
    path("favicon.ico", RedirectView.as_view(url=static("frontend/favicon.svg"), permanent=True)),
]

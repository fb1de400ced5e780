"""Page routes (the REST API lives under /api/, routed in ctxweb/urls.py)."""

from __future__ import annotations

from django.urls import path

from .views import (
    actions,
    changes,
    compaction_log,
    history,
    search,
    session_detail,
    sessions_list,
    tabs,
    upload,
)

app_name = "ui"

_S = "sessions/<uuid:session_id>/"
_C = f"{_S}compactions/<int:number>/"

urlpatterns = [
    path("", sessions_list.session_list, name="session_list"),
    path("import/", upload.import_transcript, name="import"),
    path("changes/", changes.list_changes, name="list_changes"),
    path("search/", search.history_search, name="search"),
    path(_S, session_detail.session_detail, name="session"),
    path(f"{_S}changes/", changes.session_changes, name="session_changes"),
    path(f"{_S}overview/", session_detail.overview, name="overview"),
    path(f"{_S}tabs/<slug:tab>/", tabs.tab_view, name="tab"),
    path(f"{_S}context.json", tabs.context_download, name="context_download"),
    path(f"{_S}history/", history.history_gap, name="history"),
    path(f"{_S}messages/", history.message_range, name="message_range"),
    path(f"{_S}messages/<int:seq>/", history.message_full, name="message"),
    path(f"{_S}messages/<int:seq>/path/", search.message_path, name="message_path"),
    path(
        f"{_S}messages/<int:seq>/tool-results/<str:tool_use_id>/",
        history.tool_result_full,
        name="tool_result",
    ),
    path(f"{_S}offloaded/<path:name>", history.offloaded_content, name="offloaded"),
    path(f"{_C}summary/", history.compaction_summary, name="compaction_summary"),
    path(f"{_C}originals/", history.compaction_originals, name="compaction_originals"),
    path(f"{_C}lost/", history.compaction_lost, name="compaction_lost"),
    path(f"{_C}path/", history.compaction_path, name="compaction_path"),
    path(f"{_C}compare/", compaction_log.compaction_compare, name="compaction_compare"),
    path(f"{_C}revert/", actions.revert, name="revert"),
    path(f"{_S}compact/preview/", actions.compact_preview, name="compact_preview"),
    path(f"{_S}compact/", actions.compact, name="compact"),
    path(f"{_S}jobs/<uuid:job_id>/", actions.job_progress, name="job"),
    path(f"{_S}offload/", actions.offload, name="offload"),
]

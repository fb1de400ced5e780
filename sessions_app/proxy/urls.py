"""Proxy routes, mounted under /proxy/ (ctxweb/urls.py)."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "proxy"

urlpatterns = [
    path("anthropic/v1/messages", views.anthropic_messages, name="anthropic_messages"),
    path(
        "anthropic/v1/messages/count_tokens",
        views.anthropic_count_tokens,
        name="anthropic_count_tokens",
    ),
    path(
        "openai/v1/chat/completions",
        views.openai_chat_completions,
        name="openai_chat_completions",
    ),
    path("openai/v1/responses", views.openai_responses, name="openai_responses"),
    path("openai/v1/models", views.openai_models, name="openai_models"),
    path("openai/v1/models/<path:model>", views.openai_models, name="openai_model"),
]

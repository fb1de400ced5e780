"""`manage.py create_api_key USERNAME`: a new REST API key; the key is the last line printed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from sessions_app.models import ApiKey


class Command(BaseCommand):
    help = "Create an API key for USERNAME (creating the user if needed); prints the key last."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label for the key.")

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            **{user_model.USERNAME_FIELD: options["username"]}
        )
        if created:
            user.set_unusable_password()
            user.save()
            self.stdout.write(f"created user '{options['username']}'")
        row, key = ApiKey.issue(user, options["name"])
        self.stdout.write(
            f"API key {ApiKey.PREFIX}{row.lookup}… for '{options['username']}' "
            "(shown once, store it now):"
        )
        self.stdout.write(key)

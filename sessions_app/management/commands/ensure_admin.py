"""`manage.py ensure_admin`: make sure a local admin user exists, printing its password once."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the local 'admin' superuser if missing and print its password once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        username = options["username"]
        if user_model.objects.filter(username=username).exists():
            self.stdout.write(f"admin user '{username}' exists (password printed when created)")
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(f"created admin user '{username}' with password: {password}")

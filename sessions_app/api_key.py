"""REST API keys: only a key's SHA-256 hash is stored; the key is shown once, at creation.

Re-exported by sessions_app.models (where Django looks for the app's models).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from django.conf import settings
from django.db import models

__all__ = ["ApiKey"]


class ApiKey(models.Model):
    """A REST API key: only its SHA-256 hash is stored; the key is shown once, at creation."""

    PREFIX = "ctx_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100, blank=True)
    lookup = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.PREFIX}{self.lookup}… ({self.user})"

    @property
    def is_active(self) -> bool:
        """False once revoked."""
        return self.revoked_at is None

    @staticmethod
    def hash_key(key: str) -> str:
        """The stored form of a key."""
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def new_key(cls) -> tuple[str, str]:
        """A fresh (lookup, plain key) pair: `ctx_<lookup>_<secret>`."""
        lookup = secrets.token_hex(6)
        return lookup, f"{cls.PREFIX}{lookup}_{secrets.token_urlsafe(32)}"

    @classmethod
    def lookup_of(cls, key: str) -> str | None:
        """The lookup part of a presented key, or None when it is not shaped like one."""
        if not key.startswith(cls.PREFIX):
            return None
        lookup, sep, secret = key[len(cls.PREFIX) :].partition("_")
        if not sep or not secret or len(lookup) != 12:
            return None
        return lookup

    def set_key(self) -> str:
        """Give this (unsaved) row a new key; returns the plain key, shown only now."""
        self.lookup, key = self.new_key()
        self.key_hash = self.hash_key(key)
        return key

    def matches(self, key: str) -> bool:
        """Constant-time comparison of a presented key with the stored hash."""
        return hmac.compare_digest(self.key_hash, self.hash_key(key))

    @classmethod
    def issue(cls, user: Any, name: str = "") -> tuple[ApiKey, str]:
        """Create a key for `user`; returns the row and the plain key (shown only now)."""
        row = cls(user=user, name=name)
        key = row.set_key()
        row.save()
        return row, key

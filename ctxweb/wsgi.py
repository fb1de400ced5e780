"""WSGI entry point (gunicorn ctxweb.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
application = get_wsgi_application()

"""The HTML pages: one module per page or area.

Views only translate HTTP: they read through `sessions_app.selectors` (another owner's
session is a 404) and change through `sessions_app.services`. Every view requires a login
and is wrapped in `failures.service_errors`, the one place where service errors become
responses (404, 422, 409, 503). A view renders its whole page, or only its partial for an
HTMX request (django-htmx's `request.htmx`).
"""

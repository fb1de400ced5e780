"""The HTML pages: one module per page or area.

Every view requires a login and loads sessions through `services.sessions.sessions_for`, so
another owner's session is a 404. A view renders its whole page, or only its partial for an
HTMX request (django-htmx's `request.htmx`).
"""

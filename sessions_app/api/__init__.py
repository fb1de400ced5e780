"""The REST API's routers (django-ninja); the NinjaAPI instance is ctxweb.api.api."""

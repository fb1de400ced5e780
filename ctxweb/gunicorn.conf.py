"""gunicorn settings for ctxweb in production: `gunicorn -c ctxweb/gunicorn.conf.py`.

Everything comes from the environment (docs/deployment.md has the table):
CTXWEB_BIND (default 127.0.0.1:8000, behind a reverse proxy), CTXWEB_WEB_WORKERS (default
2 x cores + 1), CTXWEB_WEB_THREADS (1), CTXWEB_WEB_TIMEOUT (60 s: a synchronous compaction
calls the summary model), CTXWEB_WEB_MAX_REQUESTS (0: never), CTXWEB_WEB_PRELOAD (on),
CTXWEB_ACCESS_LOG (`-`: stdout; empty: off) and CTXWEB_LOG_LEVEL. Background compactions
run in `manage.py db_worker` processes, not here.

The ASGI application is served by default, with gunicorn's own `asgi` worker (gunicorn 24+;
one event loop per process): the proxy (`/proxy/`, README "Point an agent at the proxy")
streams answers as they arrive, and an open stream waiting on upstream holds no worker.
CTXWEB_WEB_ASGI=0 serves the WSGI application with sync workers instead: streamed proxy
answers are then sent whole, once upstream has finished.
"""

from __future__ import annotations

import multiprocessing
import os

ASGI = os.environ.get("CTXWEB_WEB_ASGI", "1").lower() not in {"0", "false", "no", "off"}

if ASGI:
    wsgi_app = "ctxweb.asgi:application"
    worker_class = "asgi"
    asgi_lifespan = "on"  # closes the pooled upstream client at shutdown (proxy/pool.py)
else:
    wsgi_app = "ctxweb.wsgi:application"

bind = os.environ.get("CTXWEB_BIND", "127.0.0.1:8000").split(",")
workers = int(os.environ.get("CTXWEB_WEB_WORKERS", str(multiprocessing.cpu_count() * 2 + 1)))
threads = int(os.environ.get("CTXWEB_WEB_THREADS", "1"))
timeout = int(os.environ.get("CTXWEB_WEB_TIMEOUT", "60"))
graceful_timeout = 30
keepalive = 5
# No recycling unless asked for (0): a recycled process's clients reconnect to the one still
# serving, and agents keep their connections, so the load stayed lopsided until the next
# recycle (bench/load.py: 150 requests/s with a recycle every 2000 requests, 215 without).
# The processes' caches are bounded; set it to bound a leak of your own.
max_requests = int(os.environ.get("CTXWEB_WEB_MAX_REQUESTS", "0"))
max_requests_jitter = max_requests // 10
# The application is loaded once, before the workers are forked: a restarted or recycled
# worker serves again within milliseconds. Loaded in each worker instead, it took a second
# or two, and two workers recycled at the same moment (even load, even counts) left none
# listening: bench/load.py saw every request wait 1.5-2.5 s. With it, `kill -HUP`
# re-forks the workers from the code already loaded: to deploy new code, restart
# gunicorn, or set CTXWEB_WEB_PRELOAD=0 (docs/deployment.md).
preload_app = os.environ.get("CTXWEB_WEB_PRELOAD", "1").lower() not in {"0", "false", "no", "off"}

accesslog = os.environ.get("CTXWEB_ACCESS_LOG", "-") or None
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'
errorlog = "-"
loglevel = os.environ.get("CTXWEB_LOG_LEVEL", "info").lower()

# The proxy in front terminates TLS and sets X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER).
forwarded_allow_ips = os.environ.get("CTXWEB_FORWARDED_ALLOW_IPS", "127.0.0.1,::1")

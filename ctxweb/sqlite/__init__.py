"""SQLite as ctxweb serves it (the ENGINE `ctxweb.sqlite`): Django's backend whose write
transactions take turns, within a process and across processes (`base.DatabaseWrapper`)."""

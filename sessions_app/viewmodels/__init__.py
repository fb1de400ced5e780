"""View models for the pages: plain values built from the database, ready for templates.

Views stay thin: they load a session for the owner, call one of these builders and render.
Each module is one concept: limits, message blocks, the history tree and its windows, the
context gauge, the token timeline, the now-vs-before comparison, the session list.
"""

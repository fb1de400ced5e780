"""Demo data for `manage.py seed_demo`: built-in transcripts and a synthetic agent session."""

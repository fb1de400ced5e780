"""Compacting a stored session and undoing it: runs, write-back, archives, offloads, reverts,
failures."""

"""Background runs and their upkeep: jobs, the reaper, worker heartbeats, cooldown, health."""

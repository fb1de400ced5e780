"""A session and its own numbers: lifecycle, counters, threshold, overhead, usage, policies,
export."""

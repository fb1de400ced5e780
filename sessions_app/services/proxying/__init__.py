"""The transparent proxy's writes: sessions found or started, turns appended and recorded."""

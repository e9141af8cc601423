"""Stand-ins for the text encoder: the embedded workload ships no real encoder weights."""

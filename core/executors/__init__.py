"""Executors that ship with squall (only the torch executor; the rest are plugins)."""

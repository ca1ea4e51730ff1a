"""The frontend: a Python function or module becomes a Trace. Tracing, speculation on values,
reading Python state through recording views (never patching it), output structures and
views. Imports the vocabulary, prims, ltorch and the market (speculation runs real ops).
"""

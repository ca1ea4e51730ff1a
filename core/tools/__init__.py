"""Tools: what a person runs. The `squall` command line, explain, the demo model, and the
bug-report bundle `squall rage` writes. Imports from every earlier stage.
"""

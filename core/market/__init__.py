"""The market: who offers what. Hook specifications, plugin discovery, the executor and
fusion-executor classes, the user's executor priorities (config), and the built-in torch
executor, registered exactly as a plugin is. Imports the vocabulary, prims and ltorch only.
"""

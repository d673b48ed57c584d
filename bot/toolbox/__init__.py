"""The registry, custom tools, session hooks, the worker pool, MCP. May import: core, config.
"""

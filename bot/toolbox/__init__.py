"""The registry, custom tools, session hooks, the worker pool, MCP, what a failed call says.
May import: core, language, config.
"""

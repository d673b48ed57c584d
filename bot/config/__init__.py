"""The configuration file: its schema, defaults, the price table, reading it. May import: core.
"""

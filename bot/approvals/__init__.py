"""Approval requests, grants, display, receipts, undo, expiry.
May import: core, config, store, access, toolbox.
"""

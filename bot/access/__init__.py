"""Who may do what: senders and levels (roles, pairing), rate limits, workspaces.
May import: core, config, store.
"""

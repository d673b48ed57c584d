"""Journal (the one write path of a step), turns, history, members, sessions, the durable
inbox, delivery, long-term memory. May import: core, config, store, access, money, approvals,
media.
"""

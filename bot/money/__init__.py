"""What it costs: spend, budgets, fair sharing of model slots, tool quotas.
May import: core, config, store.
"""

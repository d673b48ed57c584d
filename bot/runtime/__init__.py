"""The agent loop, dispatch, the approval flow, recovery, commands, the process's parts
(Services). May import every package above except ops.
"""

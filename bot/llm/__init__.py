"""The model client, streaming, errors, the prompt, the metered model port.
May import: core, config, store, money, toolbox.
"""

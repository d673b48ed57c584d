"""The contract: identity (Sender, Level), events, the tool contract and its ports, errors,
the untrusted wrapper, the pure policy, logging. Imports nothing else of bot.
"""

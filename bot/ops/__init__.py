"""The operator's tools: the `myclaw` command line and doctor, the web console, /healthz,
the security audit. May import everything, including the composition root (bot.app).
"""

"""Secrets: which files are secret files (`files`) and the values no tool result may carry
(`redaction`). Part of the core: imports nothing of `bot` outside it."""

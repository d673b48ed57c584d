"""Schedules, claims, the scheduler, job runs, the jobs port. May import: core, config, store,
access, conversation.
"""

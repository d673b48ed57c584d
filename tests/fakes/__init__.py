"""Fakes of the remote services, served on 127.0.0.1 (on port 0: the system picks a free one, so
parallel test workers never collide)."""

# How long a fake waits by default for something a passing test makes happen. Generous on
# purpose: with the suite on every core of a shared machine one step can take seconds, and a
# passing test never waits it out (a test that expects nothing to happen gives its own timeout).
EVENTUALLY = 30.0

"""Whether a URL can carry data out by itself: the risk floor of a GET that sends nothing else.

A plain GET to a page reads; a GET whose URL holds a query string, a long path segment or a long
host name can deliver whatever the model put there (a file, a secret) to the server that logs
it. Such a URL is medium risk, so a read_only sender cannot send it and a supervised one is
asked, with the whole URL in the preview.
"""

from __future__ import annotations

from tools._netaddr import Target

MAX_PLAIN_SEGMENT = 64    # longer path segments (and host labels) are treated as carrying data
MAX_PLAIN_HOST = 64


def carries_data(target: Target) -> bool:
    path, _, query = target.path.partition("?")
    if query or "?" in target.path:
        return True
    if any(len(segment) > MAX_PLAIN_SEGMENT for segment in path.split("/")):
        return True
    return len(target.host) > MAX_PLAIN_HOST

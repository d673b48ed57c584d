"""The model client verifies TLS with the context aiohttp loaded already (one CA store)."""

from __future__ import annotations

import ssl

from aiohttp import connector

from bot.llm.anthropic_provider import AnthropicProvider, verified_tls


def test_the_model_client_shares_aiohttps_verified_context():
    context = verified_tls()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context is connector._SSL_CONTEXT_VERIFIED


async def test_the_client_is_built_with_it():
    provider = AnthropicProvider(key="x", key_env="ANTHROPIC_API_KEY", base_url=None,
                                 timeout=5.0, max_retries=0)
    try:
        transport = provider.client._client._transport
        assert transport.ssl_context is verified_tls()
    finally:
        await provider.close()

"""MCP servers as tools: config parsing, the client manager, and the tool adapter."""

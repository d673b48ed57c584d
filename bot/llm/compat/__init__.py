"""Any OpenAI-compatible endpoint through the official openai SDK (OpenAI, OpenRouter, Ollama,
vLLM, LM Studio, llama.cpp): provider.py calls it, request.py converts the request, stream.py
reads the streamed answer. Imported only when a configured model uses it."""

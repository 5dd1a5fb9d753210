"""A trained model leaves execrl: export as a plain Hugging Face directory, serve over an OpenAI API.

    execrl export runs/grpo-smollm2-20261130-101500 exported/      # newest checkpoint -> HF directory
    execrl serve --model exported/ --port 8000                     # /v1/chat/completions, /v1/models

Heavy modules (torch, transformers, aiohttp) load only when a function that needs them is called.
"""

from execrl.serve.export import ModelSource, export_model, load_any_model, resolve_model_source

__all__ = ["ModelSource", "export_model", "load_any_model", "resolve_model_source"]

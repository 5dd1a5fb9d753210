"""execrl: reinforcement-learning post-training of LLMs from execution feedback.

Areas (each a subpackage): ``sandbox`` (isolated execution), ``tasks`` (verifiable task suites),
``rewards`` (verifiers by domain), ``rollout`` (group sampling), ``trainer`` (losses, advantages,
update step, checkpoints), ``scheduler``, ``telemetry``, ``eval``, ``refine``, ``distributed``;
``recipes`` holds the readable training loops. Small shared modules at the bottom: ``inputs`` (reading
user files with bounded memory), ``registry``, ``retry``, ``seeding``, ``chat_http`` (one OpenAI
chat-completions request to an untrusted endpoint: typed answer or one typed error).
"""

__version__ = "0.1.0"
__all__ = ["__version__"]

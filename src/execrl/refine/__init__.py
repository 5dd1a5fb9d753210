"""Execute and refine: the model writes code, the sandbox runs the visible tests, the failures go back into
the context, the model corrects itself; scored on hidden tests against honest controls.

    from execrl.refine import RefineConfig, LocalBackend, first_attempts, run_refine
    execrl refine --model smollm2-135m-instruct --suite humaneval --rounds 3 --json out.json
    execrl refine show out.trace.jsonl

See ``loop.py`` (the loop and the resampling baseline), ``feedback.py`` (formats), ``report.py`` (metrics).
"""

from execrl.refine.backends import ChatBackend, GenerationParams, LocalBackend, OpenAIBackend, Reply
from execrl.refine.evaluate import CONDITIONS, evaluate_refine
from execrl.refine.feedback import FEEDBACK_FORMATS, FeedbackFormat, render_feedback
from execrl.refine.loop import Attempt, ProblemRun, RefineConfig, first_attempts, run_refine, run_resample
from execrl.refine.report import summarize
from execrl.refine.trace import TraceWriter, format_trace, read_trace

__all__ = [
    "CONDITIONS",
    "FEEDBACK_FORMATS",
    "Attempt",
    "ChatBackend",
    "FeedbackFormat",
    "GenerationParams",
    "LocalBackend",
    "OpenAIBackend",
    "ProblemRun",
    "RefineConfig",
    "Reply",
    "TraceWriter",
    "evaluate_refine",
    "first_attempts",
    "format_trace",
    "read_trace",
    "render_feedback",
    "run_refine",
    "run_resample",
    "summarize",
]

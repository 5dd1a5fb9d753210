"""Tasks: one schema for every domain, validated loading from any URL, suites, importers, overlap.

    from execrl.tasks import load_suite, load_tasks, save_tasks, list_suites
    train = load_suite("functions", "train")          # built-in generator
    evaluation = load_suite("humaneval", "test")      # eval only; "train" raises
    tasks = load_tasks("s3://bucket/tasks.jsonl")     # bad rows raise with file:line: field '...'
    report = load_tasks("tasks.jsonl", rejects_path="rejects.jsonl")   # or set them aside, counted

No torch here; ``datasets`` and ``fsspec`` are imported only by the functions that need them.
"""

from execrl.tasks.audit_split import hold_back_audit
from execrl.tasks.check import CheckReport, FamilyVerdict, TaskCheck, check_tasks
from execrl.tasks.errors import FieldError, SuiteError, TaskError, TaskSourceError, TaskValidationError
from execrl.tasks.hf import from_hf_dataset, to_hf_dataset
from execrl.tasks.importers import (
    IMPORTERS,
    get_importer,
    import_apps,
    import_codecontests,
    import_livecodebench,
    import_mbpp,
    import_mbpp_plus,
    import_sandboxfusion,
)
from execrl.tasks.overlap import OverlapPair, OverlapReport, overlap_report
from execrl.tasks.registry import (
    SuiteInfo,
    list_suites,
    load_suite,
    register_suite,
    suite_info,
    suite_names,
    unregister_suite,
)
from execrl.tasks.schema import (
    ChatMessage,
    CodeSpec,
    MathSpec,
    StructuredSpec,
    Task,
    TaskMetadata,
    VerifierSpec,
    audit_view,
)
from execrl.tasks.serialize import task_from_dict, task_to_dict, task_to_json, validate_task
from execrl.tasks.storage import LoadReport, load_tasks, save_tasks

__all__ = [
    "IMPORTERS",
    "ChatMessage",
    "CheckReport",
    "CodeSpec",
    "FamilyVerdict",
    "FieldError",
    "LoadReport",
    "MathSpec",
    "OverlapPair",
    "OverlapReport",
    "StructuredSpec",
    "SuiteError",
    "SuiteInfo",
    "Task",
    "TaskCheck",
    "TaskError",
    "TaskMetadata",
    "TaskSourceError",
    "TaskValidationError",
    "VerifierSpec",
    "audit_view",
    "check_tasks",
    "from_hf_dataset",
    "get_importer",
    "hold_back_audit",
    "import_apps",
    "import_codecontests",
    "import_livecodebench",
    "import_mbpp",
    "import_mbpp_plus",
    "import_sandboxfusion",
    "list_suites",
    "load_suite",
    "load_tasks",
    "overlap_report",
    "register_suite",
    "save_tasks",
    "suite_info",
    "suite_names",
    "task_from_dict",
    "task_to_dict",
    "task_to_json",
    "to_hf_dataset",
    "unregister_suite",
    "validate_task",
]

"""Recursive language models: the model works in a Python REPL where the context is a variable.

Instead of putting a large context into one prompt, ``RLM`` gives the model a REPL (a sandboxed
child kernel by default, or this process) holding the named values, describes them in the first
message without including them, and runs the fenced ``python``/``repl`` blocks of each reply,
returning their (truncated) output as the next message. In the REPL, ``llm(prompt)`` and
``llm_batch(prompts)`` run sub-queries as child runs of the RLM run, ``rlm_query(prompt, context)``
and ``rlm_query_batched`` start child RLM runs with REPLs of their own (depth-capped by
``RLMLimits.max_depth``), and ``answer = {"content": ..., "ready": True}`` (or ``FINAL``/``FINAL_VAR``)
ends it. Imports the harness and ``jupyter_client``; never the widgets or magics.
"""

from __future__ import annotations

from ._blocks import (
    ReplyPart as ReplyPart,
    extract_code_blocks as extract_code_blocks,
    final_from_text as final_from_text,
    reply_parts as reply_parts,
)
from ._bridge import (
    BridgeServer as BridgeServer,
    SubQueries as SubQueries,
)
from ._config import (
    ContextValueError as ContextValueError,
    RLMError as RLMError,
    RLMLimits as RLMLimits,
)
from ._describe import (
    describe_context as describe_context,
    describe_value as describe_value,
)
from ._dialect import (
    REPL_TOOL as REPL_TOOL,
    CodeApproval as CodeApproval,
    REPLDialect as REPLDialect,
)
from ._environment import (
    Environment as Environment,
    ExecutionResult as ExecutionResult,
)
from ._events import (
    RLMCode as RLMCode,
    RLMOutput as RLMOutput,
    RLMPartialAnswer as RLMPartialAnswer,
    RLMStarted as RLMStarted,
)
from ._frame_schema import (
    DataFrameSchema as DataFrameSchema,
)
from ._kernel import (
    KernelEnvironment as KernelEnvironment,
)
from ._local import (
    LocalEnvironment as LocalEnvironment,
)
from ._prompt import (
    RLM_SYSTEM_PROMPT as RLM_SYSTEM_PROMPT,
)
from ._resume import (
    missing_repl_note as missing_repl_note,
    repl_variables as repl_variables,
    rlm_journal as rlm_journal,
)
from ._rlm import (
    RLM as RLM,
    EnvironmentName as EnvironmentName,
)
from ._session import (
    RLMSession as RLMSession,
)
from ._trajectory import (
    TRAJECTORY_FORMAT as TRAJECTORY_FORMAT,
    TRAJECTORY_VERSION as TRAJECTORY_VERSION,
    Trajectory as Trajectory,
    TrajectoryError as TrajectoryError,
    TrajectoryVersionError as TrajectoryVersionError,
)
from ._trajectory_build import (
    build_trajectory as build_trajectory,
)
from ._trajectory_model import (
    TrajectoryCall as TrajectoryCall,
    TrajectoryRun as TrajectoryRun,
    TrajectoryStep as TrajectoryStep,
)

__all__ = [
    "BridgeServer",
    "CodeApproval",
    "ContextValueError",
    "DataFrameSchema",
    "Environment",
    "EnvironmentName",
    "ExecutionResult",
    "KernelEnvironment",
    "LocalEnvironment",
    "REPLDialect",
    "REPL_TOOL",
    "RLM",
    "RLMCode",
    "RLMError",
    "RLMLimits",
    "RLMOutput",
    "RLMPartialAnswer",
    "RLMSession",
    "RLMStarted",
    "RLM_SYSTEM_PROMPT",
    "ReplyPart",
    "SubQueries",
    "TRAJECTORY_FORMAT",
    "TRAJECTORY_VERSION",
    "Trajectory",
    "TrajectoryCall",
    "TrajectoryError",
    "TrajectoryRun",
    "TrajectoryStep",
    "TrajectoryVersionError",
    "build_trajectory",
    "describe_context",
    "describe_value",
    "extract_code_blocks",
    "final_from_text",
    "missing_repl_note",
    "repl_variables",
    "reply_parts",
    "rlm_journal",
]

"""`PhloemError`, `ErrorValue` and `ErrorKind`: the one error vocabulary.

Every failure a user can see at phloem's public boundaries (the socket, the clients, CLI
`--json`, result documents, agent events, `ModelError`, one-shot results, planning
results) has a stable, machine-readable `kind` and a human message. The wire form is
`ErrorValue`, `{kind, message, details?}`.

`ErrorKind` declares every kind once, grouped by the area that first raises it, each with
a one-line meaning (`ErrorKind.X.meaning`). A member is a `str`, so wire values are the
plain snake_case strings. Kinds shared by several areas (`timeout`, `cancelled`,
`backpressure`, `config_invalid`, ...) keep one spelling and one meaning everywhere.
Subsets that one API promises are kept next to that API: `MODEL_ERROR_KINDS`
(`phloem.protocols.model`), `ONE_SHOT_KINDS` (`phloem.models.oneshot`).
`tests/test_errors.py` walks the source and fails on any literal kind not declared here.

Two neighbouring vocabularies are deliberately separate:
- tool failure codes, the `error` of a tool's failure value `{"error": code, ...}`
  (`phloem.tools.errors.ERROR_CODES`, e.g. `arguments`, `outside_root`): they are pinned
  by the plasmid tool conformance pack (`phloem.tools.conformance`), so they follow
  plasmid's spelling, not this enum; they are not `PhloemError` kinds;
- exit kinds (`phloem.supervision.reasons.ExitKind`: `normal`, `shutdown`, `killed`, ...)
  say why a process or actor stopped. When an exit ends a stream receiver, its non-normal
  exit kind becomes the error kind, so those are declared here too, with the same spelling.

"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from phloem.protocols.secrets import redact, redact_value


@enum.unique
class ErrorKind(enum.StrEnum):
    """Every stable error `kind`, with its meaning (`ErrorKind.TIMEOUT.meaning`)."""

    meaning: str

    def __new__(cls, value: str, meaning: str = "") -> ErrorKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    # --- shared by several areas --------------------------------------------------------
    TIMEOUT = "timeout", "a deadline passed before the reply, event, room or answer came"
    CANCELLED = "cancelled", "the caller or the owner cancelled the operation"
    CLOSED = "closed", "the client or stream is closed, or the stream ended normally"
    BACKPRESSURE = "backpressure", "a bound on queued or live work is reached; retry later"
    CONFIG_INVALID = "config_invalid", "a configuration value, file or component is invalid"
    INVALID_ARGUMENT = "invalid_argument", "an argument of the call is missing or invalid"
    LIMIT_EXCEEDED = "limit_exceeded", "a fixed capacity (agents, sessions, events) is full"
    UNSUPPORTED = "unsupported", "the target does not support this operation"
    UNKNOWN_PROVIDER = "unknown_provider", "no model provider of that name is configured"

    # --- wire protocol, daemon and clients ----------------------------------------------
    BAD_FRAME = "bad_frame", "a frame could not be decoded, or broke the protocol"
    FRAME_TOO_LARGE = "frame_too_large", "a frame exceeds the maximum frame size"
    UNSUPPORTED_VERSION = "unsupported_version", "the peer speaks no supported protocol version"
    BAD_MESSAGE = "bad_message", "a payload does not decode against the target's request type"
    UNKNOWN_ACTOR = "unknown_actor", "no running actor that takes messages at that path"
    UNKNOWN_STREAM = "unknown_stream", "no open stream of that name"
    NOT_OWNER = "not_owner", "the ref or stream belongs to another owner"
    INVALID_REF = "invalid_ref", "a ref is malformed"
    NOPROC = "noproc", "the target is not running, or stopped before replying"
    ACTOR_ERROR = "actor_error", "the handler raised something that is not a PhloemError"
    PERMISSION_DENIED = "permission_denied", "the peer may not use this daemon socket"
    TOO_MANY_CONNECTIONS = (
        "too_many_connections",
        "the daemon's max_connections (or max_pending_handshakes) is reached",
    )
    SHUTTING_DOWN = "shutting_down", "the daemon or tree is stopping"
    CONNECTION_LOST = "connection_lost", "the connection to the daemon broke or was refused"
    NO_DAEMON = "no_daemon", "no daemon listens on the socket path"
    DUPLICATE_ID = "duplicate_id", "a request id is already in flight (reserved, not raised)"
    INTERNAL = "internal", "the daemon failed to serve the connection (a bug)"
    DAEMON_RUNNING = "daemon_running", "a daemon already listens on the socket path"
    SOCKET_IN_USE = "socket_in_use", "the socket path exists and is not a usable socket"
    SOCKET_ERROR = "socket_error", "the daemon socket cannot be bound"
    LISTEN_FAILED = (
        "listen_failed",
        "`phloem web` cannot listen on its address (in use, not local, not permitted)",
    )
    UNSAFE_SOCKET_DIR = (
        "unsafe_socket_dir",
        "the socket's directory is another uid's or writable by group or others",
    )

    # --- supervision, actors, channels, refs, streams -----------------------------------
    START_FAILED = "start_failed", "the tree or one of its services could not start"
    FAILED_TO_START_CHILD = "failed_to_start_child", "a child's start raised or timed out"
    ALREADY_STARTED = "already_started", "start_child: a running child has that id"
    ALREADY_PRESENT = "already_present", "start_child: a stopped child with that id is kept"
    BAD_CHILD_SPEC = "bad_child_spec", "start_child was not given a ChildSpec"
    TOO_MANY_CHILDREN = "too_many_children", "the supervisor has MAX_CHILDREN children"
    NOT_FOUND = "not_found", "the supervisor has no child with that id"
    RUNNING = "running", "restart/delete_child: the child is running"
    RESTARTING = "restarting", "restart/delete_child: the child is being restarted"
    SIMPLE_ONE_FOR_ONE = "simple_one_for_one", "not allowed for dynamic children"
    UNKNOWN_CHILD = "unknown_child", "no supervisor's child at that tree path"
    NOT_RUNNING = "not_running", "stop: the child is not running"
    NOT_CONTROLLABLE = (
        "not_controllable",
        "the tree's root (stop the daemon instead) cannot be started, stopped or restarted",
    )
    CHANNEL_CLOSED = "channel_closed", "the process channel is closed"
    CHILD_START_FAILED = "child_start_failed", "call_in_child: the process child did not start"
    CHILD_TIMEOUT = "child_timeout", "call_in_child: no answer within the call's timeout"
    CHILD_EXITED = "child_exited", "call_in_child: the child ended without answering"
    CHILD_CANCELLED = "child_cancelled", "call_in_child: the call was cancelled"
    CHILD_SERVER_LOST = "child_server_lost", "call_in_child: the fork server died with the child"
    CHANNEL_TIMEOUT = "channel_timeout", "a channel send or receive timed out"
    NO_CHANNEL = "no_channel", "the process child was started without a channel"
    UNENCODABLE = "unencodable", "a value cannot be encoded as msgpack"
    TOO_MANY_REFS = "too_many_refs", "the owner holds max_refs_per_owner refs"
    OWNER_DOWN = "owner_down", "the owner went away (also an exit kind)"
    STREAM_EXISTS = "stream_exists", "a stream of that name is already open"
    # exit kinds (`ExitKind`) that end a stream receiver: the error kind is the exit kind
    SHUTDOWN = "shutdown", "exit: stopped by its supervisor or owner"
    KILLED = "killed", "exit: killed"
    EXCEPTION = "exception", "exit: the actor or process raised"
    HEAP_EXCEEDED = "heap_exceeded", "exit: over its memory limit"

    # --- model providers (`ModelError`, see MODEL_ERROR_KINDS) --------------------------
    INVALID_REQUEST = "invalid_request", "the model request cannot be sent to this provider"
    UNSUPPORTED_CONTENT = "unsupported_content", "the provider cannot take this content part"
    UNSUPPORTED_STREAMING = "unsupported_streaming", "the provider does not stream"
    INVALID_TOOL_RESULT = "invalid_tool_result", "a tool result does not match a prior call"
    TRANSPORT = "transport", "the HTTP request failed below HTTP (DNS, connect, reset)"
    REDIRECT_REFUSED = "redirect_refused", "the provider answered with a redirect"
    RESPONSE_TOO_LARGE = "response_too_large", "the response exceeded max_response_bytes"
    RATE_LIMITED = "rate_limited", "HTTP 429"
    AUTHENTICATION = "authentication", "HTTP 401 or 403"
    SERVER_ERROR = "server_error", "HTTP 5xx, or a provider-reported server failure"
    CLIENT_ERROR = "client_error", "another HTTP 4xx"
    MALFORMED_RESPONSE = "malformed_response", "the response is not what the API promises"
    EMPTY_CHOICES = "empty_choices", "the response has no candidate"
    MULTIPLE_CHOICES = "multiple_choices", "the response has more than one candidate"
    MALFORMED_ARGUMENTS = "malformed_arguments", "tool call arguments are not a JSON object"
    MISSING_FUNCTION_NAME = "missing_function_name", "a tool call has no function name"
    DUPLICATE_TOOL_CALL_ID = "duplicate_tool_call_id", "two tool calls share one id"
    UNSUPPORTED_TOOL_CALL = "unsupported_tool_call", "a tool call of a type phloem cannot run"
    PROMPT_BLOCKED = "prompt_blocked", "reserved: a blocked prompt is a SAFETY answer today"
    SCRIPT_EXHAUSTED = "script_exhausted", "ScriptedModel has no answer left"

    # --- one-shot runs and the probe (`result.error.kind`, see ONE_SHOT_KINDS) ----------
    MODEL_PANIC = "model_panic", "the model raised something that is not a ModelError"
    TOOL_PANIC = "tool_panic", "a tool raised"
    OUTPUT_TRUNCATED = "output_truncated", "the model's output hit max_output_tokens"
    TEXT_TRUNCATED = "text_truncated", "the final text exceeded max_returned_text_bytes"
    MODEL_CALL_LIMIT = "model_call_limit", "max_model_calls ran out"
    TOOL_CALL_LIMIT = "tool_call_limit", "a response asked for too many tool calls"
    TOOL_CALLING_UNSUPPORTED = "tool_calling_unsupported", "the model cannot call tools"
    NO_FINAL_RESPONSE = "no_final_response", "the model returned no final answer"
    EXECUTION_FAILED = "execution_failed", "a model call or tool result failed"
    CLEANUP_FAILED = "cleanup_failed", "the ephemeral session could not be deleted"

    # --- agents: registry, sessions, runs, outcome statuses, agent events ---------------
    UNKNOWN_AGENT = "unknown_agent", "no agent of that name is registered"
    AGENT_EXISTS = "agent_exists", "an agent of that name is already registered"
    PLAN_UNAVAILABLE = "plan_unavailable", "the planner decides as it goes; no plan ahead"
    UNKNOWN_SESSION = "unknown_session", "no session with that id"
    SESSION_EXISTS = "session_exists", "a session with that id already exists"
    RUN_INCOMPLETE = "run_incomplete", "a run's event stream ended without its result"
    MISSING_STATE_KEY = "missing_state_key", "an instruction template names a missing key"
    ITERATION_LIMIT = "iteration_limit", "outcome: max_iterations or max_model_calls ran out"
    GOAL_MISSING = "goal_missing", "outcome: the goal key is missing or invalid at the end"
    PLAN_ERROR = "plan_error", "outcome: no valid plan (cycle, unreachable goal, ...)"
    AGENT_FAILED = "agent_failed", "outcome: a sub-agent failed"
    MODEL_FAILED = "model_failed", "a model call of an agent failed"
    AGENT_ERROR = "agent_error", "the agent's function raised, or its child died unexplained"
    AGENT_CRASHED = "agent_crashed", "the agent's run raised instead of yielding an error"
    AGENT_START_FAILED = "agent_start_failed", "the agent's supervised child did not start"
    AGENT_TIMEOUT = "agent_timeout", "the agent ran longer than its timeout; killed"
    AGENT_SHUTDOWN = "agent_shutdown", "the agent's child was shut down before its result"
    AGENT_KILLED = "agent_killed", "the agent's child was killed"
    AGENT_HEAP_EXCEEDED = "agent_heap_exceeded", "the agent's child exceeded its memory limit"
    AGENT_OWNER_DOWN = "agent_owner_down", "the agent's child stopped as its owner went away"
    AGENT_NOPROC = "agent_noproc", "the agent's child was gone"
    AGENT_BACKPRESSURE = "agent_backpressure", "the agent's child stopped on backpressure"
    MISSING_INPUT = "missing_input", "a FunctionAgent's input keys are not in state"
    INVALID_OUTPUT = "invalid_output", "an agent's output is not JSON, too large or malformed"
    TOOL_ROUND_LIMIT = "tool_round_limit", "an LlmAgent still calls tools after max_tool_rounds"

    # --- instructions, templates, tool policy and confirmation ---------------------------
    UNKNOWN_TEMPLATE = "unknown_template", "no prompt template of that name (`/name args`)"
    UNKNOWN_CALL = "unknown_call", "no tool call of that id is waiting for confirmation"

    # --- plugins ---------------------------------------------------------------------------
    PLUGIN_HALTED = "plugin_halted", "a plugin or local callback halted the run"
    PLUGIN_FAILED = "plugin_failed", "a plugin with failure = closed failed; the run stops"
    PLUGIN_EXCEPTION = "plugin_exception", "a plugin hook raised (recorded as a failure)"
    PLUGIN_TIMEOUT = "plugin_timeout", "a plugin hook did not answer within timeout_ms"
    PLUGIN_OVERSIZE = "plugin_oversize", "a plugin returned a value over max_value_bytes"
    PLUGIN_CONTRACT_VIOLATION = (
        "plugin_contract_violation",
        "a plugin answered what its mode or hook does not allow",
    )
    PLUGIN_UNAVAILABLE = "plugin_unavailable", "a stateful plugin instance is down (not restarted)"
    PLUGIN_STATE_TOO_LARGE = "plugin_state_too_large", "a stateful plugin's state is over its bound"
    QUEUE_FULL = "queue_full", "a stateful plugin instance has max_queue calls waiting"
    # --- durable sessions and the harness (phloem.actors.sessions) ----------------------
    SESSION_BUSY = "session_busy", "the session already has an active run"
    SESSION_CORRUPT = "session_corrupt", "a session file has a corrupt complete line"
    SESSION_CONFLICT = "session_conflict", "an event id was appended twice with other content"
    SESSION_STORE_LOCKED = "session_store_locked", "another process holds the session store"
    SESSION_IO = "session_io", "the session store could not read or write a file"

    # --- planning runtime ----------------------------------------------------------------
    UNKNOWN_PLAN_FIELDS = "unknown_plan_fields", "a plan has unknown fields"
    UNKNOWN_PLAN_STEP_FIELDS = "unknown_plan_step_fields", "a plan step has unknown fields"
    DUPLICATE_PLAN_FIELD = "duplicate_plan_field", "a plan document repeats a field"
    MISSING_PLAN_FIELD = "missing_plan_field", "a plan lacks a required field"
    DUPLICATE_PLAN_STEP_ID = "duplicate_plan_step_id", "two plan steps share one id"
    INVALID_PLAN_STEP = "invalid_plan_step", "a plan step is invalid"
    INVALID_PLAN_FIELD = "invalid_plan_field", "a plan field has an invalid value"
    INVALID_PLAN_JSON = "invalid_plan_json", "a plan document is not valid canonical JSON"
    UNSUPPORTED_PLAN_SCHEMA_VERSION = (
        "unsupported_plan_schema_version",
        "a plan's schema_version is not supported",
    )
    INVALID_PLAN_IDENTITY = "invalid_plan_identity", "a plan's id or revision is wrong"
    PLAN_SIZE_LIMIT_EXCEEDED = "plan_size_limit_exceeded", "a plan exceeds its size limits"
    INVALID_PLANNING_RESULT = "invalid_planning_result", "a result document is invalid"
    INVALID_PLANNING_OPTIONS = "invalid_planning_options", "the planning options are invalid"
    INVALID_PLANNING_ADAPTER = "invalid_planning_adapter", "an adapter is unknown or unusable"
    INVALID_PLANNING_REQUEST = "invalid_planning_request", "a planning request is invalid"
    NOT_PLANNING_OWNER = (
        "not_planning_owner",
        "the planning ref is not held by this owner, or the durable run is another uid's",
    )
    INVALID_PLANNING_REF = "invalid_planning_ref", "a planning ref is malformed"
    TOO_MANY_PLANNING_RUNS = "too_many_planning_runs", "the owner holds too many planning refs"
    PLANNING_AWAIT_TIMEOUT = "planning_await_timeout", "the run did not end within the await"
    PLANNING_CANCEL_TIMEOUT = "planning_cancel_timeout", "the run did not acknowledge a cancel"
    PLANNING_UNAVAILABLE = "planning_unavailable", "no planning service, or it is stopped"
    PLANNER_FAILED = "planner_failed", "result: the planner returned an error"
    INVALID_PLANNER_OUTPUT = "invalid_planner_output", "result: the planner's output is invalid"
    PLANNER_CALLBACK_FAILED = "planner_callback_failed", "result: a planner callback failed"
    INVALID_INITIAL_PLAN = "invalid_initial_plan", "result: the first plan is invalid"
    INVALID_REPLAN = "invalid_replan", "result: a replan is invalid"
    INVALID_PLANNER_DECISION = "invalid_planner_decision", "result: a review decision is invalid"
    MAX_STEPS_EXCEEDED = "max_steps_exceeded", "result: max_steps ran out"
    MAX_REPLANS_EXCEEDED = "max_replans_exceeded", "result: max_replans ran out"
    DEADLINE_EXCEEDED = "deadline_exceeded", "result: the run's deadline passed"
    STEP_FAILED = "step_failed", "result: a step failed and the planner gave up"
    EMPTY_PLAN_EXECUTION = "empty_plan_execution", "result: the plan ran out of steps"
    INVALID_PLANNER_RESULT = "invalid_planner_result", "result: the planner's result is invalid"
    INTERNAL_RESULT_VALIDATION_FAILED = (
        "internal_result_validation_failed",
        "result: the run built a result that fails its own schema (a bug)",
    )
    RUN_CRASHED = "run_crashed", "result: the run's own actor failed (a bug)"
    EXECUTOR_FAILED = "executor_failed", "observation: the executor returned an error"
    EXECUTOR_CALLBACK_FAILED = "executor_callback_failed", "observation: its callback failed"
    INVALID_EXECUTOR_RESULT = "invalid_executor_result", "observation: its result is invalid"
    INVALID_EXECUTOR_OUTPUT = "invalid_executor_output", "observation: its output is invalid"

    # --- durable runs (phloem.actors.runs.journal) -----------------------------------------
    RUN_JOURNAL_IO = "run_journal_io", "a run journal could not be read or written"
    RUN_JOURNAL_CORRUPT = "run_journal_corrupt", "a run journal has a corrupt complete line"
    RUN_JOURNAL_FULL = "run_journal_full", "a durable run's journal reached max_journal_bytes"
    INTERRUPTED = (
        "interrupted",
        "result: a non-idempotent step was in flight at a crash; it is never run again",
    )
    UNKNOWN_DURABLE_RUN = "unknown_durable_run", "no durable run of that id is kept"
    RUN_JOURNALS_LOCKED = "run_journals_locked", "another daemon holds the run journals"

    # --- Gemini Live sessions ------------------------------------------------------------
    INVALID_LIVE_CONFIG = "invalid_live_config", "a Live session's config is invalid"
    INVALID_LIVE_INPUT = "invalid_live_input", "Live input breaks a bound or the schema"
    INVALID_LIVE_REF = "invalid_live_ref", "a Live session ref is malformed"
    NOT_LIVE_OWNER = "not_live_owner", "the Live session ref is not held by this owner"
    TOO_MANY_LIVE_SESSIONS = "too_many_live_sessions", "the owner holds too many Live refs"
    LIVE_SESSION_LIMIT = "live_session_limit", "[live] session_limit sessions are open"
    LIVE_UNAVAILABLE = "live_unavailable", "no Live service, or it is stopped"
    CLUSTER_UNAVAILABLE = (
        "cluster_unavailable",
        "no Ray cluster: it cannot be reached, the ray extra is missing, or the backend is local",
    )
    LIVE_SESSION_CLOSED = "live_session_closed", "the Live session has closed or is closing"
    NOT_READY = "not_ready", "the Live session is not active yet (or is reconnecting)"
    INGRESS_BACKPRESSURE = "ingress_backpressure", "the Live session's input queue is full"
    TOOL_CALL_MANAGED_BY_EXECUTOR = (
        "tool_call_managed_by_executor",
        "a manual response names a Live tool call that phloem runs itself",
    )
    LIVE_PROTOCOL_ERROR = "live_protocol_error", "a Live frame broke the schema or a bound"
    # --- evaluation -----------------------------------------------------------------------
    EVAL_SET_INVALID = "eval_set_invalid", "an eval set file is malformed, too large or unknown"
    EVAL_CRITERIA_INVALID = "eval_criteria_invalid", "an eval criteria file or entry is invalid"
    EVAL_OPTIONS_INVALID = "eval_options_invalid", "an eval option is out of range"
    EVAL_BASELINE_INVALID = "eval_baseline_invalid", "a baseline eval report cannot be read"
    EVAL_RUN_FAILED = "eval_run_failed", "an eval sample's agent run did not end ok"
    JUDGE_FAILED = "judge_failed", "an LLM judge call failed, timed out or broke its schema"
    SCORER_FAILED = (
        "scorer_failed",
        "a custom eval scorer raised, or answered other than a score in [0, 1] or null",
    )

    # --- bundled examples ---------------------------------------------------------------
    EXAMPLE_FAILED = "example_failed", "a bundled example did not produce what it should"


class ErrorValue(msgspec.Struct, frozen=True, tag="error"):
    """An error as a value: what crosses the socket, CLI `--json` and result documents.

    Made or decoded, its `message` and `details` are redacted (`protocols.secrets`):
    no error value carries a credential, whoever built it.
    """

    kind: str
    message: str
    details: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "message", redact(self.message))
        if self.details:
            msgspec.structs.force_setattr(self, "details", redact_value(self.details))


class PhloemError(Exception):
    """An error with a stable `kind` (an `ErrorKind`); raised by the client APIs and the
    embedded tree."""

    def __init__(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = str(kind)  # a plain str, as when it arrives from the wire
        self.message = message
        self.details = details

    def to_value(self) -> ErrorValue:
        return ErrorValue(kind=self.kind, message=self.message, details=self.details)

    @classmethod
    def from_value(cls, value: ErrorValue) -> PhloemError:
        return cls(value.kind, value.message, value.details)

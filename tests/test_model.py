"""The model preflight and the prompt-length check: folders checked as data (config, weights,
auto_map) without running their code, typos kept from the hub, hub ids never contacted, and
prompts rendered as training renders them against the model's positions.

The file-level checks run everywhere; the tokenizer and length checks need transformers (and
torch, to build the tiny model) and are skipped where they are not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aworld_train.errors import AgentError, ModelError
from aworld_train.model import (
    check_lengths,
    check_weights,
    load_tokenizer,
    max_positions,
    preflight_model,
)
from aworld_train.model import _files as model_files
from aworld_train.model import _folder as model_folder
from aworld_train.model import _lengths as model_lengths
from aworld_train.model import _lora as model_lora
from aworld_train.model import _tokenizer as model_tokenizer
from aworld_train.model import _weights as model_weights

# --- folders written by hand: the file-level checks ------------------------------------------


def write_safetensors(path: Path, tensors: int = 1) -> None:
    """A valid safetensors file: an 8-byte header length, a JSON header, then the data."""
    header = {
        f"w{i}": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
        for i in range(tensors)
    }
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"\0" * 4 * tensors)


def write_folder(folder: Path, config: Any = None) -> Path:
    """A model folder that passes the file-level checks: a config, one weights file and a
    tokenizer file."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "qwen2", "max_position_embeddings": 64} if config is None else config
    (folder / "config.json").write_text(json.dumps(config))
    write_safetensors(folder / "model.safetensors")
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.fixture
def files_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks as in an environment without transformers: files only, no tokenizer."""
    for module in (model_files, model_folder, model_lengths, model_lora, model_weights):
        monkeypatch.setattr(module, "transformers_available", lambda: False)


def refusal(model: str | Path, base_dir: Path | None = None, trust: bool = False) -> str:
    with pytest.raises(ModelError) as error:
        preflight_model(model, base_dir, trust)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_model_error_is_an_agent_error() -> None:
    assert issubclass(ModelError, AgentError)


def test_no_model_stays_none() -> None:
    assert preflight_model(None) is None
    assert preflight_model("") is None
    assert refusal(7) == "model must be a local folder or a hub id 'organisation/name', not int 7"


def test_a_folder_is_found_beside_the_job_then_in_the_current_folder_and_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files_only: None
) -> None:
    job, elsewhere = tmp_path / "job", tmp_path / "elsewhere"
    beside = write_folder(job / "build" / "model")
    in_cwd = write_folder(elsewhere / "weights")
    monkeypatch.chdir(elsewhere)
    assert preflight_model("build/model", job) == str(beside)
    assert preflight_model("./build/model", job) == str(beside)
    assert preflight_model("weights", job) == str(in_cwd)
    assert preflight_model(in_cwd) == str(in_cwd)  # a Path, absolute


def test_a_typo_of_a_local_folder_is_never_taken_for_a_hub_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_folder(tmp_path / "build" / "model")
    monkeypatch.chdir(tmp_path)
    assert refusal("build/modle", tmp_path) == (
        f"model folder build/modle not found in {tmp_path} (did you mean build/model?)"
    )
    assert refusal("biuld/model", tmp_path).endswith("(did you mean build/model?)")
    assert refusal("./build/mdl", tmp_path).endswith("(did you mean build/model?)")
    # One name, a close typo of a folder there: not a hub id either.
    (tmp_path / "model").mkdir()
    assert refusal("modle", tmp_path) == (
        f"model folder modle not found in {tmp_path} (did you mean model?) "
        "(a hub id is written 'organisation/name')"
    )
    # Paths by their form: nothing close to suggest, so the fix is said instead.
    for path in ("./weights", "runs/a/model", "~/no-such-model-folder-here"):
        message = refusal(path, tmp_path)
        assert message.startswith(f"model folder {path} not found")
        assert message.endswith(
            "point `model` at a folder written by save_pretrained, or at a "
            "hub id 'organisation/name'"
        )
    assert refusal(tmp_path / "gone").startswith(f"model folder {tmp_path / 'gone'} not found")


def test_a_hub_id_is_returned_as_given_and_nothing_is_contacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the preflight opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "meta-llama-runs" / "run1").mkdir(parents=True)  # an organisation's look-alike
    for hub_id in (
        "Qwen/Qwen2.5-0.5B-Instruct",
        "gpt2",
        "HuggingFaceTB/SmolLM2-135M",
        "meta-llama/Llama-3.2-1B",
    ):
        assert preflight_model(hub_id, tmp_path) == hub_id
    assert refusal("Qwen Qwen", tmp_path) == (
        "model 'Qwen Qwen' is neither a local folder nor a hub id 'organisation/name': point "
        "`model` at a folder written by save_pretrained, or at a hub id 'organisation/name'"
    )


def test_a_file_is_not_a_model_folder(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert refusal("model.safetensors", tmp_path).startswith("model model.safetensors is a file (")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (None, "has no config.json: point `model` at a folder written by save_pretrained"),
        ('{"model_type": "qwen2",', "config.json: invalid JSON: Expecting property name"),
        ("[1, 2]", "config.json holds a JSON list, not an object"),
        (
            '{"hidden_size": 64}',
            "config.json has no model_type, so transformers cannot tell which model it is",
        ),
    ],
)
def test_a_broken_config_json_is_named(tmp_path: Path, config: str | None, expected: str) -> None:
    folder = write_folder(tmp_path / "model")
    if config is None:
        (folder / "config.json").unlink()
    else:
        (folder / "config.json").write_text(config)
    message = refusal(folder)
    assert str(folder) in message and expected in message


def test_weights_must_be_there_whole(tmp_path: Path, files_only: None) -> None:
    folder = write_folder(tmp_path / "model")
    (folder / "model.safetensors").unlink()
    (folder / "adapter_model.safetensors").write_bytes(b"")  # not what from_pretrained loads
    assert refusal(folder) == (
        f"model folder {folder} has no weights (model.safetensors, pytorch_model.bin, or a "
        "*.index.json and its shards): write the folder again with save_pretrained, or "
        "download it again"
    )
    # A clone without Git LFS holds pointers where the weights should be.
    (folder / "model.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 1000\n"
    )
    assert refusal(folder).endswith(
        "model.safetensors is a Git LFS pointer, not the weights: run `git lfs pull` in the folder"
    )
    write_safetensors(folder / "model.safetensors", tensors=3)
    whole = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(whole[:-5])
    assert f"model.safetensors is truncated ({len(whole) - 5:,} of {len(whole):,} bytes)" in (
        refusal(folder)
    )
    (folder / "model.safetensors").write_bytes(whole)
    assert preflight_model(folder) == str(folder)


def test_sharded_weights_need_every_shard(tmp_path: Path, files_only: None) -> None:
    folder = write_folder(tmp_path / "model")
    (folder / "model.safetensors").unlink()
    shards = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    index = {"metadata": {}, "weight_map": {f"layer{i}": shard for i, shard in enumerate(shards)}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    write_safetensors(folder / shards[0])
    assert refusal(folder) == (
        f"model {folder}: model.safetensors.index.json names 3 weight files, 2 missing "
        f"({shards[1]}, {shards[2]}): finish the download"
    )
    for shard in shards[1:]:
        write_safetensors(folder / shard)
    assert preflight_model(folder) == str(folder)


EVIL = """\
from pathlib import Path

Path({marker!r}).write_text("the model folder's code ran")


class EvilConfig:
    model_type = "evil"
"""


def evil_folder(tmp_path: Path, where: str = "config.json") -> tuple[Path, Path]:
    """A model folder whose auto_map (in ``where``) points at its own module, which writes a
    marker file when imported; and the marker's path."""
    folder = write_folder(tmp_path / "evil")
    marker = tmp_path / "MARKER"
    (folder / "configuration_evil.py").write_text(EVIL.format(marker=str(marker)))
    auto_map = {"AutoConfig": "configuration_evil.EvilConfig"}
    if where == "tokenizer_config.json":
        auto_map = {"AutoTokenizer": ["configuration_evil.EvilConfig", None]}
    data = json.loads((folder / where).read_text()) if (folder / where).exists() else {}
    (folder / where).write_text(json.dumps({**data, "auto_map": auto_map}))
    return folder, marker


@pytest.mark.parametrize("where", ["config.json", "tokenizer_config.json"])
def test_a_folder_that_brings_its_own_code_is_refused_and_its_code_never_runs(
    tmp_path: Path, where: str
) -> None:
    folder, marker = evil_folder(tmp_path, where)
    assert refusal(folder) == (
        f"model {folder} needs code from its own folder (auto_map in {where}); aworld-train does "
        "not run it unless you set config trust_remote_code: true"
    )
    assert not marker.exists()


def test_trust_remote_code_lifts_the_refusal_for_code_the_folder_has(
    tmp_path: Path, files_only: None
) -> None:
    folder, marker = evil_folder(tmp_path)
    assert preflight_model(folder, trust_remote_code=True) == str(folder)
    assert not marker.exists()  # the preflight itself imports nothing from the folder
    (folder / "configuration_evil.py").unlink()
    assert refusal(folder, trust=True).startswith(
        f"model {folder}: auto_map in config.json names configuration_evil.py, which the folder "
        "lacks"
    )


def test_max_positions_reads_the_families_keys(tmp_path: Path) -> None:
    assert max_positions(write_folder(tmp_path / "a")) == (64, "max_position_embeddings")
    gpt2 = write_folder(tmp_path / "b", {"model_type": "gpt2", "n_positions": 1024})
    assert max_positions(gpt2) == (1024, "n_positions")
    vlm = write_folder(
        tmp_path / "c", {"model_type": "llava", "text_config": {"max_position_embeddings": 4096}}
    )
    assert max_positions(vlm) == (4096, "text_config.max_position_embeddings")
    assert max_positions(write_folder(tmp_path / "d", {"model_type": "x"})) is None


# --- a real tiny model: tokenizer and lengths (transformers and torch) ------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from aworld_train.testing import build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("tiny") / "model", extra_tokens=("<answer>",), max_positions=128
    )


@pytest.fixture
def tiny(tiny_model: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the tiny model of this test's own (128 positions), to change freely."""
    folder = Path(shutil.copytree(tiny_model, tmp_path / "model"))
    yield folder
    model_tokenizer._cached_tokenizer.cache_clear()


def set_positions(folder: Path, positions: int) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps({**config, "max_position_embeddings": positions})
    )


# Renders tools as the calculator example's template does: their schemas enter the prompt.
TOOLS_TEMPLATE = (
    "{% if tools %}{{ '<|im_start|>system\\n' }}{% for tool in tools %}{{ tool | tojson }}"
    "{% endfor %}{{ '<|im_end|>\\n' }}{% endif %}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add a and b.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


def rows(*prompts: Any) -> Any:
    import datasets

    return datasets.Dataset.from_list([{"prompt": p, "ground_truth": "1"} for p in prompts])


def rendered(folder: Path, messages: list[dict[str, str]], tools: Any = None) -> int:
    tokenizer = load_tokenizer(str(folder))
    return len(
        tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
    )


def too_long(folder: Path, datasets: dict[str, Any], **kwargs: Any) -> str:
    arguments = {"system_prompt": None, "tool_schemas": [], "max_completion_length": 16, **kwargs}
    with pytest.raises(ModelError) as error:
        check_lengths(str(folder), datasets, **arguments)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_a_real_model_passes_and_its_tokenizer_is_loaded_once(tiny: Path) -> None:
    assert preflight_model(tiny) == str(tiny)
    assert load_tokenizer(str(tiny)) is load_tokenizer(str(tiny), False)


def test_a_tokenizer_that_does_not_load_is_one_line(tiny: Path) -> None:
    (tiny / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "Nonsense"}}')
    assert refusal(tiny).startswith(f"model {tiny}: its tokenizer does not load offline: ")


def test_a_model_type_transformers_does_not_know_is_named(tiny: Path) -> None:
    config = json.loads((tiny / "config.json").read_text())
    (tiny / "config.json").write_text(json.dumps({**config, "model_type": "qwen9"}))
    assert "config.json has model_type 'qwen9', which transformers " in refusal(tiny)


def test_the_longest_prompt_with_its_completion_past_the_positions_names_the_row(
    tiny: Path,
) -> None:
    system = "Answer with the number."
    empty = rendered(tiny, [{"role": "system", "content": system}, {"role": "user", "content": ""}])
    long_row = "1 + " * ((120 - empty) // 4)  # one token per byte: 120 tokens or a little less
    data = rows("What is 1 + 1?", "What is 2 + 2?", long_row, "Hi")
    tokens = rendered(
        tiny, [{"role": "system", "content": system}, {"role": "user", "content": long_row}]
    )
    assert tokens + 16 > 128 >= tokens  # the completion is what tips it over
    assert too_long(tiny, {"train_dataset": data}, system_prompt=system) == (
        f"train_dataset row 2: the prompt (system prompt, chat template) is {tokens} tokens; "
        f"with max_completion_length 16 that is {tokens + 16}, past the model's 128 positions "
        f"(max_position_embeddings in {tiny}/config.json): shorten the prompt or "
        "max_completion_length"
    )
    # The same rows fit with a smaller completion, or without the system prompt.
    check_lengths(str(tiny), {"train_dataset": data}, system, [], 128 - tokens)
    check_lengths(str(tiny), {"train_dataset": data}, None, [], 16)


def test_tool_schemas_count_and_tool_results_share_the_completion(tiny: Path) -> None:
    (tiny / "chat_template.jinja").write_text(TOOLS_TEMPLATE)
    set_positions(tiny, 256)
    prompt = "What is 12 * 34?"
    alone = rendered(tiny, [{"role": "user", "content": prompt}])
    with_tools = rendered(tiny, [{"role": "user", "content": prompt}], TOOLS)
    budget = 256 - rendered(tiny, [{"role": "user", "content": "Hi"}], TOOLS)  # "Hi" fits
    data = {"train_dataset": rows("Hi"), "test_dataset": rows("Hello", prompt)}
    assert alone + budget <= 256 < with_tools + budget
    check_lengths(str(tiny), data, None, [], budget)  # without the schemas, every row fits
    assert too_long(tiny, data, tool_schemas=TOOLS, max_completion_length=budget, max_turns=3) == (
        f"test_dataset row 1: the prompt (1 tool schema, chat template) is {with_tools} tokens; "
        f"with max_completion_length {budget} for every turn and tool result that is "
        f"{with_tools + budget}, past the model's 256 positions (max_position_embeddings in "
        f"{tiny}/config.json): shorten the prompt or max_completion_length"
    )


def test_the_row_longest_in_tokens_is_found_not_the_longest_in_bytes(tiny: Path) -> None:
    # "<answer>" is one token of eight bytes: the row with the most bytes is short in tokens.
    data = rows("<answer>" * 40, "x" * 100, "<answer>" * 39)
    message = too_long(tiny, {"train_dataset": data}, max_completion_length=20)
    assert message.startswith("train_dataset row 1: the prompt (chat template) is ")


def test_chat_message_prompts_keep_their_own_system_message(tiny: Path) -> None:
    own = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "y" * 60}]
    tokens = rendered(tiny, own)
    data = rows([{"role": "user", "content": "Hi"}], own)
    message = too_long(
        tiny,
        {"train_dataset": data},
        system_prompt="s" * 40,
        max_completion_length=128 - tokens + 1,
    )
    assert message.startswith(
        f"train_dataset row 1: the prompt (system prompt, chat template) is {tokens} tokens"
    )


def test_only_the_rows_in_doubt_are_rendered(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rendered_rows = []
    count = model_lengths._Renderer.count

    def counting(self: Any, prompt: Any) -> int:
        rendered_rows.append(prompt)
        return count(self, prompt)

    monkeypatch.setattr(model_lengths._Renderer, "count", counting)
    prompts = [f"What is {i} + {i}?" for i in range(3000)]
    check_lengths(str(tiny), {"train_dataset": rows(*prompts)}, None, [], 64)
    assert len(rendered_rows) <= 2  # the framing, measured once; no row was in doubt
    prompts[1234] = "z" * 120
    rendered_rows.clear()
    assert too_long(tiny, {"train_dataset": rows(*prompts)}, max_completion_length=64).startswith(
        "train_dataset row 1234: "
    )
    assert len(rendered_rows) <= 3


def test_a_plain_text_tokenizer_gets_the_prompt_as_text(tiny: Path) -> None:
    (tiny / "chat_template.jinja").unlink()
    data = rows("q" * 100)
    tokens = len("Be brief.\n\n" + "q" * 100)  # one token per byte, no template
    assert too_long(
        tiny, {"train_dataset": data}, system_prompt="Be brief.", max_completion_length=20
    ).startswith(f"train_dataset row 0: the prompt (system prompt, plain text) is {tokens} tokens")


def test_a_completion_as_long_as_the_model_leaves_no_room(tiny: Path) -> None:
    assert too_long(tiny, {"train_dataset": rows("Hi")}, max_completion_length=128) == (
        f"max_completion_length 128 leaves no room for a prompt within the model's 128 "
        f"positions (max_position_embeddings in {tiny}/config.json): lower max_completion_length"
    )


def test_hub_ids_and_missing_datasets_are_not_checked(tiny: Path) -> None:
    check_lengths("Qwen/Qwen2.5-0.5B", {"train_dataset": rows("x" * 10_000)}, None, [], 10**6)
    check_lengths(str(tiny), {"train_dataset": rows("Hi"), "test_dataset": None}, None, [], None)


def test_a_chat_template_that_fails_is_one_line_naming_the_row(tiny: Path) -> None:
    (tiny / "chat_template.jinja").write_text(
        "{% for m in messages %}{% if 'boom' in m['content'] %}"
        "{{ raise_exception('roles must alternate') }}{% endif %}{{ m['content'] }}{% endfor %}"
    )
    data = rows("a" * 200, "boom" + "b" * 200)
    with pytest.raises(
        ModelError,
        match=r"^train_dataset row 1: the prompt cannot be rendered "
        r"with the chat template of .*: roles must alternate$",
    ):
        check_lengths(str(tiny), {"train_dataset": data}, None, [], 10)


def test_a_folder_without_a_tokenizer_is_refused(tmp_path: Path, files_only: None) -> None:
    # transformers 5 would build an empty tokenizer from model_type and load it silently.
    folder = write_folder(tmp_path / "model")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(
        ModelError, match=r"model folder .*/model has no tokenizer \(tokenizer.json"
    ):
        preflight_model(str(folder))


# --- LoRA's target_modules against the model's modules (torch and transformers) ---------------


def test_lora_target_modules_that_match_no_module_are_named_with_valid_ones(tiny: Path) -> None:
    from aworld_train.errors import ConfigError
    from aworld_train.model import check_lora_targets

    with pytest.raises(ConfigError) as raised:
        check_lora_targets(tiny, ("q_proj", "nonexistent_module"))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "config lora.target_modules: nonexistent_module matches no module "
        f"of the model {tiny}; its linear layers include "
    )
    assert "q_proj" in message.split("include")[1] and "lm_head" not in message


def test_lora_target_modules_match_as_peft_matches_them(tiny: Path) -> None:
    from aworld_train.errors import ConfigError
    from aworld_train.model import check_lora_targets

    assert check_lora_targets(tiny, "all-linear") is None
    assert check_lora_targets(tiny, ("q_proj", "v_proj")) is None
    assert check_lora_targets(tiny, ("self_attn.q_proj", "mlp.down_proj")) is None, "a suffix"
    assert check_lora_targets(tiny, r".*\.(q|v)_proj") is None, "one string is a regex"
    with pytest.raises(ConfigError, match=r"lora.target_modules: proj matches no module"):
        check_lora_targets(tiny, ("proj",))  # a part of a name is not a name
    with pytest.raises(ConfigError, match=r"lora.target_modules: q_proj matches no module"):
        check_lora_targets(tiny, "q_proj")  # one string must match a whole module name


def test_check_refuses_lora_target_modules_the_model_lacks_in_one_line(
    tiny: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    (tmp_path / "train.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) + "\n" for d in range(4)
        )
    )
    job = {
        "agent": {"name": "a"},
        "train_dataset": "train.jsonl",
        "reward": "exact_match",
        "config": {
            "model": str(tiny),
            "max_steps": 1,
            "batch_size": 2,
            "num_generations": 2,
            "max_completion_length": 16,
        },
    }
    (tmp_path / "job.yaml").write_text(json.dumps(job))
    command = [
        str(Path(sys.executable).with_name("aworld-train")),
        "check",
        str(tmp_path / "job.yaml"),
        "--engine",
        "trl",
    ]
    bad = "lora={rank: 8, target_modules: [nonexistent_module]}"
    result = subprocess.run([*command, "-o", bad], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith(
        "error: config lora.target_modules: nonexistent_module matches no module of the model"
    ), result.stderr
    assert "Traceback" not in result.stderr
    passed = subprocess.run(
        [*command, "-o", "lora={rank: 8, target_modules: [q_proj]}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "lora.target_modules name modules of the model" in passed.stdout


# --- the folder consistent with itself: weights, vocabulary, tokens ---------------------------


def edit_json(folder: Path, name: str, **changes: Any) -> None:
    """Change keys of a JSON file of the folder; a ``None`` value removes the key."""
    data = json.loads((folder / name).read_text())
    data.update(changes)
    (folder / name).write_text(json.dumps({k: v for k, v in data.items() if v is not None}))


def weights_refusal(folder: Path) -> str:
    with pytest.raises(ModelError) as error:
        check_weights(folder)
    message = str(error.value)
    assert "\n" not in message and message.startswith(
        f"model {folder}: its weights do not match the Qwen2ForCausalLM that config.json"
    )
    return message


def test_weights_that_match_the_config_pass_tied_embeddings_and_buffers_included(
    tiny: Path,
) -> None:
    # The tiny model ties lm_head.weight to the embeddings (stored once) and has rotary buffers.
    assert check_weights(tiny) == (
        "26 tensors in model.safetensors match the Qwen2ForCausalLM of config.json"
    )


def test_weights_of_another_shape_are_named_with_their_file_and_both_shapes(tiny: Path) -> None:
    edit_json(tiny, "config.json", intermediate_size=192)
    message = weights_refusal(tiny)
    assert (
        "tensors 6 of another shape (model.layers.0.mlp.down_proj.weight is [64, 128] in "
        "model.safetensors, [64, 192] by config.json; "
    ) in message
    assert "; 3 more): fix config.json, or write the folder again with save_pretrained" in message


def test_missing_and_unexpected_tensors_are_named(tiny: Path, tmp_path: Path) -> None:
    fewer = Path(shutil.copytree(tiny, tmp_path / "fewer"))
    edit_json(tiny, "config.json", num_hidden_layers=3, layer_types=["full_attention"] * 3)
    assert "tensors 12 missing (model.layers.2." in weights_refusal(tiny)
    edit_json(fewer, "config.json", num_hidden_layers=1, layer_types=["full_attention"])
    assert "tensors 12 unexpected (model.layers.1." in weights_refusal(fewer)


def test_an_untied_output_head_the_weights_lack_is_missing(tiny: Path) -> None:
    edit_json(tiny, "config.json", tie_word_embeddings=False)
    assert "tensors 1 missing (lm_head.weight)" in weights_refusal(tiny)


def test_sharded_weights_are_read_from_every_shard(tiny: Path, tmp_path: Path) -> None:
    import transformers

    sharded = tmp_path / "sharded"
    transformers.AutoModelForCausalLM.from_pretrained(tiny).save_pretrained(
        sharded, max_shard_size="20KB"
    )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny / name, sharded / name)
    assert not (sharded / "model.safetensors").exists()
    assert re.fullmatch(
        r"26 tensors in \d+ safetensors shards match the Qwen2ForCausalLM of "
        r"config.json",
        check_weights(sharded),
    )
    edit_json(sharded, "config.json", intermediate_size=192)
    assert re.search(
        r"mlp\.down_proj\.weight is \[64, 128\] in model-000\d\d-of-000\d\d"
        r"\.safetensors",
        weights_refusal(sharded),
    )


def test_converted_checkpoints_match_by_transformers_loading_names(tmp_path: Path) -> None:
    """A mixture of experts stored one expert per tensor, which transformers 5 fuses on load."""
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen3MoeConfig(
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        vocab_size=300,
    )
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "moe")
    assert "match the Qwen3MoeForCausalLM of config.json" in check_weights(tmp_path / "moe")


def test_pickled_weights_are_not_compared_and_never_unpickled(tiny: Path) -> None:
    import pickle

    class Planted:
        def __reduce__(self) -> tuple[Any, ...]:
            return (Path(tiny / "UNPICKLED").write_text, ("unpickled",))

    (tiny / "model.safetensors").unlink()
    (tiny / "pytorch_model.bin").write_bytes(pickle.dumps(Planted()))
    assert check_weights(tiny) == (
        "not compared: the weights are pytorch_model.bin, whose "
        "tensors are not listed without unpickling them"
    )
    assert not (tiny / "UNPICKLED").exists()


def test_quantized_weights_and_folders_with_their_own_code_are_not_compared(tiny: Path) -> None:
    edit_json(tiny, "config.json", quantization_config={"quant_method": "gptq", "bits": 4})
    assert check_weights(tiny).startswith("not compared: the weights are quantized")
    edit_json(
        tiny,
        "config.json",
        quantization_config=None,
        auto_map={"AutoConfig": "configuration_x.XConfig"},
    )
    assert check_weights(tiny).startswith("not compared: the model is built by code from its")


def test_special_token_ids_past_vocab_size_are_named_before_the_tokenizer_loads(
    tiny: Path,
) -> None:
    edit_json(tiny, "config.json", vocab_size=200)
    assert refusal(tiny) == (
        f"model {tiny}: config.json vocab_size 200 leaves no row in the embeddings for "
        "config.json pad_token_id 256, config.json eos_token_id 258, config.json bos_token_id "
        "258 and 3 more: set vocab_size to the embeddings' rows (at least 259), or resize them "
        "(model.resize_token_embeddings(len(tokenizer))) and save the model again"
    )


def test_a_tokenizer_larger_than_vocab_size_names_the_tokens_past_it(tiny: Path) -> None:
    # The ids config.json names fit; the tokenizer's last tokens do not.
    edit_json(
        tiny, "config.json", vocab_size=257, pad_token_id=None, eos_token_id=None, bos_token_id=None
    )
    (tiny / "generation_config.json").unlink()
    message = refusal(tiny)
    assert message.startswith(
        f"model {tiny}: config.json vocab_size 257 is smaller than its "
        "tokenizer (260 token ids): these have no row in the embeddings: "
        "<|im_start|> 257, <|im_end|> 258, <answer> 259: set vocab_size "
        "to the embeddings' rows, at least 260"
    ), message


@pytest.mark.parametrize(
    "removed, remains",
    [
        (("eos_token", "pad_token"), " (nor a pad token)"),
        (("eos_token",), ""),
    ],
)
def test_a_tokenizer_without_an_eos_token_is_refused(
    tiny: Path, removed: tuple[str, ...], remains: str
) -> None:
    edit_json(
        tiny,
        "config.json",
        eos_token_id=None,
        bos_token_id=None,
        **({"pad_token_id": None} if "pad_token" in removed else {}),
    )
    (tiny / "generation_config.json").unlink()
    # Left out, tokenizer_config.json's tokens get the tokenizer class's defaults: set to null.
    config = json.loads((tiny / "tokenizer_config.json").read_text())
    (tiny / "tokenizer_config.json").write_text(json.dumps({**config, **dict.fromkeys(removed)}))
    assert refusal(tiny) == (
        f"model {tiny}: its tokenizer has no eos token{remains}, which the engines stop "
        "generation at, end SFT completions with and pad with when there is no pad token: set "
        f"eos_token in {tiny / 'tokenizer_config.json'} to the token that ends the model's turn"
    )


def test_a_tokenizer_with_eos_and_no_pad_token_passes(tiny: Path) -> None:
    """The engines pad with the eos token when there is no pad token."""
    edit_json(tiny, "config.json", pad_token_id=None)
    config = json.loads((tiny / "tokenizer_config.json").read_text())
    (tiny / "tokenizer_config.json").write_text(json.dumps({**config, "pad_token": None}))
    assert preflight_model(tiny) == str(tiny)
    assert load_tokenizer(tiny).pad_token is None

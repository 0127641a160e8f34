# minialbert: `make figures` (main job), `make test` (all tests), `make lab` (JupyterLab).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
NOTEBOOKS = notebooks

.PHONY: install test test-fast notebooks clean-notebooks student-notebooks chromium zoo figures lab lint clean \
        gpu-check

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]' -c constraints.txt
	touch $@

# Everything: unit, parity, property, process and browser tests, then every lesson at ci scale.
test: $(STAMP) chromium
	$(PY) -m ruff check minialbert tests benchmarks
	MINIALBERT_SCALE=ci $(PY) -m pytest -q -n 2 --dist loadfile --durations=15 tests
	MINIALBERT_SCALE=ci $(PY) -m pytest -q --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg \
	  $(NOTEBOOKS)/*.ipynb

# The browser test (tests/test_browser.py) drives Debian's chromium; install it when missing and we
# may (root or passwordless sudo). If it cannot be had, that test fails and says how to install it.
chromium:
	@test -x /usr/bin/chromium || { command -v apt-get >/dev/null && \
	  $(if $(filter 0,$(shell id -u)),,sudo -n) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo -n) apt-get install -y -qq chromium \
	  >/dev/null; } || echo "could not install chromium: run \`sudo apt-get install chromium\`"

test-fast: $(STAMP)
	MINIALBERT_SCALE=ci $(PY) -m pytest -q -x tests

# Re-run every lesson at course scale (Restart & Run All) so committed outputs are real.
notebooks: $(STAMP)
	for nb in $(NOTEBOOKS)/*.ipynb; do \
	  MINIALBERT_SCALE=$${MINIALBERT_SCALE:-course} $(PY) -m jupyter nbconvert --to notebook --execute \
	    --inplace --ExecutePreprocessor.timeout=1800 $$nb || exit 1; done
	$(MAKE) clean-notebooks student-notebooks

# Strip execution timestamps, machine details, widget state and progress bars; outputs stay.
clean-notebooks: $(STAMP)
	$(PY) -m minialbert clean-notebooks

# The student versions (solutions replaced by stubs) in $(NOTEBOOKS)/student, from the lessons.
student-notebooks: $(STAMP)
	$(PY) -m minialbert student-notebooks --source $(NOTEBOOKS) --out $(NOTEBOOKS)/student

# Retrain every zoo entry from scratch at $MINIALBERT_SCALE (default: course; hours on 2 cores), each
# compared byte for byte with the shipped one. `python -m minialbert zoo` builds only what is missing.
zoo: $(STAMP)
	$(PY) -m minialbert zoo --rebuild all

# Regenerate the course figures (assets/figures) at $MINIALBERT_SCALE (default: course): one function per
# figure (minialbert.course.figures.FIGURES), from the code, the course corpus and the shipped zoo (no zoo entry is
# trained, no notebook runs); learning_curve, nsp_vs_sop and model_speed are redrawn from their committed JSON.
# `python -m minialbert figures --only NAME --out DIR` makes one (docs/figures.md).
figures: $(STAMP)
	$(PY) -m minialbert figures

# On a machine with a CUDA GPU (without one: refuse in one line), about 6 minutes of an H200 (measured: kernel
# tests 104 s, attention 75 s, the budgeted run 172 s): the kernel tests compiled on the GPU (both versions,
# bfloat16 and ALBERT-sized shapes); benchmarks/attention.py at ALBERT's lengths, both kernel versions against
# SDPA, timed plainly and as CUDA graphs, to assets/benchmarks/attention_<gpu>.json and its figure; then
# benchmarks/gpu_check.py: the gpu-scale albert-sop trained for MINUTES (default 2.5), its held-out evaluation
# beside the baselines and its smoothness figure, to assets/benchmarks/gpu_check_<gpu>.json and
# assets/figures/gpu_check_<gpu>_layer_transitions.png. Without network, PACK=FILE (made by
# `python -m minialbert pack --out FILE` where the course corpus is built) is unpacked into the cache first,
# and PY=python3 runs from the working tree with that Python's own packages (no venv, no install).
# Without a GPU, the gpu scale's code paths run shortened: `pytest -k gpu_dry_run` (docs/scales.md).
GPU_CHECK_ATTENTION = --dtypes bfloat16 --head-configs 12x64 --seq-lens 256 512 1024 4096 \
                      --providers ours sdpa-flash sdpa-cudnn --paddings none padded
gpu-check: export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
gpu-check: $(if $(filter $(VENV)/bin/python,$(PY)),$(STAMP))
	@$(PY) benchmarks/attention.py --check-gpu
	$(if $(PACK),$(PY) -m minialbert unpack $(PACK),@:)
	$(PY) -m pytest -q -p no:cacheprovider tests/test_kernels.py -k "not compile and not benchmark"
	$(PY) benchmarks/attention.py $(GPU_CHECK_ATTENTION)
	$(PY) benchmarks/gpu_check.py $(if $(MINUTES),--minutes $(MINUTES))

lab: $(STAMP)
	$(PY) -m jupyter lab $(NOTEBOOKS)

lint: $(STAMP)
	$(PY) -m ruff check minialbert tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-artifacts

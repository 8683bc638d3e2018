# perf/gpu-check.sh puts this folder on PYTHONPATH: every Python process of the check records its peak CUDA memory
# (torch's allocator) and wall time at exit to $GPUCHECK_PEAKS, one JSON line each; nothing without CUDA.
import atexit
import json
import os
import sys
import time

_t0 = time.time()


def _record():
    path = os.environ.get("GPUCHECK_PEAKS")
    torch = sys.modules.get("torch")
    if not path or torch is None:
        return
    try:
        if not torch.cuda.is_initialized():
            return
        row = {"argv": " ".join(sys.argv)[:400], "pid": os.getpid(), "wall_s": round(time.time() - _t0, 1),
               "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
               "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
    except Exception as e:  # never break the job
        print(f"gpucheck sitecustomize: {e}", file=sys.stderr)


atexit.register(_record)

"""The program Nsight Compute profiles in a profile's `ncu` detail pass (a script, copied next to the
candidate and run by path: it imports nothing of this package).

    python ncu_target.py REFERENCE_DIR CANDIDATE_DIR SEED

Builds inputs with the reference's `get_inputs` on the GPU, loads `ModelNew`, calls it once to warm up,
then once between cudaProfilerStart and cudaProfilerStop, which is all `ncu --profile-from-start off`
measures. Diagnostics only: it runs the candidate's code, so nothing it does reaches a verdict.
"""

import importlib
import sys

import torch


def main() -> None:
    reference_dir, candidate_dir, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.manual_seed(seed)
    sys.path.insert(0, reference_dir)
    reference = importlib.import_module("model")
    init_args = reference.get_init_inputs()
    with torch.device("cuda"):
        inputs = reference.get_inputs()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs]
    sys.path.remove(reference_dir)
    sys.path.insert(0, candidate_dir)
    model = importlib.import_module("model_new").ModelNew(*init_args).cuda().eval()
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()

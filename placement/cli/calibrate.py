"""`gpuplan calibrate`: measure this host's `cuda_context` on one card, as a vLLM worker would see it.

Needs NVML and PyTorch with CUDA; exits 3 saying which is missing.
"""

from __future__ import annotations

import argparse
import json

HELP = "measure cuda_context on a card (needs PyTorch and a GPU)"
DESCRIPTION = (
    "Start fresh CUDA processes on one card that do what a vLLM worker does before its "
    "start-up gate (CUDA context, NCCL all-reduce, cuBLAS warm-up, empty_cache), and print "
    "the bytes they take as a `cuda_context:` line for the catalogue. Run it on an idle card."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--gpu N, --runs N, --json."""
    parser.add_argument(
        "--gpu", type=int, default=0, metavar="N", help="NVML index of the card (default 0)"
    )
    parser.add_argument(
        "--runs", type=int, default=3, metavar="N", help="fresh processes to measure (default 3)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON with raw bytes")


def run(args: argparse.Namespace) -> int:
    """Measure and print; exit 0, 2 for bad options, 3 without torch or NVML."""
    from inventory.calibrate import STAGES, measure, render
    from seats.errors import BadInputError

    if args.runs < 1 or args.gpu < 0:
        raise BadInputError("--runs must be at least 1 and --gpu a card index (0 or more)")
    calibration = measure(args.gpu, args.runs)
    if args.json:
        print(
            json.dumps(
                {
                    "schema": 1,
                    "gpu": calibration.gpu,
                    "uuid": calibration.uuid,
                    "name": calibration.name,
                    "nvml_total_bytes": calibration.nvml_total_bytes,
                    "nvml_reserved_bytes": calibration.nvml_reserved_bytes,
                    "runs": [
                        {
                            "nvml_free_before_bytes": r.nvml_free_before_bytes,
                            "cuda_total_bytes": r.cuda_total_bytes,
                            "taken_bytes": {s: r.taken_bytes(s) for s in STAGES},
                        }
                        for r in calibration.runs
                    ],
                    "cuda_context_bytes": calibration.cuda_context_bytes(),
                    "other_processes": calibration.other_processes,
                },
                indent=2,
            )
        )
    else:
        print(render(calibration))
    return 0

#!/usr/bin/env python3
"""Generates Switchyard's test models, deterministically from a seed.

  .venv/bin/python tools/gen_models.py --out models --seed 0 --only tiny
  .venv/bin/python tools/gen_models.py --out models --seed 0 --only bench-135m
  .venv/bin/python tools/gen_models.py --out /tmp/q --only tiny --types Q4_0,Q4_K_M

tiny writes <out>/tiny-{llama3,qwen2,qwen3,qwen3-moe,mistral,mistral-swa,gemma3}/ (bundled in
git); tiny-256 writes <out>/tiny-llama3-256/ (not bundled); bench-135m and bench-1b write
<out>/bench/bench-135m/ and <out>/bench/bench-1b/ (gitignored). With --types, each model folder
gets its JSON files and one model-<type>.gguf per listed type instead of its safetensors and
default GGUFs. See tools/README.md.
"""

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from switchyard_models import families, gguf_export, quant_types, weights  # noqa: E402


def _write_json(path: pathlib.Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")


def write_model(plan: families.ModelPlan, out_dir: pathlib.Path, seed: int,
                types: list[str] | None = None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / "config.json", plan.config)
    _write_json(out_dir / "generation_config.json", plan.generation_config)
    _write_json(out_dir / "tokenizer_config.json", plan.tokenizer_config)
    (out_dir / "tokenizer.json").write_text(plan.tokenizer_json, encoding="utf-8")
    if types:
        gguf_types = {f"model-{t.lower()}.gguf": t for t in types}
    else:
        specs = weights.tensor_specs(plan.config)
        weights.write_safetensors(out_dir / "model.safetensors", specs, seed,
                                  plan.safetensors_dtype)
        gguf_types = plan.gguf_types
    for file_name, file_type in gguf_types.items():
        gguf_export.write_gguf(out_dir / file_name, plan.name, plan.config, plan.tokenizer_json,
                               plan.tokenizer_config, plan.gguf_pre, seed, file_type,
                               bf16_values=plan.safetensors_dtype == "BF16")
    print(f"wrote {out_dir}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="models", help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="tiny",
                        choices=["tiny", "tiny-256", "bench-135m", "bench-1b", "all"])
    parser.add_argument("--types", type=lambda s: s.split(","),
                        help="comma-separated GGUF file types to write instead of the defaults: "
                        + ", ".join(quant_types.FILE_TYPES))
    args = parser.parse_args()
    for t in args.types or []:
        if t not in quant_types.FILE_TYPES:
            parser.error(f"unknown type {t!r}; known: {', '.join(quant_types.FILE_TYPES)}")
    out = pathlib.Path(args.out)
    plans = []
    if args.only in ("tiny", "all"):
        plans += families.tiny_plans(args.seed)
    if args.only in ("tiny-256", "all"):
        plans += families.tiny_256_plans(args.seed)
    if args.only in ("bench-135m", "all"):
        plans.append(families.bench_135m())
    if args.only in ("bench-1b", "all"):
        plans.append(families.bench_1b())
    for plan in plans:
        sub = out / "bench" if plan.name.startswith("bench") else out
        write_model(plan, sub / plan.name, args.seed, args.types)
    return 0


if __name__ == "__main__":
    sys.exit(main())

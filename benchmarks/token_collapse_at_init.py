"""How alike a sequence's tokens become, layer by layer, in a freshly initialised model.

On an H200 the gpu-scale albert-sop stayed on the unigram plateau, and its shared layer converged to a fixed
point (assets/benchmarks/gpu_check_nvidia-h200.json). This asks whether the collapse is there before any
training: for each preset, the mean cosine similarity between different tokens of a sequence, layer by layer,
at initialisation (seed 0), on random token ids (no corpus needed); and the gpu models at initializer_range
0.01, 0.02 (the paper's) and 0.04. The anchor is course-albert, which leaves the plateau at the course scale.
Its answer (0.89 at 0.02, 0.50 at 0.01) is why the gpu presets start at 0.01: on an H200 the budgeted run then
left the plateau (assets/benchmarks/gpu_recipe_h200.json).

    python benchmarks/token_collapse_at_init.py       # seconds on a CPU; writes the JSON below
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

import minialbert as ma
from minialbert.download import write_json
from minialbert.model import init_weights

REPO = Path(__file__).resolve().parent.parent
# (label, preset, config changes): each initialisation scale spelled out (labels survive a preset change)
MODELS = (("course-albert", "course-albert", {}),
          ("gpu-albert, init 0.02", "gpu-albert", {"initializer_range": 0.02}),
          ("gpu-bert, init 0.02", "gpu-bert", {"initializer_range": 0.02}),
          ("gpu-albert, init 0.01", "gpu-albert", {"initializer_range": 0.01}),
          ("gpu-albert, init 0.04", "gpu-albert", {"initializer_range": 0.04}))


def token_cosine_per_layer(preset: str, changes: dict, sequences: int, seed: int) -> list[float]:
    """Mean cosine between different tokens of a sequence: the embedding output, then each layer's."""
    cfg = ma.AlbertConfig.preset(preset, **changes)
    torch.manual_seed(seed)
    model = ma.AlbertModel(cfg).eval()
    model.apply(lambda m: init_weights(m, cfg.initializer_range))
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, cfg.vocab_size, (sequences, cfg.max_position_embeddings), generator=g)
    with torch.no_grad():
        hidden = model(ids, output_hidden_states=True).hidden_states             # L + 1 x (B, N, H)
    N = ids.shape[1]
    off_diagonal = ~torch.eye(N, dtype=torch.bool)
    result = []
    for h in hidden:
        unit = F.normalize(h.float(), dim=-1)
        result.append(round(float((unit @ unit.transpose(1, 2))[:, off_diagonal].mean()), 3))
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sequences", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "assets" / "benchmarks" / "token_collapse_at_init.json")
    args = p.parse_args()
    rows = {label: token_cosine_per_layer(preset, changes, args.sequences, args.seed)
            for label, preset, changes in MODELS}
    anchor = rows["course-albert"]
    for preset, cosines in rows.items():
        print(f"{preset:>22}: input {cosines[0]:.3f} -> last layer {cosines[-1]:.3f} "
              f"({cosines[-1] / anchor[-1]:.2f}x course-albert's last layer)")
    write_json(args.out, {"what": "mean cosine similarity between different tokens of a sequence, the "
                                  "embedding output then each layer's, at initialisation (random token ids)",
                          "sequences": args.sequences, "seed": args.seed, "torch": torch.__version__,
                          "cosine_per_layer": rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

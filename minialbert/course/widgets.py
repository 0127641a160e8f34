"""ipywidgets explorers used by the lessons (imported only in notebooks)."""

from __future__ import annotations

import ipywidgets as W

from ..config import AlbertConfig
from ..costs import count_parameters


def parameter_calculator() -> W.VBox:
    """Sliders for V, E, H, layers and sharing; shows the embedding and encoder parameter counts."""
    style = dict(description_width="110px")
    V = W.IntSlider(30000, min=1000, max=256000, step=1000, description="vocab V", style=style)
    E = W.IntSlider(128, min=16, max=1024, step=16, description="embedding E", style=style)
    H = W.IntSlider(768, min=128, max=4096, step=128, description="hidden H", style=style)
    L = W.IntSlider(12, min=1, max=48, description="layers", style=style)
    sharing = W.Dropdown(options=["all", "attention", "ffn", "none"], value="all", description="sharing",
                         style=style)
    out = W.Output()

    def update(_=None):
        out.clear_output()
        with out:
            heads = max(1, H.value // 64)
            cfg = AlbertConfig(vocab_size=V.value, embedding_size=E.value, hidden_size=H.value,
                               num_layers=L.value, num_heads=heads, intermediate_size=4 * H.value,
                               sharing=sharing.value)
            bert_embedding = V.value * H.value
            factorized = V.value * E.value + E.value * H.value
            print(f"token embedding  V*H = {bert_embedding / 1e6:8.2f}M   "
                  f"vs  V*E + E*H = {factorized / 1e6:8.2f}M")
            no_sharing = cfg.replace(sharing="none")
            print(f"encoder, sharing={sharing.value!r}: {count_parameters(cfg) / 1e6:8.2f}M   "
                  f"(not shared: {count_parameters(no_sharing) / 1e6:.2f}M)")

    for w in (V, E, H, L, sharing):
        w.observe(update, names="value")
    update()
    return W.VBox([V, E, H, L, sharing, out])

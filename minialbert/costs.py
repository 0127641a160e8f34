"""What a config costs, by formula: parameters by part (the paper's Tables 1, 3, 4) and forward FLOPs.

Tests check the parameter formula against the parameters of a built AlbertModel.
Shapes: V vocabulary, E embedding size, H hidden size, F intermediate size, P positions,
T token types, L layers, N sequence length.
"""

from __future__ import annotations

from .config import AlbertConfig


def parameter_breakdown(cfg: AlbertConfig) -> dict[str, int]:
    """Encoder parameters by part, by formula: embeddings, projection, attention, ffn, pooler."""
    V, E, H, F_, P, T = (cfg.vocab_size, cfg.embedding_size, cfg.hidden_size, cfg.intermediate_size,
                         cfg.max_position_embeddings, cfg.type_vocab_size)
    stored_layers = cfg.num_hidden_groups * cfg.inner_group_num
    n_attention = 1 if cfg.sharing == "attention" else stored_layers
    n_ffn = 1 if cfg.sharing == "ffn" else stored_layers
    return {
        "embeddings": (V + P + T) * E + 2 * E,                       # three tables + LayerNorm(E)
        "projection": (E * H + H) if cfg.embedding_projection else 0,
        "attention": n_attention * (4 * (H * H + H) + 2 * H),       # q, k, v, output dense, LayerNorm
        "ffn": n_ffn * (2 * H * F_ + F_ + H + 2 * H),                # two linears, LayerNorm
        "pooler": H * H + H,
    }


def count_parameters(cfg: AlbertConfig) -> int:
    """Encoder parameters (embeddings, projection, layers, pooler; no MLM/SOP heads), by formula.

    Tests check it against the parameters of a built AlbertModel.
    """
    return sum(parameter_breakdown(cfg).values())


def forward_flops(cfg: AlbertConfig, seq_len: int, predicted: int = 0) -> dict[str, int]:
    """Floating-point operations of one forward pass over one sequence, by part, by formula.

    A matrix product (n x k) @ (k x m) costs 2nkm (a multiply and an add per term); elementwise
    work (softmax, GELU, LayerNorm) is left out, as is customary. `predicted` positions go through
    the MLM head (the model computes it only there). Sharing does not appear anywhere: a shared
    layer is run num_layers times all the same, which is the point of the paper's Table 2. A
    training step costs about 3x the forward (the backward computes two products per product).
    """
    N, E, H, F_, V, L = (seq_len, cfg.embedding_size, cfg.hidden_size, cfg.intermediate_size,
                         cfg.vocab_size, cfg.num_layers)
    return {
        "projection": 2 * N * E * H if cfg.embedding_projection else 0,
        "attention": L * (2 * N * H * 4 * H + 2 * 2 * N * N * H),   # q, k, v, output; scores and A @ V
        "ffn": L * 2 * 2 * N * H * F_,                                 # H -> F and F -> H
        "pooler": 2 * H * H,                                           # [CLS] only
        "mlm_head": predicted * (2 * H * E + 2 * E * V),               # H -> E, then the tied E x V decoder
        "sentence_head": 2 * H * 2,
    }

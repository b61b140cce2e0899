#!/usr/bin/env python3
"""Cost model of DeepSeek-V3 served with expert parallelism over N CPU ranks (docs/DISTRIBUTED.md).

Prints markdown tables: weights and KV cache per rank, all-to-all bytes per token per MoE layer
in each communication dtype, and the expected decode step time on 25 / 100 / 400 Gb/s links
against the compute per rank (memory-bound: bytes read / bandwidth). Only the standard
library; every assumption is a flag.

    python3 tools/cost_model.py                       # the tables of docs/DISTRIBUTED.md
    python3 tools/cost_model.py --bandwidth-gbs 50 --tokens-per-rank 1,16
    python3 tools/cost_model.py --measured MS,BYTES   # place a measured step on the model

Layout modelled: attention data parallel + expert parallel over all N ranks (how DeepSeek and
SGLang serve V3): every rank holds the attention, the 3 dense layers, the shared experts,
embeddings and lm_head, and 256 / N routed experts of each of the 58 MoE layers.
"""
import argparse
import math

# DeepSeek-V3 / R1 (config.json of deepseek-ai/DeepSeek-V3)
HIDDEN = 7168
LAYERS = 61
DENSE_LAYERS = 3
MOE_LAYERS = LAYERS - DENSE_LAYERS
EXPERTS = 256
TOP_K = 8
MOE_INTERMEDIATE = 2048
SHARED_EXPERTS = 1
DENSE_INTERMEDIATE = 18432
VOCAB = 129280
HEADS = 128
Q_LORA = 1536
KV_LORA = 512
QK_NOPE = 128
QK_ROPE = 64
V_HEAD = 128

WEIGHT_BYTES = {"int4 (q4_k)": 4.5 / 8, "fp8 (128x128 scales)": 1.0 + 4.0 / (128 * 128),
                "bf16": 2.0}
COMM_BYTES = {"f32": 4, "bf16": 2, "fp16": 2}


def expert_params():
    return 3 * HIDDEN * MOE_INTERMEDIATE


def attention_params():
    q = HIDDEN * Q_LORA + Q_LORA * HEADS * (QK_NOPE + QK_ROPE)
    kv = HIDDEN * (KV_LORA + QK_ROPE) + KV_LORA * HEADS * (QK_NOPE + V_HEAD)
    return q + kv + HEADS * V_HEAD * HIDDEN


def replicated_params():
    """Everything but the routed experts: held by every rank."""
    dense = DENSE_LAYERS * 3 * HIDDEN * DENSE_INTERMEDIATE
    shared = MOE_LAYERS * SHARED_EXPERTS * expert_params()
    router = MOE_LAYERS * EXPERTS * HIDDEN
    return LAYERS * attention_params() + dense + shared + router + 2 * VOCAB * HIDDEN


def routed_params():
    return MOE_LAYERS * EXPERTS * expert_params()


def kv_bytes_per_token(element_bytes):
    return LAYERS * (KV_LORA + QK_ROPE) * element_bytes


def expected_distinct(picks, bins):
    """Expected distinct bins hit by `picks` uniform draws."""
    return bins * (1 - (1 - 1 / bins) ** picks)


def a2a_bytes_per_token_layer(ranks, dtype_bytes, dedup):
    """Bytes one token sends away for one MoE layer, dispatch + combine.

    Ours sends one row per (token, expert) assignment to the expert's rank and gets one row
    back; a deduplicating dispatch (DeepEP) sends a token once per distinct remote rank and
    gets one partial sum back per rank."""
    remote = (ranks - 1) / ranks
    rows = expected_distinct(TOP_K, ranks) if dedup else TOP_K
    return 2 * rows * remote * HIDDEN * dtype_bytes


def compute_seconds(ranks, tokens_per_rank, weight_bytes, bandwidth, context):
    """Decode step of one rank, memory-bound: replicated weights once, each local expert
    that any of the step's tokens (over all ranks) chose once, and the KV cache read."""
    tokens = tokens_per_rank * ranks
    local = EXPERTS / ranks
    p_touched = 1 - (1 - TOP_K / EXPERTS) ** tokens
    expert_bytes = MOE_LAYERS * local * p_touched * expert_params() * weight_bytes
    weights = replicated_params() * weight_bytes + expert_bytes
    kv = tokens_per_rank * context * kv_bytes_per_token(2)
    return (weights + kv) / bandwidth


def comm_seconds(ranks, tokens_per_rank, dtype_bytes, link_gbps, latency):
    per_layer = tokens_per_rank * a2a_bytes_per_token_layer(ranks, dtype_bytes, dedup=False)
    return MOE_LAYERS * (per_layer / (link_gbps * 1e9 / 8) + 2 * latency)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def gib(x):
    return f"{x / 2**30:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="8,16,32,64,128,256")
    ap.add_argument("--links-gbps", default="25,100,400")
    ap.add_argument("--bandwidth-gbs", type=float, default=50.0,
                    help="memory read bandwidth of one rank, GB/s")
    ap.add_argument("--latency-us", type=float, default=30.0,
                    help="one all-to-all's fixed cost over TCP, microseconds")
    ap.add_argument("--tokens-per-rank", default="1,16")
    ap.add_argument("--context", type=int, default=4096, help="tokens of KV read per sequence")
    ap.add_argument("--weights", default="int4 (q4_k)", choices=list(WEIGHT_BYTES))
    ap.add_argument("--comm-dtype", default="bf16", choices=list(COMM_BYTES))
    args = ap.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    links = [float(x) for x in args.links_gbps.split(",")]
    tokens = [int(t) for t in args.tokens_per_rank.split(",")]
    bw = args.bandwidth_gbs * 1e9

    print(f"DeepSeek-V3: {(replicated_params() + routed_params()) / 1e9:.1f} B parameters, "
          f"{routed_params() / 1e9:.1f} B in routed experts, {replicated_params() / 1e9:.1f} B "
          f"replicated on every rank\n")
    rows = []
    for n in ranks:
        row = [n, EXPERTS // n]
        for b in WEIGHT_BYTES.values():
            row.append(gib((replicated_params() + routed_params() / n) * b))
        rows.append(row)
    print("Weights per rank, GiB:\n")
    print(table(["EP", "experts / rank"] + list(WEIGHT_BYTES), rows))
    print(f"\nKV cache per token (MLA latent {KV_LORA} + rope key {QK_ROPE}, {LAYERS} layers): "
          f"bf16 {kv_bytes_per_token(2) / 1024:.1f} KiB, int8 {kv_bytes_per_token(1) / 1024:.1f} "
          f"KiB; a rank holds only its own sequences' KV (attention data parallel)\n")

    rows = []
    for n in ranks:
        row = [n]
        for name, b in COMM_BYTES.items():
            row.append(f"{a2a_bytes_per_token_layer(n, b, False) / 1024:.0f}")
        row.append(f"{a2a_bytes_per_token_layer(n, 2, True) / 1024:.0f}")
        rows.append(row)
    print("All-to-all KiB per token per MoE layer (dispatch + combine, remote share only):\n")
    print(table(["EP"] + [f"ours, {d}" for d in COMM_BYTES] + ["deduplicated, bf16"], rows))

    for t in tokens:
        rows = []
        for n in ranks:
            compute = compute_seconds(n, t, WEIGHT_BYTES[args.weights], bw, args.context)
            row = [n, f"{compute * 1e3:.0f}"]
            for link in links:
                comm = comm_seconds(n, t, COMM_BYTES[args.comm_dtype], link, args.latency_us * 1e-6)
                row.append(f"{comm * 1e3:.1f} / {1 / (compute + comm) * t:.1f}")
            rows.append(row)
        print(f"\nDecode step, {t} token(s) per rank, weights {args.weights}, communication "
              f"{args.comm_dtype}, {args.bandwidth_gbs:.0f} GB/s per rank, context "
              f"{args.context}: compute ms, then per link 'communication ms / tok/s per rank' "
              "(no overlap):\n")
        print(table(["EP", "compute ms"] + [f"{link:.0f} Gb/s" for link in links], rows))


if __name__ == "__main__":
    main()

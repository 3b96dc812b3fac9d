#!/usr/bin/python3
"""Writes a many-tensor GGUF v3 file for header-parsing benchmarks (`tensormorph ls/info` against
bench/peer_gguf_header.py).

The file looks like a small llama checkpoint with very many layers:
  - token_embd.weight (F16, [dim, vocab]), output_norm.weight (F32, [dim]), output.weight (F16, [dim, vocab])
  - per block N: attn_norm / ffn_norm (F32, [dim]); attn_q, attn_k, attn_v, attn_output (F16, [dim, dim]);
    ffn_gate, ffn_up (F16, [dim, ff]); ffn_down (F16, [ff, dim]) -- 9 tensors a block
  - as many blocks as --tensors needs; the last block is cut short so the total is exactly --tensors
  - about 30 metadata KVs in llama.cpp's names, among them a tokenizer of --vocab entries
    (tokenizer.ggml.tokens: STRING array, .scores: FLOAT32 array, .token_type: INT32 array) and a merges
    STRING array, so the header is dominated by what real checkpoints carry
Values are seeded pseudo-random (--seed), so the file is the same on every run.

Usage: /usr/bin/python3 bench/make_gguf_10k.py --out /tmp/many.gguf [--tensors 10000]
Needs Debian's /usr/bin/python3 (numpy); uses tests/tools/gguf_write.py.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "tools"))
from gguf_write import write_gguf  # noqa: E402

BLOCK_TENSORS = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]


def tensor_plan(n_tensors, dim, ff, vocab):
    """[(name, ggml type, ne)] with exactly n_tensors entries, llama's order."""
    head = [("token_embd.weight", "F16", [dim, vocab])]
    tail = [("output_norm.weight", "F32", [dim]), ("output.weight", "F16", [dim, vocab])]
    shapes = {"attn_norm": ("F32", [dim]), "ffn_norm": ("F32", [dim]), "attn_q": ("F16", [dim, dim]),
              "attn_k": ("F16", [dim, dim]), "attn_v": ("F16", [dim, dim]), "attn_output": ("F16", [dim, dim]),
              "ffn_gate": ("F16", [dim, ff]), "ffn_up": ("F16", [dim, ff]), "ffn_down": ("F16", [ff, dim])}
    body_count = max(0, n_tensors - len(head) - len(tail))
    body = []
    block = 0
    while len(body) < body_count:
        for kind in BLOCK_TENSORS:
            if len(body) == body_count:
                break
            ggml, ne = shapes[kind]
            body.append(("blk.%d.%s.weight" % (block, kind), ggml, ne))
        block += 1
    plan = (head + body + tail)[:n_tensors]
    return plan, block


def metadata(n_blocks, dim, ff, vocab):
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    tokens += ["\u2581tok%d" % i for i in range(vocab - len(tokens))]
    tokens = tokens[:vocab]
    scores = (-np.arange(vocab, dtype=np.float32) / 10.0).tolist()
    token_type = [2, 3, 3] + [6] * 256 + [1] * (vocab - 259)
    merges = ["\u2581t ok%d" % i for i in range(min(vocab, 1000))]
    heads = max(1, dim // 8)
    return [
        ("general.architecture", "STRING", "llama"),
        ("general.type", "STRING", "model"),
        ("general.name", "STRING", "Many Tensors Bench"),
        ("general.basename", "STRING", "many-tensors"),
        ("general.size_label", "STRING", "tiny"),
        ("general.license", "STRING", "mit"),
        ("general.tags", "ARRAY", ("STRING", ["benchmark", "synthetic", "text-generation"])),
        ("general.languages", "ARRAY", ("STRING", ["en"])),
        ("general.file_type", "UINT32", 1),
        ("general.quantization_version", "UINT32", 2),
        ("general.alignment", "UINT32", 32),
        ("llama.block_count", "UINT32", n_blocks),
        ("llama.context_length", "UINT32", 4096),
        ("llama.embedding_length", "UINT32", dim),
        ("llama.feed_forward_length", "UINT32", ff),
        ("llama.attention.head_count", "UINT32", heads),
        ("llama.attention.head_count_kv", "UINT32", heads),
        ("llama.attention.layer_norm_rms_epsilon", "FLOAT32", 1e-5),
        ("llama.rope.freq_base", "FLOAT32", 10000.0),
        ("llama.rope.dimension_count", "UINT32", dim // heads),
        ("llama.vocab_size", "UINT32", vocab),
        ("tokenizer.ggml.model", "STRING", "llama"),
        ("tokenizer.ggml.pre", "STRING", "default"),
        ("tokenizer.ggml.tokens", "ARRAY", ("STRING", tokens)),
        ("tokenizer.ggml.scores", "ARRAY", ("FLOAT32", scores)),
        ("tokenizer.ggml.token_type", "ARRAY", ("INT32", token_type)),
        ("tokenizer.ggml.merges", "ARRAY", ("STRING", merges)),
        ("tokenizer.ggml.bos_token_id", "UINT32", 1),
        ("tokenizer.ggml.eos_token_id", "UINT32", 2),
        ("tokenizer.ggml.unknown_token_id", "UINT32", 0),
        ("tokenizer.ggml.add_bos_token", "BOOL", True),
        ("tokenizer.ggml.add_eos_token", "BOOL", False),
        ("tokenizer.chat_template", "STRING", "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"),
    ]


def tensor_data(ggml, ne, rng):
    count = int(np.prod(ne))
    if ggml == "F32":  # norms: around 1
        return (1.0 + 0.05 * rng.standard_normal(count)).astype(np.float32)
    return (0.02 * rng.standard_normal(count)).astype(np.float16)


def main():
    ap = argparse.ArgumentParser(description="write a GGUF v3 file with many small llama-like tensors")
    ap.add_argument("--out", required=True, help="the GGUF file to write")
    ap.add_argument("--tensors", type=int, default=10000, help="number of tensors (default 10000)")
    ap.add_argument("--dim", type=int, default=16, help="embedding length (default 16)")
    ap.add_argument("--ff", type=int, default=32, help="feed-forward length (default 32)")
    ap.add_argument("--vocab", type=int, default=32000, help="tokenizer entries (default 32000)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.tensors < 1 or args.vocab < 259 or args.dim < 8:
        ap.error("need --tensors >= 1, --vocab >= 259, --dim >= 8")

    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    plan, n_blocks = tensor_plan(args.tensors, args.dim, args.ff, args.vocab)
    kvs = metadata(n_blocks, args.dim, args.ff, args.vocab)
    tensors = [(name, ggml, ne, tensor_data(ggml, ne, rng)) for name, ggml, ne in plan]
    write_gguf(args.out, kvs, tensors)
    print("%s: %d tensors, %d KVs, %d blocks, %d bytes (%.1f s)" % (
        args.out, len(tensors), len(kvs), n_blocks, os.path.getsize(args.out), time.perf_counter() - t0))


if __name__ == "__main__":
    main()

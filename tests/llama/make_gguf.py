#!/usr/bin/env python3
"""Writes a llama-architecture GGUF (v3) whose weights are all zero, as a
sparse file, for running the real llama.cpp on the simulated GPU.

usage: make_gguf.py OUT [N_LAYER [N_EXPERT [FLAG,...]]]

Shapes (n_embd 2048, n_ff 5632, 16 heads, 4 KV heads, F16 weights) are those
of a TinyLlama-1.1B block, so each layer is 82 MiB; the vocabulary is the 3
SentencePiece specials and the 256 byte tokens, which is the least llama.cpp's
SPM tokenizer accepts (it looks up <0x0A> for the newline).

With N_EXPERT, each block's feed-forward is a mixture of experts, as
Mixtral's (the llama architecture with llama.expert_count): a router
(ffn_gate_inp) and the experts' gate, down and up stacked in one tensor each
(ffn_*_exps, 88 MiB per expert per block), 2 experts used per token.

FLAGS: tied, q4_0, ctx=N (the trained context, llama.context_length; 4096
by default). With tied, there is no output.weight: the output layer reads the token
embeddings, as models with tied embeddings do (Llama 3.2 1B/3B, Gemma,
small Qwen2.5); llama.cpp then loads token_embd.weight a second time, as
the output layer's tensor (TENSOR_DUPLICATED). With q4_0, the blocks' matrices are Q4_0 (18 bytes
per 32 weights: 4.5 bits a weight, 23 MiB a block), which ggml's CPU
backend repacks on x86 with AVX2 (the CPU_REPACK buffer type) where they
stay in host memory.
"""
import struct
import sys

F32, F16, Q4_0 = 0, 1, 2
ALIGN = 32
N_EMBD, N_FF, N_HEAD, N_HEAD_KV, N_CTX = 2048, 5632, 16, 4, 4096


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gguf_str(key) + struct.pack("<I", vtype) + payload


def kv_u32(key, v):
    return kv(key, 4, struct.pack("<I", v))


def kv_f32(key, v):
    return kv(key, 6, struct.pack("<f", v))


def kv_string(key, v):
    return kv(key, 8, gguf_str(v))


def kv_array(key, etype, items, fmt=None):
    body = struct.pack("<IQ", etype, len(items))
    body += b"".join(gguf_str(i) if fmt is None else struct.pack(fmt, i) for i in items)
    return kv(key, 9, body)


def main():
    out = sys.argv[1]
    n_layer = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    n_expert = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    flags = sys.argv[4].split(",") if len(sys.argv) > 4 else []
    tied = "tied" in flags
    n_ctx = next((int(f[4:]) for f in flags if f.startswith("ctx=")), N_CTX)
    W = Q4_0 if "q4_0" in flags else F16   # the blocks' matrices
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
    types = [2, 3, 3] + [6] * 256
    n_vocab = len(tokens)
    kvs = [
        kv_string("general.architecture", "llama"),
        kv_string("general.name", "vramtrace-zero-llama"),
        kv_u32("general.alignment", ALIGN),
        kv_u32("llama.context_length", n_ctx),
        kv_u32("llama.embedding_length", N_EMBD),
        kv_u32("llama.block_count", n_layer),
        kv_u32("llama.feed_forward_length", N_FF),
        kv_u32("llama.attention.head_count", N_HEAD),
        kv_u32("llama.attention.head_count_kv", N_HEAD_KV),
        kv_u32("llama.rope.dimension_count", N_EMBD // N_HEAD),
        kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5),
        kv_u32("general.file_type", 1),
        kv_string("tokenizer.ggml.model", "llama"),
        kv_array("tokenizer.ggml.tokens", 8, tokens),
        kv_array("tokenizer.ggml.scores", 6, [0.0] * n_vocab, "<f"),
        kv_array("tokenizer.ggml.token_type", 5, types, "<i"),
        kv_u32("tokenizer.ggml.unknown_token_id", 0),
        kv_u32("tokenizer.ggml.bos_token_id", 1),
        kv_u32("tokenizer.ggml.eos_token_id", 2),
    ]
    if n_expert:
        kvs += [kv_u32("llama.expert_count", n_expert), kv_u32("llama.expert_used_count", 2)]
    n_kv_embd = N_EMBD // N_HEAD * N_HEAD_KV
    tensors = [("token_embd.weight", F16, [N_EMBD, n_vocab])]
    for i in range(n_layer):
        p = "blk.%d." % i
        tensors += [
            (p + "attn_norm.weight", F32, [N_EMBD]),
            (p + "attn_q.weight", W, [N_EMBD, N_EMBD]),
            (p + "attn_k.weight", W, [N_EMBD, n_kv_embd]),
            (p + "attn_v.weight", W, [N_EMBD, n_kv_embd]),
            (p + "attn_output.weight", W, [N_EMBD, N_EMBD]),
            (p + "ffn_norm.weight", F32, [N_EMBD]),
        ]
        if n_expert:
            tensors += [
                (p + "ffn_gate_inp.weight", F32, [N_EMBD, n_expert]),
                (p + "ffn_gate_exps.weight", W, [N_EMBD, N_FF, n_expert]),
                (p + "ffn_down_exps.weight", W, [N_FF, N_EMBD, n_expert]),
                (p + "ffn_up_exps.weight", W, [N_EMBD, N_FF, n_expert]),
            ]
        else:
            tensors += [
                (p + "ffn_gate.weight", W, [N_EMBD, N_FF]),
                (p + "ffn_down.weight", W, [N_FF, N_EMBD]),
                (p + "ffn_up.weight", W, [N_EMBD, N_FF]),
            ]
    tensors += [("output_norm.weight", F32, [N_EMBD])]
    if not tied:
        tensors += [("output.weight", F16, [N_EMBD, n_vocab])]

    infos, offset = [], 0
    for name, ttype, dims in tensors:
        nbytes = 4 if ttype == F32 else 2
        for d in dims:
            nbytes *= d
        if ttype == Q4_0:
            nbytes = nbytes // 2 // 32 * 18   # 32 weights in 18 bytes
        infos.append(gguf_str(name) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, offset))
        offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(infos)
    head += b"\0" * (-len(head) % ALIGN)
    with open(out, "wb") as f:
        f.write(head)
        f.truncate(len(head) + offset)


if __name__ == "__main__":
    main()

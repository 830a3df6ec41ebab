/* model_placement_state.h: what model_placement.c keeps of ggml's buffers
 * and tensors, and model_picture.c pictures (model.h, "Placement"). Only
 * those two files include it.
 */
#ifndef VT_MODEL_PLACEMENT_STATE_H
#define VT_MODEL_PLACEMENT_STATE_H

#include "model_internal.h"

/* A hostile trace can hold any number of records; what is kept is bounded. */
#define MAX_BUFFERS 65536u
#define MAX_PARTS (1u << 20)
#define MAX_BLOCK 4095
#define MAX_MODELS (VT_MAX_OTHER_MODELS + 1)

enum content { C_OTHER, C_WEIGHTS, C_KV, C_COMPUTE };

/* The bytes of one buffer's tensors for one block (block -1: none) and
 * content, merged while tensors come in a row. */
typedef struct part {
    uint32_t buffer;   /* index in buffers */
    int16_t block;     /* -1: not a block's (token_embd, output, ...) */
    uint8_t content;   /* C_WEIGHTS or C_KV */
    uint8_t input;     /* token embeddings: llama.cpp keeps them in host memory */
    uint8_t output;    /* the output layer's */
    uint8_t output_matrix;   /* an output.* tensor among them (not output_norm): no tied embeddings */
    uint8_t model;     /* weights: the model's number; KV: its cache's (module comment) */
    uint8_t experts;   /* a mixture-of-experts block's experts (ffn_*_exps) */
    uint32_t cells;    /* KV: the most rows of its K or V tensors (the context's cells); 0 not known */
    uint32_t stream_cells;   /* KV: the most rows of those tensors' per-stream views; 0 none seen */
    uint64_t bytes;
} part_t;

typedef struct gbuf {
    uint64_t id, size, base, t_start, t_end;  /* t_end UINT64_MAX while live */
    uint8_t usage, host, place, named_kv, named_weights;
    uint8_t replaced;                         /* t_end set by a reload (supersede) */
    int16_t gpu;                              /* ordinal for VT_PLACE_GPU */
    int8_t model;                             /* of its first named part, -1 before */
    uint8_t model_kv;                         /* that part was KV cache: model is a cache's number */
    uint8_t gen;                              /* which load of that model (each reload is the next) */
    uint64_t last_data;                       /* dedupe a tensor and its views */
    char name[32];
} gbuf_t;

struct vt_placement_state {
    gbuf_t *buf;
    size_t nbuf, buf_cap;
    part_t *part;
    size_t npart, part_cap;
    vt_map_t live_by_id;    /* buffer identity -> index of its entry, until ggml frees it or
                             * the identity names another buffer: its records
                             * still come after its memory was freed */
    /* The latest run of each block's weights and KV cache (and of the
     * token embeddings, the output layer): its first tensor's name and
     * its buffer. Indexed by run_slot. */
    struct run_key { uint64_t name; uint32_t buffer; } *runs;
    size_t runs_cap;
    vt_map_t live_by_base;     /* a device or pinned buffer's base -> its index */
    uint8_t loading[2];        /* the model (0) and KV cache (1) numbers the latest parts had */
    /* Per model (and per KV cache) number: its first buffers on a GPU or
     * in pinned memory, whose ends the trace holds. A model with one live
     * at a moment was loaded then. */
#define MAX_RESIDENT 16
    uint32_t resident[2][MAX_MODELS][MAX_RESIDENT];
    uint8_t nresident[2][MAX_MODELS];
    uint8_t gen[2][MAX_MODELS];   /* the latest load of each */
    uint64_t dropped;       /* records over the bounds */
};

#endif

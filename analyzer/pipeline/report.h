/* `vramtrace report`: shared state of the report command, built by
 * load.c (options, reading, merge), report_gpus.c (per-GPU combined view)
 * and printed by report_text.c, report_json.c or html*.c. export, diff and
 * the `replay` command load traces the same way (vt_report_load) and read the result.
 *
 * Contract: the printers only read a finished vt_report_t (every model
 * finished); they never fail and never touch the files. on_event observers
 * see every event right after the model applied it, in the merged time
 * order; they must keep memory bounded (no per-event storage).
 */
#ifndef VT_REPORT_H
#define VT_REPORT_H

#include <stdio.h>

#include "model.h"
#include "rules.h"
#include "trace_reader.h"

#define VT_GPU_MAX_PROCS 64
#define VT_MAX_GPUS 64
#define VT_LOOKAHEAD 16   /* a power of two */

typedef struct vt_report_opts {
    int json;
    int color;   /* text only: 1 always, 0 never, -1 auto (vt_report_use_color) */
    int fail_on_spill;
    int accept_offload;   /* --accept-offload: a planned partial offload passes --fail-on-spill */
    double margin_pct;
    int top;   /* sites shown per process */
    int no_source;   /* --no-source: no file:line from DWARF in stacks */
    int quiet;       /* no note on stderr for a trace that ends mid-chunk (serve scrapes live traces) */
    int raw_strings; /* --raw-strings: text prints trace strings unescaped */
    int wide;        /* --wide: text lines as long as they come (else 80 columns, fit.h) */
    int order;       /* --sort: the sites table's vt_site_order */
    const char *filter;   /* --filter: only sites with a frame naming this (NULL: all) */
    int leaks, churn, histogram;   /* --leaks, --churn, --histogram: their sections */
    /* Which processes to read (vt_report_load chooses by their PROCESS
     * headers before reading anything else): --pid (up to 64), --last N
     * (the N that started last), --since / --until (wall-clock start, ns
     * since the Unix epoch; 0 = no bound). */
    uint64_t pids[64];
    int npids, last;
    uint64_t since_ns, until_ns;
    int utc;   /* --utc: wall-clock times in UTC (else local time) */
} vt_report_opts_t;

typedef struct vt_report_input {
    char *path;
    vt_reader_t *reader;
    vt_model_t *model;
    /* Lookahead (load.c): events read but not fed yet, oldest at qhead,
     * so the model can start loading what each needs a few events before
     * it is fed. STACK and FRAME records (the ones a trace writes before
     * each new stack's first event) queue among them in qrec, a FRAME's
     * name copied to qname; the head is always an event. Any other record
     * ends the lookahead: it waits in `held` until the events before it are
     * fed. Either way the model sees file order. */
    vt_event_t q[VT_LOOKAHEAD];
    uint32_t qcookie[VT_LOOKAHEAD];   /* vt_model_prefetch's, stage to stage; 0: none left */
    uint8_t qkind[VT_LOOKAHEAD];      /* VT_REC_EVENT, or qrec's type */
    vt_record_t qrec[VT_LOOKAHEAD];
    char *qname[VT_LOOKAHEAD];
    size_t qname_cap[VT_LOOKAHEAD];
    unsigned qhead, qn;
    int held;
    vt_record_t held_rec;
    int done;
    int from_dir;         /* found in a directory: only a regular file is read */
    int tolerant;         /* a damaged chunk ends this input, not the report */
    int damaged;          /* stopped at a damaged chunk (tolerant only) */
    int truncated;        /* stopped at a partial chunk */
    uint64_t read_from;   /* where its last reading started: 0, or where vt_report_read_on went on */
    uint64_t stop_offset;
    char stop_reason[256];
} vt_report_input_t;

/* One GPU (by UUID) across every process that used it. */
typedef struct vt_gpu {
    uint8_t uuid[16];
    char name[128];
    int ordinal;                  /* as the first process numbered it */
    uint64_t total;
    int nprocs;
    const vt_model_t *procs[VT_GPU_MAX_PROCS];
    int dev_index[VT_GPU_MAX_PROCS];
    uint64_t contrib[VT_GPU_MAX_PROCS];     /* tracked bytes now */
    uint64_t tracked;
    uint64_t peak_bytes, peak_time_abs;
    int have_peak;
    uint64_t peak_by_tag[VT_MAX_TAGS];
    uint64_t peak_contrib[VT_GPU_MAX_PROCS];
    int have_min;
    uint64_t min_free, min_free_time_abs;
} vt_gpu_t;

/* A trace left out of the report: why, and where in the file. */
typedef struct vt_report_bad {
    char *path;
    uint64_t offset;
    char reason[256];
} vt_report_bad_t;

typedef struct vt_report vt_report_t;
typedef void (*vt_event_obs_t)(void *ctx, vt_report_t *r, int input, const vt_event_t *ev);

struct vt_report {
    vt_report_opts_t opts;
    int nrules_files;     /* --rules given: VRAMTRACE_RULES is then ignored */
    int keep_layout;      /* models keep each device's address space at peak */
    vt_event_obs_t on_event;
    void *on_event_ctx;
    /* Called when reading starts again from the first event (ggml's
     * marks came after the allocations they name, model.h): on_event's
     * state from the first reading must go. */
    void (*on_rewind)(void *ctx);
    /* The time-series recorder (report_series.c), if attached: called
     * directly, not through on_event, so the LTO build can inline it into
     * the reading loop (pipeline/load.c; it runs for every event of an --html report). */
    struct vt_series_set *series;
    vt_rules_t *rules;
    vt_report_input_t *in;
    int nin;
    /* keep_going (report): a trace that cannot be opened is left out and
     * listed in bad, one damaged mid-way is reported up to the damage
     * (in->damaged); either way the command exits 2 after printing. Other
     * commands stop at the first bad trace. */
    int keep_going;
    vt_report_bad_t *bad;
    int nbad;
    int unselected;   /* traces left out by --pid, --since, --until, --last */
    /* Every path vt_report_load is given was found in a directory (by
     * vt_report_list): read as a directory's traces are, regular files only. */
    int found_in_dir;
    /* The traces may still be written (serve, top): the models are viewed
     * (vt_model_view), not finished, and each reader's file is closed
     * after reading, so vt_report_read_on can go on with what follows. */
    int keep_open;
    vt_gpu_t gpus[VT_MAX_GPUS];
    int ngpus;
    /* report_gpus.c: the GPU and slot the hook last served. A process's
     * device keeps its GPU (its UUID is set once), so the pair stays right. */
    const vt_model_t *hook_m;
    int hook_dev, hook_gpu, hook_slot;
    vt_model_t *hook_in;   /* hook_m, writable: its hook floor is set */
    uint64_t t0;   /* earliest mono_start_ns: the combined timeline's zero */
};

/* getopt codes for the options every trace-reading command shares. */
enum { VT_OPT_MARGIN = 0x100, VT_OPT_RULES, VT_OPT_FIRST_FREE };

/* Defaults: margin 15 %, top 10, built-in rules. NULL when out of memory. */
vt_report_t *vt_report_new(void);
void vt_report_free(vt_report_t *r);
/* Applies --margin (VT_OPT_MARGIN) or --rules (VT_OPT_RULES); cmd names the
 * command in messages. @return 0 or VT_EXIT_BAD_INPUT (message printed). */
int vt_report_opt(vt_report_t *r, const char *cmd, int c, const char *arg);
/* --margin and --rules as given to a command that makes a fresh report
 * again and again (serve at each scrape, top at each frame), applied by
 * vt_report_opt to each one, which parses and checks them. */
#define VT_SAVED_OPTS_MAX 32
typedef struct vt_saved_opts {
    struct {
        int code;
        const char *arg;
    } v[VT_SAVED_OPTS_MAX];
    int n;
} vt_saved_opts_t;
/* @return 0, or -1 when cap (at most VT_SAVED_OPTS_MAX) are held already. */
int vt_saved_opts_add(vt_saved_opts_t *s, int cap, int code, const char *arg);
/* @return 0, or vt_report_opt's error for the first that fails. */
int vt_saved_opts_apply(vt_report_t *r, const char *cmd, const vt_saved_opts_t *s);
/* --color WHEN: auto, always, never. */
int vt_report_color_opt(vt_report_t *r, const char *cmd, const char *when);
/* Resolves opts.color for out: auto = a terminal and NO_COLOR unset/empty. */
int vt_report_use_color(const vt_report_t *r, FILE *out);
/* Parses a wall-clock time for --since / --until: "YYYY-MM-DD",
 * "YYYY-MM-DD HH:MM[:SS]" or "...THH:MM[:SS]" (local time, or UTC with
 * utc), or an age: "30m", "2h", "7d" before now. @return 0 with *ns
 * (Unix epoch), -1 when it is none of those. */
int vt_parse_wall_time(const char *s, int utc, uint64_t *ns);
/* "YYYY-MM-DD HH:MM:SS" of a wall-clock time (local, or UTC with utc). */
const char *vt_fmt_wall(char out[32], uint64_t wall_ns, int utc);
/* Reads every TRACE or DIR (its *.vtrace: regular files only, see
 * VT_READER_REGULAR_ONLY) of args in one merged time order and finishes
 * the models. @return 0, or VT_EXIT_BAD_INPUT after printing why (with
 * keep_going: only when no trace was usable; r->nbad and in->damaged say
 * what was left out). A truncated trace is not an error (a note on
 * stderr). */
int vt_report_load(vt_report_t *r, char *const *args, int nargs);
/* For a report loaded with keep_open: reads what was appended to its
 * traces since (vt_reader_resume: from the end of each one's last
 * complete chunk) and views the models again, so the report is what
 * vt_report_load of the traces as they are now gives. A trace that ended
 * (END read) is not read on. @return 0; 1 when it cannot go on (a trace
 * replaced or damaged, ggml's marks met, out of memory), the report then
 * half read: free it and load the traces afresh. */
int vt_report_read_on(vt_report_t *r);
/* The trace files vt_report_load would read for args, in its order: a
 * TRACE as named, a DIR's *.vtrace by name, those found in a directory
 * marked in (*from_dir)[i]. The caller frees each path and both arrays.
 * @return 0, or a VT_E_* after printing why (nothing is returned). */
int vt_report_list(char *const *args, int nargs, char ***paths, unsigned char **from_dir, int *n);

/* The verdict's key: "spill", "near_spill", "failed" (an OOM after which
 * nothing more was allocated), "partial_offload", "cpu_only", "no_spill",
 * "no_gpu_memory",
 * or with `whole` set "incomplete" for a trace cut inside a chunk (the
 * others then describe only its complete chunks). */
const char *vt_proc_verdict(const vt_proc_t *p, int whole);
/* "partial_offload": ggml's records put blocks, the output layer or KV
 * cache in host memory, with no failure-based verdict before it (an OOM
 * after which nothing more was allocated stays "failed", a host fallback
 * "spill"); "cpu_only": a model whose layers all ran in host memory in a
 * process that allocated nothing through CUDA (vt_proc_ran_on_cpu). */
int vt_proc_ran_on_cpu(const vt_proc_t *p);
/* A partial offload without ggml's records: weights in pinned host memory
 * still live at the end, with no failed device request (vLLM's
 * --cpu-offload-gb pins them in maybe_offload_to_cpu). Staging copies
 * freed before the end, and pinned weights of a ggml program (its
 * records speak for it), do not count. */
int vt_proc_pinned_offload(const vt_proc_t *p);
/* A "no_spill" whose model placement the trace cannot vouch for: weights
 * on a device, but no record of where ggml placed the model's tensors
 * (ggml built into the program, whose calls no hook sees, or a runtime
 * without ggml; ggml's buffer marks alone name no layer). Layers kept in pageable or mapped
 * host memory never reach CUDA, so nothing says whether some were. */
int vt_proc_placement_unseen(const vt_proc_t *p);
/* 1 when --fail-on-spill must fail for p: any spill or failure, and a
 * partial offload or CPU run unless accept_offload (--accept-offload: a
 * planned split, nothing failed). */
int vt_proc_fails_gate(const vt_proc_t *p, int accept_offload);
/* A verdict key's words as the text report's VERDICT line heads them
 * ("near_spill" -> "NEAR SPILL"); an unknown key is returned as it is. */
const char *vt_verdict_words(const char *key);
/* The same words in a sentence's case ("near spill", "ran on the CPU"), as
 * the HTML page's index prints them. */
const char *vt_verdict_lower(const char *key);
/* Severity, 0 the worst ("spill"), then failed, near_spill,
 * partial_offload, cpu_only, incomplete, no_spill, no_gpu_memory; unknown
 * keys after all: the worst process's verdict is a run's. */
int vt_verdict_rank(const char *key);
/* 1 for a verdict that says something went wrong or ran slow (spill
 * through cpu_only). */
int vt_verdict_alarming(const char *key);
/* The command-line options that place layers or size the KV cache (-ngl,
 * -c, -np, --cache-type-k, --no-kv-offload, ...), with their values, as
 * argv gave them: pointers into p->argv. VT_LAYER_ARGS_MAX holds any
 * command line short of a contrived one. @return how many (at most cap). */
#define VT_LAYER_ARGS_MAX 32
size_t vt_proc_layer_args(const vt_proc_t *p, const char **out, size_t cap);
/* The recorded environment's llama.cpp options (LLAMA_ARG_*, which the
 * command line overrides), "NAME=VALUE": pointers into p->env. */
size_t vt_proc_layer_env(const vt_proc_t *p, const char **out, size_t cap);
/* llama.cpp's --fit in this process: whether its queries are in the trace,
 * and what it was told: an -ngl or a tensor override (either makes it leave
 * the split as given: common/fit.cpp throws "already set by user"), a
 * tensor split or row split (the same, with more than one GPU) and its
 * target, each from the command line, the environment or llama.cpp's
 * default (common/arg.cpp: -ngl auto, --fit-target 1024 MiB per device). */
enum { VT_FROM_DEFAULT, VT_FROM_ARGV, VT_FROM_ENV };
typedef struct vt_llama_fit {
    int ran;
    const char *ngl;        /* NULL: not given (or auto): --fit chose it */
    int ngl_from;
    /* The first of -ot, --cpu-moe, --n-cpu-moe N>0, --n-cpu-ffn N>0 given,
     * as its option's name (argv's spelling, or the LLAMA_ARG_* name) and
     * value (NULL for a flag): NULL when none. */
    const char *override, *override_value;
    int override_from;
    /* -ts with a nonzero share, or -sm row: NULL when neither. */
    const char *split, *split_value;
    int split_from;
    const char *target;     /* NULL: llama.cpp's default */
    int target_from;
    uint64_t target_bytes;  /* every device's; 0 for a per-device list */
    int env_recorded;       /* 0: a trace without the environment, whose default is a guess */
    /* The context: given by -c/--ctx-size or LLAMA_ARG_CTX_SIZE (ctx, NULL
     * when neither: --fit sizes it, shrinking the model's trained context
     * (for each sequence, or times them: findings.c) as far as --fit-ctx
     * before it leaves layers in host memory; any
     * value given, 0 too, stops that: common/arg.cpp), and --fit-ctx
     * (fit_ctx, NULL: llama.cpp's default, 4096). */
    const char *ctx, *fit_ctx;
    int ctx_from, fit_ctx_from;
} vt_llama_fit_t;
void vt_proc_llama_fit(const vt_proc_t *p, vt_llama_fit_t *out);
/* 1 when --fit chose the split: it ran, nothing it leaves as given was
 * given, and the trace records the environment that says so. The views
 * then name --fit, not -ngl or -ot, as what placed the layers. */
int vt_proc_fit_chose(const vt_proc_t *p);
/* 1 when the process allocated, failed and freed nothing in what was read
 * (a GPU probe: ollama's discovery runs one per library). The text report
 * gives it no tables and `serve`, once it ended, no series of its own. */
int vt_proc_allocated_nothing(const vt_proc_t *p);
/* 1 when a trace without END is of a process known to be over: it ran
 * on this machine (the trace's hostname is this one's) and no process has
 * its pid now (SIGKILL, or a crash before the shim's exit handler could
 * write END). A trace from another machine, or whose pid was taken again,
 * reads as still running: 0. */
int vt_proc_gone(const vt_proc_t *p);
/* The same test for a pid and hostname kept from a trace read earlier. */
int vt_pid_gone(uint64_t pid, const char *hostname);
/* 1 for a whole trace (not cut or damaged) of a process that ended (END
 * read, or vt_proc_gone), allocated nothing and loaded no model ggml told
 * of (a CPU run is not idle): done, and nothing to watch. `serve` gives it
 * no series and `top` no row; both count it, as the text report gives it
 * no tables. */
int vt_report_input_idle(const vt_report_input_t *in);
/* What the shim did without (the PROCESS record's degraded bits), as one
 * sentence to follow "NOTE: ", or NULL when it says nothing was missing. */
const char *vt_proc_degraded_note(const vt_proc_t *p);
/* A vt_lost_reason's JSON key and its words in the text report, or NULL
 * for a reason this reader does not know. */
const char *vt_lost_reason_key(int reason);
const char *vt_lost_reason_text(int reason);
/* How an ended process ended its image (END's how): "exit", "exec",
 * "_exit", "unknown"; NULL when the trace has no END. And the words that
 * follow "the process " in the text report. */
const char *vt_end_how_key(const vt_proc_t *p);
/* A vt_end_how's key ("exit", "exec", "_exit"), NULL for one this reader
 * does not know. */
const char *vt_end_how_name(uint64_t how);
const char *vt_end_how_words(const vt_proc_t *p);

/* findings.c: what the report finds beside the verdict, for every view to
 * print (docs/report.md gives the evidence behind each). */
/* The sentence on models loaded at once (vt_placement_t.models_at_once > 1)
 * into buf, "" without: every view prints the same words. */
void vt_other_models_sentence(char *buf, size_t len, const vt_placement_t *pl);
/* Why no offload estimate was made (advice_withheld_*) into buf, "" when
 * one was or nothing withheld it: the text and the HTML page give the
 * same words; VT_WITHHELD_SENTENCE_MAX holds the longest. */
#define VT_WITHHELD_SENTENCE_MAX 512
void vt_advice_withheld_sentence(char *buf, size_t len, const vt_placement_t *pl);
/* What llama.cpp's --fit did about the split, when its queries are in the
 * trace ("" otherwise): it chose the layers, to keep its target free, or
 * was given an -ngl it leaves alone. Plain text (values from the trace, cut
 * at 64 bytes): each view escapes it. */
#define VT_FIT_SENTENCE_MAX 768
void vt_llama_fit_sentence(char *buf, size_t len, const vt_proc_t *p);
/* The KV cache's cells in words, "1024 cells" or, with S streams, "4
 * sequences of 1024 cells each" ("" where kv_cells is 0), and what they
 * count, "tokens of context, ...": every view says the same. Numbers alone
 * from the trace; VT_KV_CELLS_WORDS_MAX holds the longest. */
#define VT_KV_CELLS_WORDS_MAX 64
void vt_kv_cells_words(char *buf, size_t len, const vt_placement_t *pl);
const char *vt_kv_cells_scope(const vt_placement_t *pl);
/* The context --fit chose, when it ran, no -c or LLAMA_ARG_CTX_SIZE was
 * given and the KV cache's cells are in the trace ("" otherwise): its
 * cells, and how --fit sizes it. Plain text (values cut at 64 bytes). */
void vt_llama_context_sentence(char *buf, size_t len, const vt_proc_t *p);
/* The context reserve (total - free at first sight) and untracked bytes
 * (driver-used - reserve - tracked, at the last driver report) of a device. */
uint64_t vt_dev_reserve(const vt_dev_t *d);
uint64_t vt_dev_untracked(const vt_dev_t *d);
/* margin_pct (--margin) of total bytes. */
uint64_t vt_margin_bytes(double margin_pct, uint64_t total);
/* The free memory estimated now (at the end of what was read): the last
 * driver report less this process's allocations since, 0 at least. */
uint64_t vt_dev_free_now(const vt_dev_t *d);
/* How free memory met the margin (vt_headroom_t.crossed). */
enum vt_margin_crossing {
    VT_MARGIN_ABOVE,                  /* it stayed above */
    VT_MARGIN_CROSSED_BY_ALLOCATION,  /* this process's request took it below */
    VT_MARGIN_CROSSED_BY_REPORT,      /* a driver report found it below */
};
/* A device's headroom beyond its lowest free memory (vt_dev_t.min_free). */
typedef struct vt_headroom {
    uint64_t reserve, untracked;   /* vt_dev_reserve, vt_dev_untracked */
    int reserve_by_others;         /* the reserve is more than a CUDA context takes (1 GiB) */
    int managed_over;              /* managed memory at its peak and the device's own
                                    * are more than the card holds: the margin is not judged */
    uint64_t margin_bytes;         /* vt_margin_bytes of the model's margin and the total */
    int crossed;                   /* enum vt_margin_crossing; the moment is below_margin */
    uint64_t outside;              /* crossed by a report: bytes gone that this process's own
                                    * allocations do not explain (another process, the driver) */
    uint64_t spare;                /* stayed above: min_free beyond the margin */
} vt_headroom_t;
void vt_dev_headroom(const vt_model_t *m, const vt_dev_t *d, vt_headroom_t *out);
/* The free memory an event met, as the model estimated it: 0 at least. */
uint64_t vt_view_free(const vt_event_view_t *v);
/* Index in proc->devs of the tipping event's device, -1 without a tipping
 * event or device. */
int vt_proc_tip_dev(const vt_model_t *m);
/* The tipping event on the device with this ordinal (any kind but a host
 * fallback), or in pinned host memory (a host fallback). */
int vt_proc_tip_on_device(const vt_proc_t *p, int ordinal);
int vt_proc_tip_in_host(const vt_proc_t *p);
/* A spill event in a few words, into buf (returned): "API of SIZE[ for
 * TAG]"; a graph launch, whose allocations' size the trace does not hold,
 * "API of a CUDA graph (its allocations' size not in the trace)". tag
 * NULL: no tag. */
const char *vt_spill_what(char *buf, size_t n, int kind, unsigned api, uint64_t bytes, const char *tag);
/* Spill events of kind after the tipping event. */
uint64_t vt_proc_later_spills(const vt_proc_t *p, int kind);
/* More VRAM the process needed to hold everything (0 without a spill):
 * the largest of the failed requests' shortfall, the pinned host memory
 * held at once after device requests failed, and device + managed memory
 * past the card's total. A lower bound. */
uint64_t vt_proc_more_vram(const vt_proc_t *p);
/* What that bound rests on (vt_more_vram_t.why). */
enum vt_more_why {
    VT_MORE_UNSAID,          /* none of the below can be said */
    VT_MORE_FAILED_REQUEST,  /* the tipping request, less about free_then free then */
    VT_MORE_FALLBACK,        /* pinned host memory at once after failures */
    VT_MORE_OVERSUB,         /* device + managed memory past the card's total */
};
typedef struct vt_more_vram {
    uint64_t bytes;       /* vt_proc_more_vram */
    int why;              /* enum vt_more_why */
    uint64_t free_then;   /* VT_MORE_FAILED_REQUEST: the request's bytes less `bytes` */
    /* VT_MORE_FAILED_REQUEST: bytes at the tipping device's peak of the
     * tags (a bit each, later_tags) it held none of when the request
     * failed: what the full path may need on top. */
    uint64_t later;
    uint32_t later_tags;
} vt_more_vram_t;
_Static_assert(VT_MAX_TAGS <= 32, "vt_more_vram_t.later_tags has a bit per tag");
void vt_more_vram(const vt_model_t *m, vt_more_vram_t *out);

int vt_gpus_hook(void *ctx, const vt_model_t *m, int dev, uint64_t abs_time_ns);
void vt_gpus_finish(vt_report_t *r);

void vt_report_text(const vt_report_t *r, FILE *out);
/* --leaks, --churn, --histogram (report_heap.c): the text sections of one
 * process, and its JSON members; pos[i] is site i's index in the JSON
 * "sites" array (SIZE_MAX: left out by --filter). */
void vt_report_text_heap(FILE *o, const vt_report_t *r, const vt_model_t *m);
struct vt_json;
void vt_report_json_heap(struct vt_json *j, const vt_report_t *r, const vt_model_t *m, const size_t *pos);
void vt_report_json(const vt_report_t *r, FILE *out);
/* The verdict paragraph of one process (report_text.c), uncoloured unless
 * vt_report_text is printing. */
void vt_report_verdict(FILE *o, const vt_model_t *m);

/* Helpers shared by the printers (report_common.c). */
void vt_uuid_str(const uint8_t uuid[16], char out[48]);
int vt_uuid_known(const uint8_t uuid[16]);
/* The first n (at most p->nsites) sites of p ordered by bytes at peak,
 * then most bytes live, then total bytes (all descending), then index;
 * returns a malloc'd index array holding them first (it may hold all the
 * sites), NULL when out of memory. A small n of many sites costs one pass,
 * not a sort. */
size_t *vt_sites_ranked(const vt_proc_t *p, size_t n);
/* The same with another first key (most first; ties as above):
 * --sort peak|bytes|calls, and the --leaks and --churn tables. */
enum vt_site_order { VT_ORDER_PEAK, VT_ORDER_BYTES, VT_ORDER_CALLS, VT_ORDER_LIVE, VT_ORDER_FREES };
size_t *vt_sites_ordered(const vt_proc_t *p, size_t n, int order);
/* Whether a frame of the site's stack has `function` in its symbolized
 * name (--filter); every site when function is NULL. */
int vt_site_matches(const vt_model_t *m, const vt_site_t *s, const char *function);
const char *vt_api_name(unsigned api);
/* The CUDA name of an allocation's failure code (runtime or driver, by
 * api), or NULL for a code not in the table. */
const char *vt_result_name(unsigned api, uint32_t result);
/* What decided site s's tag, as one phrase (docs/report.md "Tags"):
 * "rule: <rule>", "ggml mark: WEIGHTS", or "none (untagged: ...)", and
 * where ggml's mark and a rule disagree, both. Unescaped: trace strings
 * (rules name frames) go through vt_text before a terminal. */
void vt_site_evidence(const vt_model_t *m, const vt_site_t *s, char *buf, size_t size);
/* Where site s's memory lives, for a table: "GPU N", "pinned host" or
 * "managed". @return buf. */
const char *vt_site_where(const vt_site_t *s, char buf[32]);
/* "user_rule", "ggml_mark", "builtin_rule" or "nothing" (enum vt_decided). */
const char *vt_decided_name(int decided);
/* Frame i of a stack on one line: INDENT#i NAME  FILE:LINE  [MODULE] (the
 * parts the frame has). With a width, a name too long for it loses its
 * parameter list, then its middle (fit.h): the line keeps the name's
 * scope, its last member, its source line and its module. Width 0 prints
 * the name whole. */
void vt_print_frame(FILE *o, const char *indent, int i, const vt_frame_t *fr, int width);
/* The frame of a stack's n frames fr (innermost first) that says what the
 * allocation is for, for one-line names (diff's sites, Perfetto slices):
 * matched_frame when in range (the frame the deciding rule matched), else
 * the innermost frame with a name outside the CUDA libraries (libcuda*,
 * libcudart*: the allocator call itself tells nothing), else frame 0;
 * -1 when n is 0. */
int vt_telling_frame(const vt_frame_t *fr, int n, int matched_frame);
/* Basename of a path-like string. */
const char *vt_base(const char *path);

#endif

/* unwind_cfi.c: the unwind rule of one return address, read from its
 * module's .eh_frame (x86-64). stacks.c caches these rules and walks the
 * stack with them; this file runs only on a cache miss.
 *
 * Only the shapes of frame compilers emit for ordinary code are modelled:
 * the CFA is rsp or rbp plus a constant, the return address is saved at
 * CFA + k, and the caller's rbp is unchanged or saved at CFA + k'. Anything
 * else (signal frames, expressions, register-to-register rules, unknown
 * augmentations or encodings) yields VT_CFI_UNKNOWN, and the caller lets
 * libunwind unwind that whole stack, so a stack is either exactly what the
 * rules say or libunwind's.
 *
 * The tables are read in place, in the mapped segments of a loaded module,
 * but nothing in them is trusted: every read is checked against the
 * module's PT_GNU_EH_FRAME or PT_LOAD ranges first, and every length is
 * checked before it moves a pointer, so a corrupt or hostile table ends in
 * VT_CFI_UNKNOWN, never in a read outside the module. No allocation; the
 * module walk takes loader_lock.c's shared lock (fork waits it out) and,
 * inside dl_iterate_phdr, the loader's own.
 */
#include <link.h>
#include <string.h>

#include "shim.h"

#if defined(__x86_64__)

enum { DW_RBP = 6, DW_RSP = 7, DW_RA = 16 };
#define MAX_LOADS 16

typedef struct module {
    uintptr_t load_lo[MAX_LOADS], load_hi[MAX_LOADS];
    int nload;
    uintptr_t hdr_lo, hdr_hi;
} module_t;

typedef struct fde_search {
    uintptr_t pc;
    module_t *mod;
    unsigned long long subs;
    int found;
} fde_search_t;

/* [p, p + len) lies inside one PT_LOAD of the module. */
static int in_load(const module_t *m, uintptr_t p, uintptr_t len)
{
    for (int i = 0; i < m->nload; i++)
        if (p >= m->load_lo[i] && p <= m->load_hi[i] && len <= m->load_hi[i] - p)
            return 1;
    return 0;
}

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    fde_search_t *s = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        s->subs = info->dlpi_subs;
    module_t m = { .nload = 0 };
    int inside = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            if (s->pc >= start && s->pc - start < ph->p_memsz)
                inside = 1;
            /* only what the loader mapped readable; .eh_frame is in one */
            if ((ph->p_flags & PF_R) && m.nload < MAX_LOADS) {
                m.load_lo[m.nload] = start;
                m.load_hi[m.nload] = start + ph->p_memsz;
                m.nload++;
            }
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            m.hdr_lo = start;
            m.hdr_hi = start + ph->p_memsz;
        }
    }
    if (!inside)
        return 0;
    *s->mod = m;
    s->found = 1;
    return 1;
}

static int count_subs(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long *)arg = info->dlpi_subs;
    return 1; /* every module reports the same counters: one is enough */
}

unsigned long long vt_cfi_module_subs(void)
{
    unsigned long long subs = 0;
    vt_dl_iterate_phdr(count_subs, &subs);
    return subs;
}

typedef struct dw_cursor {
    const uint8_t *p, *end;
    int bad;
} dw_cursor_t;

static uint64_t dw_uleb(dw_cursor_t *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (c->p >= c->end || shift > 63) {
            c->bad = 1;
            return 0;
        }
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
}

static int64_t dw_sleb(dw_cursor_t *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        if (c->p >= c->end || shift > 63) {
            c->bad = 1;
            return 0;
        }
        b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= ~0ull << shift;
    return (int64_t)v;
}

static uint64_t dw_fixed(dw_cursor_t *c, size_t n)
{
    uint64_t v = 0;
    if ((size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return 0;
    }
    memcpy(&v, c->p, n); /* little-endian */
    c->p += n;
    return v;
}

/* Moves past n bytes only if they are there: a length read from the table
 * must not carry the cursor outside it. */
static void dw_skip(dw_cursor_t *c, uint64_t n)
{
    if (c->bad || n > (uint64_t)(c->end - c->p)) {
        c->bad = 1;
        return;
    }
    c->p += n;
}

/* A pointer in one of the DW_EH_PE encodings .eh_frame uses: absolute or
 * pc-relative (datarel relative to base), fixed size or LEB128. Others are
 * refused (c->bad). */
static uint64_t dw_encoded(dw_cursor_t *c, uint8_t enc, uintptr_t datarel)
{
    uintptr_t field = (uintptr_t)c->p;
    uint64_t v;
    if (enc == 0xff) { /* DW_EH_PE_omit */
        c->bad = 1;
        return 0;
    }
    switch (enc & 0x0f) {
    case 0x00: v = dw_fixed(c, 8); break;
    case 0x01: v = dw_uleb(c); break;
    case 0x02: v = dw_fixed(c, 2); break;
    case 0x03: v = dw_fixed(c, 4); break;
    case 0x04: v = dw_fixed(c, 8); break;
    case 0x09: v = (uint64_t)dw_sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)dw_fixed(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)dw_fixed(c, 4); break;
    case 0x0c: v = dw_fixed(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: return v;
    case 0x10: return v + field;
    case 0x30:
        if (datarel)
            return v + datarel;
        /* fall through */
    default: c->bad = 1; return 0;
    }
}

/* The FDE covering pc, through the module's .eh_frame_hdr binary search
 * table; NULL when there is none or the header is not one we can read. */
static const uint8_t *find_fde(uintptr_t pc, module_t *m, unsigned long long *subs)
{
    fde_search_t s = { pc, m, 0, 0 };
    vt_dl_iterate_phdr(find_module, &s);
    *subs = s.subs;
    if (!s.found || !m->hdr_lo || m->hdr_hi - m->hdr_lo < 12)
        return NULL;
    const uint8_t *hdr = (const uint8_t *)m->hdr_lo;
    /* version 1; a table of (datarel sdata4 pc, datarel sdata4 fde) */
    if (hdr[0] != 1 || hdr[3] != 0x3b)
        return NULL;
    dw_cursor_t c = { hdr + 4, (const uint8_t *)m->hdr_hi, 0 };
    (void)dw_encoded(&c, hdr[1], m->hdr_lo);
    uint64_t count = dw_encoded(&c, hdr[2], m->hdr_lo);
    if (c.bad || !count || count > (uint64_t)(c.end - c.p) / 8)
        return NULL;
    const uint8_t *table = c.p;
    uint64_t lo = 0, hi = count;
    int32_t at;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        memcpy(&at, table + 8 * mid, 4);
        if (m->hdr_lo + (intptr_t)at <= pc)
            lo = mid;
        else
            hi = mid;
    }
    memcpy(&at, table + 8 * lo, 4);
    if (m->hdr_lo + (intptr_t)at > pc)
        return NULL;
    memcpy(&at, table + 8 * lo + 4, 4);
    return (const uint8_t *)(m->hdr_lo + (intptr_t)at);
}

typedef struct reg_rule {
    uint8_t how; /* 0 same value, 1 saved at CFA + off, 2 undefined, 3 anything else */
    int64_t off;
} reg_rule_t;

typedef struct cfa_row {
    int cfa_reg, cfa_other;
    int64_t cfa_off;
    reg_rule_t rbp, ra, rsp;
} cfa_row_t;

static reg_rule_t *row_reg(cfa_row_t *r, uint64_t reg)
{
    return reg == DW_RBP ? &r->rbp : reg == DW_RA ? &r->ra : reg == DW_RSP ? &r->rsp : NULL;
}

static void set_reg(cfa_row_t *r, uint64_t reg, uint8_t how, int64_t off)
{
    reg_rule_t *x = row_reg(r, reg);
    if (x) {
        x->how = how;
        x->off = off;
    }
}

/* DW_CFA_restore: back to the CIE's rule; only meaningful in an FDE. */
static int restore_reg(cfa_row_t *row, const cfa_row_t *initial, uint64_t reg)
{
    if (!initial)
        return -1;
    reg_rule_t *x = row_reg(row, reg);
    if (x)
        *x = *row_reg((cfa_row_t *)initial, reg);
    return 0;
}

/* Runs CFA instructions up to the row that covers target. Returns 0, or -1
 * for anything outside the subset modelled here. */
static int run_cfa(dw_cursor_t *c, cfa_row_t *row, const cfa_row_t *initial, uintptr_t *loc, uintptr_t target,
                   uint64_t code_align, int64_t data_align, uint8_t fde_enc)
{
    cfa_row_t saved[8];
    int nsaved = 0;
    while (c->p < c->end && !c->bad) {
        uint8_t op = *c->p++;
        uint64_t reg, delta = 0;
        switch (op >> 6) {
        case 1: delta = op & 0x3f; goto advance;
        case 2: set_reg(row, op & 0x3f, 1, (int64_t)dw_uleb(c) * data_align); continue;
        case 3:
            if (restore_reg(row, initial, op & 0x3f) != 0)
                return -1;
            continue;
        default: break;
        }
        switch (op) {
        case 0x00: continue; /* nop */
        case 0x01: { /* set_loc */
            uintptr_t to = (uintptr_t)dw_encoded(c, fde_enc, 0);
            if (c->bad)
                return -1;
            if (to > target)
                return 0;
            *loc = to;
            continue;
        }
        case 0x02: delta = dw_fixed(c, 1); goto advance;
        case 0x03: delta = dw_fixed(c, 2); goto advance;
        case 0x04: delta = dw_fixed(c, 4); goto advance;
        case 0x05: reg = dw_uleb(c); set_reg(row, reg, 1, (int64_t)dw_uleb(c) * data_align); continue;
        case 0x06:
            if (restore_reg(row, initial, dw_uleb(c)) != 0)
                return -1;
            continue;
        case 0x07: set_reg(row, dw_uleb(c), 2, 0); continue;
        case 0x08: set_reg(row, dw_uleb(c), 0, 0); continue;
        case 0x09: reg = dw_uleb(c); (void)dw_uleb(c); set_reg(row, reg, 3, 0); continue;
        case 0x0a:
            if (nsaved == 8)
                return -1;
            saved[nsaved++] = *row;
            continue;
        case 0x0b:
            if (!nsaved)
                return -1;
            /* the whole row, CFA included, as GCC's epilogues expect
             * (remember, def_cfa rsp+8, ret, restore) */
            *row = saved[--nsaved];
            continue;
        case 0x0c: row->cfa_reg = (int)dw_uleb(c); row->cfa_off = (int64_t)dw_uleb(c); row->cfa_other = 0; continue;
        case 0x0d: row->cfa_reg = (int)dw_uleb(c); continue;
        case 0x0e: row->cfa_off = (int64_t)dw_uleb(c); continue;
        case 0x0f: dw_skip(c, dw_uleb(c)); row->cfa_other = 1; continue;
        case 0x10: case 0x16: reg = dw_uleb(c); dw_skip(c, dw_uleb(c)); set_reg(row, reg, 3, 0); continue;
        case 0x11: reg = dw_uleb(c); set_reg(row, reg, 1, dw_sleb(c) * data_align); continue;
        case 0x12: row->cfa_reg = (int)dw_uleb(c); row->cfa_off = dw_sleb(c) * data_align; row->cfa_other = 0; continue;
        case 0x13: row->cfa_off = dw_sleb(c) * data_align; continue;
        case 0x14: reg = dw_uleb(c); (void)dw_uleb(c); set_reg(row, reg, 3, 0); continue;
        case 0x15: reg = dw_uleb(c); (void)dw_sleb(c); set_reg(row, reg, 3, 0); continue;
        case 0x2e: (void)dw_uleb(c); continue; /* GNU_args_size */
        case 0x2f: reg = dw_uleb(c); set_reg(row, reg, 1, -(int64_t)dw_uleb(c) * data_align); continue;
        default: return -1;
        }
    advance:
        if (c->bad)
            return -1;
        uintptr_t next = *loc + delta * code_align;
        if (next > target)
            return 0;
        *loc = next;
    }
    return c->bad ? -1 : 0;
}

/* A CIE or FDE record at p: its length word and the whole record must lie
 * in one of the module's segments. Returns the record's end, or NULL. */
static const uint8_t *record_end(const module_t *m, const uint8_t *p)
{
    uint32_t len;
    if (!in_load(m, (uintptr_t)p, 8))
        return NULL;
    memcpy(&len, p, 4);
    /* 0 ends the section; 0xffffffff is 64-bit DWARF, not used in .eh_frame */
    if (len < 4 || len == 0xffffffffu || !in_load(m, (uintptr_t)p, (uintptr_t)len + 4))
        return NULL;
    return p + 4 + len;
}

static uint64_t pack(const cfa_row_t *row)
{
    if (row->cfa_other || (row->cfa_reg != DW_RSP && row->cfa_reg != DW_RBP) || row->rsp.how != 0)
        return VT_CFI_UNKNOWN;
    if (row->ra.how == 2)
        return VT_CFI_END;
    if (row->cfa_off <= 0 || row->cfa_off >= (1 << 27) || row->ra.how != 1 || row->ra.off < INT16_MIN ||
        row->ra.off > INT16_MAX || (row->rbp.how != 0 && row->rbp.how != 1) || row->rbp.off < INT16_MIN ||
        row->rbp.off > INT16_MAX)
        return VT_CFI_UNKNOWN;
    return VT_CFI_STEP | (row->cfa_reg == DW_RBP ? VT_CFI_CFA_RBP : 0) | (row->rbp.how == 1 ? VT_CFI_RBP_SAVED : 0) |
           ((uint64_t)(uint16_t)row->rbp.off << 4) | ((uint64_t)(uint16_t)row->ra.off << 20) |
           ((uint64_t)row->cfa_off << 36);
}

uint64_t vt_cfi_rule(uintptr_t ra, unsigned long long *subs)
{
    uintptr_t target = ra - 1; /* the call, not what follows it */
    module_t m;
    const uint8_t *fde = find_fde(target, &m, subs);
    const uint8_t *fde_end = fde ? record_end(&m, fde) : NULL;
    if (!fde_end)
        return VT_CFI_UNKNOWN;
    uint32_t id;
    memcpy(&id, fde + 4, 4);
    /* the CIE pointer counts back from its own field */
    if (id == 0 || id > (uintptr_t)fde + 4)
        return VT_CFI_UNKNOWN;
    const uint8_t *cie = fde + 4 - id;
    const uint8_t *cie_end = record_end(&m, cie);
    uint32_t cie_id;
    if (!cie_end)
        return VT_CFI_UNKNOWN;
    memcpy(&cie_id, cie + 4, 4);
    if (cie_id != 0)
        return VT_CFI_UNKNOWN;

    dw_cursor_t c = { cie + 8, cie_end, 0 };
    uint8_t version = (uint8_t)dw_fixed(&c, 1);
    if (c.bad || (version != 1 && version != 3))
        return VT_CFI_UNKNOWN;
    const char *aug = (const char *)c.p;
    size_t auglen = strnlen(aug, (size_t)(c.end - c.p));
    dw_skip(&c, auglen + 1);
    uint64_t code_align = dw_uleb(&c);
    int64_t data_align = dw_sleb(&c);
    uint64_t ra_reg = version == 1 ? dw_fixed(&c, 1) : dw_uleb(&c);
    uint8_t fde_enc = 0;
    int has_z = aug[0] == 'z';
    if (c.bad || ra_reg != DW_RA || (auglen && !has_z))
        return VT_CFI_UNKNOWN;
    if (has_z) {
        uint64_t n = dw_uleb(&c);
        if (c.bad || n > (uint64_t)(c.end - c.p))
            return VT_CFI_UNKNOWN;
        const uint8_t *data_end = c.p + n;
        for (size_t i = 1; i < auglen && !c.bad; i++) {
            if (aug[i] == 'R') {
                fde_enc = (uint8_t)dw_fixed(&c, 1);
            } else if (aug[i] == 'L') {
                (void)dw_fixed(&c, 1);
            } else if (aug[i] == 'P') {
                uint8_t enc = (uint8_t)dw_fixed(&c, 1);
                (void)dw_encoded(&c, enc & 0x7f, 0);
            } else {
                return VT_CFI_UNKNOWN; /* 'S' (signal frame) and anything newer */
            }
        }
        if (c.bad || c.p > data_end)
            return VT_CFI_UNKNOWN;
        c.p = data_end;
    }
    cfa_row_t row = { .cfa_reg = DW_RSP, .cfa_off = 8, .ra = { 1, -8 } }, initial;
    uintptr_t loc = 0;
    if (run_cfa(&c, &row, NULL, &loc, UINTPTR_MAX, code_align, data_align, fde_enc) != 0)
        return VT_CFI_UNKNOWN;
    initial = row;

    dw_cursor_t f = { fde + 8, fde_end, 0 };
    uintptr_t begin = (uintptr_t)dw_encoded(&f, fde_enc, 0);
    uintptr_t range = (uintptr_t)dw_encoded(&f, fde_enc & 0x0f, 0);
    if (has_z)
        dw_skip(&f, dw_uleb(&f));
    if (f.bad || target < begin || target - begin >= range)
        return VT_CFI_UNKNOWN;
    loc = begin;
    if (run_cfa(&f, &row, &initial, &loc, target, code_align, data_align, fde_enc) != 0)
        return VT_CFI_UNKNOWN;
    return pack(&row);
}

#endif

/* Folded stacks (the format of flamegraph.pl's stackcollapse, read by
 * inferno and speedscope): `frame;frame;frame weight`, outermost first.
 * Frame text comes from the trace, so the separators this format relies on
 * (';' between frames, newline between lines) and other control bytes are
 * replaced by '_' inside names, module paths included; a space is fine
 * since the weight is after the last one. */
#include <inttypes.h>
#include <string.h>

#include "export.h"

/* Trace text: ';' and every byte the text report would escape (controls,
 * bidi controls, invalid UTF-8: vt_text) become '_'. */
static void put_name(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), k;
    for (size_t i = 0; i < n; i += k ? k : 1) {
        k = p[i] == ';' ? 0 : vt_text_glyph_len(p + i, n - i);
        if (k)
            fwrite(p + i, 1, k, f);
        else
            fputc('_', f);
    }
}

static void frame_text(FILE *f, const vt_frame_t *fr)
{
    if (!fr->display[0]) {
        fprintf(f, "0x%" PRIx64 "%s", VT_IP_ADDR(fr->ip), fr->module_base[0] ? "@" : "");
        put_name(f, fr->module_base);
        return;
    }
    put_name(f, fr->display);
}

void vt_export_folded(FILE *f, const vt_report_t *r, int by_total)
{
    for (int i = 0; i < r->nin; i++) {
        const vt_model_t *m = r->in[i].model;
        const vt_proc_t *p = vt_model_proc(m);
        for (size_t k = 0; k < p->nsites; k++) {
            const vt_site_t *s = &p->sites[k];
            uint64_t w = by_total ? s->total_bytes : s->at_peak;
            if (s->space != VT_SPACE_DEVICE || !w)
                continue;
            vt_frame_t fr[VT_MAX_STACK_DEPTH];
            int n = vt_stacks_get(vt_model_stacks(m), s->stack, fr, VT_MAX_STACK_DEPTH);
            if (!n)
                fputs("[no stack]", f);
            for (int q = n - 1; q >= 0; q--) {
                frame_text(f, &fr[q]);
                if (q)
                    fputc(';', f);
            }
            fprintf(f, " %" PRIu64 "\n", w);
        }
    }
}

/* jrpc_stdio_frame — see jrpc_stdio_frame.h. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "jrpc_json.h"
#include "jrpc_stdio_frame.h"

void jrpc_frame_reader_init(jrpc_frame_reader_t *r, int mode, size_t max)
{
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->max = max ? max : 1;
    jrpc_buf_init(&r->buf);
}

void jrpc_frame_reader_dispose(jrpc_frame_reader_t *r)
{
    jrpc_buf_dispose(&r->buf);
}

int jrpc_frame_feed(jrpc_frame_reader_t *r, const char *p, size_t n)
{
    /* Consumed bytes go first, so that the buffer holds one message at most
     * (a copy per message at worst; messages are small next to a pipe's
     * cost). */
    if (r->off > 0) {
        size_t left = r->buf.len - r->off;
        memmove(r->buf.p, r->buf.p + r->off, left);
        r->buf.len = left;
        r->off = 0;
    }
    return jrpc_buf_append(&r->buf, p, n) < 0 ? -ENOMEM : 0;
}

static int next_ndjson(jrpc_frame_reader_t *r, jrpc_span_t *msg)
{
    for (;;) {
        const char *base = r->buf.p + r->off;
        size_t avail = r->buf.len - r->off;
        const char *nl = avail > r->scan ? memchr(base + r->scan, '\n', avail - r->scan) : NULL;
        if (nl == NULL) {
            r->scan = avail;
            /* max bytes and a '\r' may still be a line of max bytes once
             * its '\n' comes: wait for it, whatever the pipe's cut. */
            bool over = avail > r->max && (avail - 1 > r->max || base[avail - 1] != '\r');
            if (r->skip_line || over) {
                /* An oversized line: drop what we have, and the rest up to
                 * its end of line as it comes, holding nothing. */
                bool first = !r->skip_line;
                r->skip_line = true;
                r->off = r->buf.len;
                r->scan = 0;
                return first ? JRPC_FRAME_ETOOBIG : 0;
            }
            return 0;
        }
        size_t len = (size_t)(nl - base);
        r->off += len + 1;
        r->scan = 0;
        if (r->skip_line) {
            r->skip_line = false;  /* the end of the line reported already */
            continue;
        }
        if (len > 0 && base[len - 1] == '\r')
            len--;
        if (len > r->max)
            return JRPC_FRAME_ETOOBIG;
        if (len == 0)
            continue;
        *msg = (jrpc_span_t){ base, len };
        return 1;
    }
}

/* Finds the end of an LSP header block in p[0..n): the offset just past
 * "\r\n\r\n", or 0 when absent. Ends before from were looked at already
 * (a header drip-fed costs its length once, not once per feed). */
static size_t header_end(const char *p, size_t n, size_t from)
{
    for (size_t i = from > 3 ? from : 3; i < n; i++)
        if (p[i] == '\n' && p[i - 1] == '\r' && p[i - 2] == '\n' && p[i - 3] == '\r')
            return i + 1;
    return 0;
}

/* The Content-Length of a header block p[0..n) (which ends "\r\n\r\n"),
 * or -1 when missing, repeated differently, or not a plain decimal. */
static int64_t content_length(const char *p, size_t n)
{
    static const char name[] = "content-length:";
    int64_t len = -1;
    size_t i = 0;
    while (i < n) {
        const char *eol = memchr(p + i, '\n', n - i);
        size_t line = (size_t)(eol - (p + i)); /* eol is never NULL: the block ends "\r\n" */
        if (line >= sizeof name - 1 && strncasecmp(p + i, name, sizeof name - 1) == 0) {
            size_t j = i + sizeof name - 1, end = i + line;
            if (p[end - 1] == '\r')
                end--;
            while (j < end && (p[j] == ' ' || p[j] == '\t'))
                j++;
            int64_t v = 0;
            size_t digits = 0;
            while (j < end && isdigit((unsigned char)p[j]) && digits < 15) {
                v = v * 10 + (p[j++] - '0');
                digits++;
            }
            while (j < end && (p[j] == ' ' || p[j] == '\t'))
                j++;
            if (digits == 0 || j != end || (len >= 0 && len != v))
                return -1;
            len = v;
        }
        i += line + 1;
    }
    return len;
}

static int next_lsp(jrpc_frame_reader_t *r, jrpc_span_t *msg)
{
    for (;;) {
        size_t avail = r->buf.len - r->off;
        if (r->skip > 0) {
            size_t k = avail < r->skip ? avail : (size_t)r->skip;
            r->off += k;
            r->scan = 0;
            r->skip -= k;
            if (r->skip > 0)
                return 0;
            continue;
        }
        const char *base = r->buf.p + r->off;
        size_t scan = avail < JRPC_FRAME_HEADER_MAX ? avail : JRPC_FRAME_HEADER_MAX;
        size_t hend = header_end(base, scan, r->scan);
        r->scan = hend == 0 ? scan : 0;
        if (hend == 0) {
            if (avail >= JRPC_FRAME_HEADER_MAX) {
                r->scan = 0;
                /* No header block in the first JRPC_FRAME_HEADER_MAX bytes:
                 * drop them but the last 3 (a "\r\n\r\n" may start there),
                 * so that what is dropped does not depend on how the pipe
                 * cut the bytes. */
                r->off += JRPC_FRAME_HEADER_MAX - 3;
                return JRPC_FRAME_EMALFORMED;
            }
            return 0;
        }
        int64_t clen = content_length(base, hend);
        if (clen < 0) {
            r->off += hend;
            return JRPC_FRAME_EMALFORMED;
        }
        if ((uint64_t)clen > r->max) {
            r->off += hend;
            r->skip = (uint64_t)clen;
            return JRPC_FRAME_ETOOBIG;
        }
        if (avail - hend < (size_t)clen) {
            r->scan = hend - 1;  /* the block's end is known: found again at once */
            return 0;
        }
        r->off += hend + (size_t)clen;
        if (clen == 0)
            continue;
        *msg = (jrpc_span_t){ base + hend, (size_t)clen };
        return 1;
    }
}

int jrpc_frame_next(jrpc_frame_reader_t *r, jrpc_span_t *msg)
{
    if (r->buf.p == NULL)
        return 0;   /* nothing fed yet (and no pointer to do sums on) */
    return r->mode == JRPC_FRAME_LSP ? next_lsp(r, msg) : next_ndjson(r, msg);
}

int jrpc_frame_put(jrpc_buf_t *out, int mode, const char *msg, size_t n)
{
    size_t len0 = out->len;
    if (mode == JRPC_FRAME_LSP) {
        char head[64];
        int k = snprintf(head, sizeof head, "Content-Length: %zu\r\n\r\n", n);
        if (jrpc_buf_append(out, head, (size_t)k) < 0)
            goto nomem;
    }
    if (jrpc_buf_append(out, msg, n) < 0)
        goto nomem;
    if (mode != JRPC_FRAME_LSP && jrpc_buf_putc(out, '\n') < 0)
        goto nomem;
    return 0;
nomem:
    out->len = len0;
    return -ENOMEM;
}

/* ---- what a child said ---- */

bool jrpc_child_id_parse(jrpc_span_t raw, uint64_t *id)
{
    if (raw.n == 0 || raw.n > 19 || raw.p[0] == '0')
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < raw.n; i++) {
        if (!isdigit((unsigned char)raw.p[i]))
            return false;
        v = v * 10 + (uint64_t)(raw.p[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX)
        return false;
    *id = v;
    return true;
}

static jrpc_span_t member(const char *p, size_t n, const char *name)
{
    jrpc_span_t v = { NULL, 0 };
    if (jrpc_json_member(p, n, name, &v) < 0)
        v = (jrpc_span_t){ NULL, 0 };
    return v;
}

int jrpc_child_msg_parse(const char *p, size_t n, jrpc_child_msg_t *m)
{
    memset(m, 0, sizeof *m);
    m->kind = JRPC_CHILD_GARBAGE;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    if (i == n || p[i] != '{' || jrpc_json_validate(p, n, JRPC_JSON_MAX_DEPTH) < 0)
        return m->kind;
    m->id_raw = member(p, n, "id");
    m->method = member(p, n, "method");
    if (m->method.n > 0) {
        m->kind = m->id_raw.n > 0 ? JRPC_CHILD_REQUEST : JRPC_CHILD_NOTIFICATION;
        return m->kind;
    }
    if (!jrpc_child_id_parse(m->id_raw, &m->id)) {
        m->kind = JRPC_CHILD_BAD_ID;
        return m->kind;
    }
    m->result = member(p, n, "result");
    m->error = member(p, n, "error");
    bool one = (m->result.n > 0) != (m->error.n > 0);
    m->kind = one ? JRPC_CHILD_ANSWER : JRPC_CHILD_BAD_ANSWER;
    return m->kind;
}

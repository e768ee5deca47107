/* Simlette's port loop, compiled: the hot loop of both modes, with and without credits.
 *
 * A line-for-line port of Engine._run_unlimited, Engine._run_limited / _try_start / _credit_back
 * and the queueing half of Engine._enqueue_all (fabrics/network/simlette/engine.py), which stays
 * the reference and the fallback. Built when gxnet is installed (setup.py: the optional extension
 * fabrics.network.simlette._engine_core, -O3 -ffp-contract=off, so every float is the same IEEE
 * operation in the same order as Python's) and used by fabrics/network/simlette/compiled.py.
 *
 * The event queue orders events as SimPy does: (time, priority, insertion count), URGENT (0)
 * before NORMAL (1) at equal times -- the order the Python engine's per-time FIFOs give. An
 * event is a link id >= 0 (wake that port) or -c (the Python callback c). Units (a message's
 * flits on one path) live in a pool and sit in per-port queues sorted by ready time (FIFO among
 * equals); credits come back through per-link queues sorted by time. The loop returns to Python
 * for a callback and when a message's last byte is scheduled to arrive; an arrival leaves the
 * rest of its event (re-waking the port) pending until the next call (run or settle), so what
 * the arrival's handler schedules comes first, as in the Python loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ABI 2
typedef int64_t i64;

typedef struct { double t; i64 seq; i64 ev; int prio; } Event;
typedef struct { double ready; i64 nbytes, nflits, last; int32_t msg, path, hop, next_free; } Unit;
typedef struct { i64 rem; double arrival; int channel; } Msg;  /* wire bytes still to arrive, latest arrival so far */
typedef struct { double t; i64 n; } Credit;  /* n credits back at the sender at t */
typedef struct { Credit *buf; i64 head, len, cap; } Returns;  /* ring sorted by t; cap a power of two */
typedef struct { i64 *buf; i64 head, len, cap; } Queue;  /* ring of unit indices; cap a power of two */

typedef struct {
    PyObject_HEAD
    i64 n;                      /* links */
    double *inv_rate, *after, *busy_until, *wake_at, *busy_s;
    i64 *bytes_sent;
    int flit;
    i64 dl;
    Queue *q;
    Event *heap; i64 nheap, capheap, seq;
    Unit *units; i64 nunits, capunits; int32_t free_unit;
    i64 *path_off, *path_links; i64 npaths, cappaths, nlinks_used, caplinks;
    i64 *ptab; i64 ptab_cap;    /* open-addressing table of path ids (-1 empty), keyed by their links */
    PyObject *after_src;         /* the fabric's after_s list: read when a path is first seen */
    Msg *msgs; i64 nmsg, capmsg;
    i64 *msg_free; i64 nfree, capfree;  /* ids of arrived messages, reused first */
    /* credits (finite buffers): per channel (0 request, 1 response) and link */
    int limited;
    i64 chunk_flits;
    i64 *credits[2];
    Returns *returns[2];
    char *waiting;               /* out of credits with none on the way back */
    double *stall_since, *stall_s, *credit_ret;  /* stall_since: NAN when not stalled */
    PyObject *ret_src;           /* the fabric's credit_return_s list: read when a path is first seen */
    double last_credit_return;
    double now;
    i64 events;
    int pending_arrival;        /* an arrival returned: its event's last step is still to do */
    i64 cont_link; double cont_end;
} Core;

static int grow(void **p, i64 *cap, i64 need, size_t size) {
    if (need <= *cap) return 0;
    i64 c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) { PyErr_NoMemory(); return -1; }
    *p = q;
    *cap = c;
    return 0;
}

/* -- the event heap: (t, prio, seq) ascending -- */
static inline int ev_less(const Event *a, const Event *b) {
    if (a->t != b->t) return a->t < b->t;
    if (a->prio != b->prio) return a->prio < b->prio;
    return a->seq < b->seq;
}

static int push(Core *c, double t, int prio, i64 ev) {
    if (grow((void **)&c->heap, &c->capheap, c->nheap + 1, sizeof(Event)) < 0) return -1;
    Event e = {t, c->seq++, ev, prio};
    i64 i = c->nheap++;
    while (i > 0) {
        const i64 p = (i - 1) / 2;
        if (!ev_less(&e, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = e;
    return 0;
}

static Event pop(Core *c) {
    Event top = c->heap[0], last = c->heap[--c->nheap];
    i64 i = 0, n = c->nheap;
    for (;;) {
        i64 l = 2 * i + 1;
        if (l >= n) break;
        if (l + 1 < n && ev_less(&c->heap[l + 1], &c->heap[l])) l++;
        if (!ev_less(&c->heap[l], &last)) break;
        c->heap[i] = c->heap[l];
        i = l;
    }
    if (n > 0) c->heap[i] = last;
    return top;
}

/* -- port queues -- */
static inline i64 q_at(const Queue *q, i64 k) { return q->buf[(q->head + k) & (q->cap - 1)]; }

/* room for one more element in a full ring of `size`-byte elements (a port queue or a credit
 * queue): twice the capacity (a power of two), the elements unwrapped to the front */
static int ring_reserve(void **buf, i64 *head, i64 len, i64 *cap, size_t size) {
    if (len < *cap) return 0;
    const i64 ncap = *cap ? 2 * *cap : 8;
    char *b = malloc(size * (size_t)ncap);
    if (!b) { PyErr_NoMemory(); return -1; }
    const i64 first = *cap - *head < len ? *cap - *head : len;  /* elements before the wrap */
    if (len) {
        memcpy(b, (char *)*buf + size * (size_t)*head, size * (size_t)first);
        memcpy(b + size * (size_t)first, *buf, size * (size_t)(len - first));
    }
    free(*buf);
    *buf = b; *head = 0; *cap = ncap;
    return 0;
}

static int q_reserve(Queue *q) { return ring_reserve((void **)&q->buf, &q->head, q->len, &q->cap, sizeof(i64)); }

static inline void q_popleft(Queue *q) { q->head = (q->head + 1) & (q->cap - 1); q->len--; }

/* append, or (rare) insert after the last unit that is ready no later: Engine._insert_sorted */
static int q_insert(Core *c, Queue *q, i64 u) {
    if (q_reserve(q) < 0) return -1;
    const double ready = c->units[u].ready;
    i64 i = q->len;
    if (i > 0 && c->units[q_at(q, i - 1)].ready > ready) {
        while (i > 0 && c->units[q_at(q, i - 1)].ready > ready) i--;
        for (i64 k = q->len; k > i; k--) q->buf[(q->head + k) & (q->cap - 1)] = q->buf[(q->head + k - 1) & (q->cap - 1)];
    }
    q->buf[(q->head + i) & (q->cap - 1)] = u;
    q->len++;
    return 0;
}

/* -- units -- */
static i64 unit_new(Core *c) {
    if (c->free_unit >= 0) {
        const i64 u = c->free_unit;
        c->free_unit = c->units[u].next_free;
        return u;
    }
    if (grow((void **)&c->units, &c->capunits, c->nunits + 1, sizeof(Unit)) < 0) return -1;
    return c->nunits++;
}

static inline void unit_free(Core *c, i64 u) { c->units[u].next_free = c->free_unit; c->free_unit = (int32_t)u; }

/* make `link` wake at t or earlier, not before now (Engine._wake_by) */
static inline int wake_by(Core *c, i64 link, double t, double now) {
    const double w = c->wake_at[link];
    if (now <= w && w <= t) return 0;
    c->wake_at[link] = t;
    return push(c, t, 1, link);
}

/* a unit joins the queue of `link`, which wakes when the unit can start (the tail of
 * Engine._enqueue_all, and the downstream hand-over of the loop) */
static int enqueue_at(Core *c, i64 link, i64 u, double now) {
    Queue *q = &c->q[link];
    if (q_insert(c, q, u) < 0) return -1;
    double t = c->busy_until[link];
    const double head = c->units[q_at(q, 0)].ready;
    if (head > t) t = head;
    if (t < now) t = now;
    return wake_by(c, link, t, now);
}

/* the last hop of `size` bytes of message m ends at `arrival`; when that was the message's last
 * byte: 2 (*x = m), and the rest of the event -- re-waking `link` at `end` -- waits for
 * settle_arrival; else 0 */
static int deliver(Core *c, i64 m, i64 size, double arrival, i64 link, double end, i64 *x) {
    c->msgs[m].rem -= size;
    if (arrival > c->msgs[m].arrival) c->msgs[m].arrival = arrival;
    if (c->msgs[m].rem > 0) return 0;
    c->pending_arrival = 1;
    c->cont_link = link;
    c->cont_end = end;
    *x = m;
    return 2;
}

/* -- credits (Engine._credit_back, the credit part of Engine._try_start) -- */
static inline Credit *r_at(const Returns *r, i64 k) { return &r->buf[(r->head + k) & (r->cap - 1)]; }

static int credit_back(Core *c, int ch, i64 link, double t, i64 n, double now) {
    Returns *r = &c->returns[ch][link];
    if (ring_reserve((void **)&r->buf, &r->head, r->len, &r->cap, sizeof(Credit)) < 0) return -1;
    i64 i = r->len;  /* after every return due no later (bisect.insort on (t, n) orders only by t here) */
    while (i > 0 && r_at(r, i - 1)->t > t) { *r_at(r, i) = *r_at(r, i - 1); i--; }
    r_at(r, i)->t = t;
    r_at(r, i)->n = n;
    r->len++;
    if (t > c->last_credit_return) c->last_credit_return = t;
    if (c->waiting[link]) {
        c->waiting[link] = 0;
        return wake_by(c, link, t > now ? t : now, now);
    }
    return 0;
}

/* Engine._try_start: the port of `link` sends what its credits allow; 2 when a message arrived
 * (the rest of the event is left for settle_arrival), 0 otherwise, -1 on error */
static int try_start(Core *c, i64 link, double now, i64 *x) {
    const double bu = c->busy_until[link];
    if (bu > now) return wake_by(c, link, bu, now);
    Queue *q = &c->q[link];
    if (!q->len) return 0;
    const i64 ui = q_at(q, 0);
    if (c->units[ui].ready > now) return wake_by(c, link, c->units[ui].ready, now);
    const i64 dl = c->dl;
    i64 nfl, size;
    if (c->flit) {
        nfl = 1;
        size = c->units[ui].nflits > 1 ? dl : c->units[ui].last;
    } else {
        nfl = c->units[ui].nflits;
        size = c->units[ui].nbytes;
    }
    const i64 m = c->units[ui].msg;
    const int ch = c->msgs[m].channel;
    Returns *rq = &c->returns[ch][link];
    i64 cr = c->credits[ch][link];
    while (rq->len && r_at(rq, 0)->t <= now) {
        cr += r_at(rq, 0)->n;
        rq->head = (rq->head + 1) & (rq->cap - 1);
        rq->len--;
    }
    if (cr < 1) {
        c->credits[ch][link] = cr;
        if (isnan(c->stall_since[link])) c->stall_since[link] = now;
        if (rq->len) return wake_by(c, link, r_at(rq, 0)->t, now);
        c->waiting[link] = 1;
        return 0;
    }
    if (!isnan(c->stall_since[link])) {
        c->stall_s[link] += now - c->stall_since[link];
        c->stall_since[link] = NAN;
    }
    if (nfl > cr || nfl > c->chunk_flits) {  /* at most 1/16 of the buffer per event (optimized mode) */
        nfl = cr < c->chunk_flits ? cr : c->chunk_flits;
        size = nfl * dl;
    }
    c->credits[ch][link] = cr - nfl;
    const double inv = c->inv_rate[link];
    const double ser = (double)size * inv, end = now + ser;
    c->busy_until[link] = end;
    c->bytes_sent[link] += size;
    c->busy_s[link] += ser;
    const int whole = nfl == c->units[ui].nflits;
    const i64 chunk_last = (whole || (c->flit && c->units[ui].nflits == 1)) ? c->units[ui].last : dl;
    if (whole) q_popleft(q);
    else { c->units[ui].nflits -= nfl; c->units[ui].nbytes -= size; }
    const i64 path = c->units[ui].path, hop = c->units[ui].hop;
    const i64 *pl = c->path_links + c->path_off[path];
    const i64 plen = c->path_off[path + 1] - c->path_off[path];
    const double after = c->after[link];
    if (hop > 0) {  /* the data leaves the previous link's buffer as it goes out here */
        const i64 prev = pl[hop - 1];
        if (credit_back(c, ch, prev, end - (double)chunk_last * inv + c->credit_ret[prev], nfl, now) < 0) return -1;
    }
    if (hop + 1 < plen) {
        const double first = (double)(nfl > 1 ? dl : size) * inv;
        i64 nx = ui;
        if (!whole) {
            nx = unit_new(c);
            if (nx < 0) return -1;
            Unit *f = &c->units[nx];
            f->msg = (int32_t)m; f->path = (int32_t)path; f->nbytes = size; f->nflits = nfl; f->last = chunk_last;
        }
        c->units[nx].ready = now + first + after;
        c->units[nx].hop = (int32_t)(hop + 1);
        if (enqueue_at(c, pl[hop + 1], nx, now) < 0) return -1;
    } else {
        const double arrival = end + after;
        if (credit_back(c, ch, link, arrival + c->credit_ret[link], nfl, now) < 0) return -1;
        if (whole) unit_free(c, ui);
        if (deliver(c, m, size, arrival, link, end, x)) return 2;
    }
    if (q->len) return wake_by(c, link, end, now);
    return 0;
}

/* the rest of an arrival's event: the port sent, so it wakes when it is free again */
static int settle_arrival(Core *c) {
    if (!c->pending_arrival) return 0;
    c->pending_arrival = 0;
    if (c->q[c->cont_link].len) return wake_by(c, c->cont_link, c->cont_end, c->now);
    return 0;
}

/* Engine._run_unlimited's body (Engine._run_limited's with credits); returns 0 (no events left), 1 (callback, *x = its id) or 2
 * (arrival, *x = the message) with c->now the event's time */
static int step(Core *c, i64 *x) {
    if (settle_arrival(c) < 0) return -1;
    const i64 dl = c->dl;
    while (c->nheap) {
        const Event e = pop(c);
        const double now = e.t;
        c->now = now;
        c->events++;
        if (e.ev < 0) { *x = -e.ev; return 1; }
        const i64 link = e.ev;
        if (c->wake_at[link] == now) c->wake_at[link] = INFINITY;
        if (c->limited) {
            const int r = try_start(c, link, now, x);
            if (r != 0) return r;
            continue;
        }
        const double bu = c->busy_until[link];
        Queue *pq = &c->q[link];
        if (bu > now || !pq->len || c->units[q_at(pq, 0)].ready > now) {  /* busy, empty, head not ready */
            if (bu > now) { if (wake_by(c, link, bu, now) < 0) return -1; }
            else if (pq->len) { if (wake_by(c, link, c->units[q_at(pq, 0)].ready, now) < 0) return -1; }
            continue;
        }
        const i64 ui = q_at(pq, 0);
        const double inv = c->inv_rate[link], after = c->after[link];
        const i64 path = c->units[ui].path, hop = c->units[ui].hop + 1;
        const i64 plen = c->path_off[path + 1] - c->path_off[path];
        i64 size, nxt = -1, done_unit = -1;
        double ser, end;
        if (c->flit && c->units[ui].nflits > 1) {  /* one DL flit leaves, the unit stays at the head */
            size = dl;
            c->units[ui].nflits -= 1;
            c->units[ui].nbytes -= size;
            ser = (double)size * inv;
            end = now + ser;
            if (hop < plen) {
                nxt = unit_new(c);
                if (nxt < 0) return -1;
                Unit *f = &c->units[nxt];
                f->ready = end + after; f->msg = c->units[ui].msg; f->path = (int32_t)path; f->hop = (int32_t)hop;
                f->nbytes = size; f->nflits = 1; f->last = size;
            } else {
                done_unit = -2;  /* the flit reached its destination; the unit stays queued */
            }
        } else {
            q_popleft(pq);
            Unit *u = &c->units[ui];
            size = u->nbytes;
            ser = (double)size * inv;
            end = now + ser;
            if (hop < plen) {
                u->ready = now + ((double)(u->nflits > 1 ? dl : size) * inv) + after;
                u->hop = (int32_t)hop;
                nxt = ui;
            } else {
                done_unit = ui;
            }
        }
        c->busy_until[link] = end;
        c->bytes_sent[link] += size;
        c->busy_s[link] += ser;
        if (nxt >= 0) {
            if (enqueue_at(c, c->path_links[c->path_off[path] + hop], nxt, now) < 0) return -1;
        } else {
            const i64 m = c->units[ui].msg;
            if (done_unit >= 0) unit_free(c, done_unit);
            if (deliver(c, m, size, end + after, link, end, x)) return 2;
        }
        if (pq->len && wake_by(c, link, end, now) < 0) return -1;
    }
    return 0;
}

/* -- paths, interned by their links -- */
static inline uint64_t path_hash(const i64 *l, i64 m) {
    uint64_t h = 1469598103934665603ull;
    for (i64 k = 0; k < m; k++) h = (h ^ (uint64_t)l[k]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int ptab_put(Core *c, i64 id) {
    const i64 *l = c->path_links + c->path_off[id];
    const i64 m = c->path_off[id + 1] - c->path_off[id];
    i64 i = (i64)(path_hash(l, m) & (uint64_t)(c->ptab_cap - 1));
    while (c->ptab[i] >= 0) i = (i + 1) & (c->ptab_cap - 1);
    c->ptab[i] = id;
    return 0;
}

static int ptab_grow(Core *c) {
    if (2 * (c->npaths + 1) <= c->ptab_cap) return 0;
    const i64 cap = c->ptab_cap ? 2 * c->ptab_cap : 1024;
    i64 *t = malloc(sizeof(i64) * (size_t)cap);
    if (!t) { PyErr_NoMemory(); return -1; }
    for (i64 k = 0; k < cap; k++) t[k] = -1;
    free(c->ptab);
    c->ptab = t; c->ptab_cap = cap;
    for (i64 id = 0; id < c->npaths; id++) ptab_put(c, id);
    return 0;
}

/* the id of the path with links l[0 .. m-1], registered (with the links' after_s and
 * credit_return_s read from the fabric's lists: an OCS fabric fills a link's entries when it
 * first routes a circuit through it, which is before its first path comes here) when new; -1 on
 * error */
static i64 path_id(Core *c, const i64 *l, i64 m) {
    if (ptab_grow(c) < 0) return -1;
    i64 i = (i64)(path_hash(l, m) & (uint64_t)(c->ptab_cap - 1));
    for (; c->ptab[i] >= 0; i = (i + 1) & (c->ptab_cap - 1)) {
        const i64 id = c->ptab[i];
        if (c->path_off[id + 1] - c->path_off[id] == m && !memcmp(c->path_links + c->path_off[id], l, sizeof(i64) * (size_t)m))
            return id;
    }
    if (grow((void **)&c->path_links, &c->caplinks, c->nlinks_used + m, sizeof(i64)) < 0 ||
        grow((void **)&c->path_off, &c->cappaths, c->npaths + 2, sizeof(i64)) < 0) return -1;
    for (i64 k = 0; k < m; k++) {
        if (l[k] < 0 || l[k] >= c->n) {
            PyErr_Format(PyExc_ValueError, "link %lld of a path is not one of the %lld links", (long long)l[k], (long long)c->n);
            return -1;
        }
        if (l[k] < PyList_GET_SIZE(c->after_src) && l[k] < PyList_GET_SIZE(c->ret_src)) {
            const double a = PyFloat_AsDouble(PyList_GET_ITEM(c->after_src, l[k]));
            const double r = PyFloat_AsDouble(PyList_GET_ITEM(c->ret_src, l[k]));
            if (PyErr_Occurred()) return -1;
            c->after[l[k]] = a;
            c->credit_ret[l[k]] = r;
        }
        c->path_links[c->nlinks_used + k] = l[k];
    }
    c->nlinks_used += m;
    c->path_off[c->npaths + 1] = c->nlinks_used;
    c->ptab[i] = c->npaths;
    return c->npaths++;
}

static i64 msg_new(Core *c, i64 wire, int channel) {
    i64 m;
    if (c->nfree) m = c->msg_free[--c->nfree];
    else {
        if (grow((void **)&c->msgs, &c->capmsg, c->nmsg + 1, sizeof(Msg)) < 0 ||
            grow((void **)&c->msg_free, &c->capfree, c->nmsg + 1, sizeof(i64)) < 0) return -1;  /* room to free them all */
        m = c->nmsg++;
    }
    c->msgs[m].rem = wire;
    c->msgs[m].arrival = 0.0;
    c->msgs[m].channel = channel;
    return m;
}

/* -- Python interface -- */
static void Core_dealloc(Core *c) {
    if (c->q)
        for (i64 k = 0; k < c->n; k++) free(c->q[k].buf);
    free(c->q); free(c->inv_rate); free(c->after); free(c->busy_until); free(c->wake_at); free(c->busy_s);
    free(c->bytes_sent); free(c->heap); free(c->units); free(c->path_off); free(c->path_links);
    free(c->msgs); free(c->msg_free); free(c->ptab);
    for (int ch = 0; ch < 2; ch++) {
        if (c->returns[ch])
            for (i64 k = 0; k < c->n; k++) free(c->returns[ch][k].buf);
        free(c->returns[ch]); free(c->credits[ch]);
    }
    free(c->waiting); free(c->stall_since); free(c->stall_s); free(c->credit_ret);
    Py_XDECREF(c->after_src); Py_XDECREF(c->ret_src);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int read_floats(PyObject *seq, i64 n, double *out, const char *what) {
    PyObject *f = PySequence_Fast(seq, what);
    if (!f) return -1;
    if (PySequence_Fast_GET_SIZE(f) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %lld values for %lld links", what, (long long)PySequence_Fast_GET_SIZE(f),
                     (long long)n);
        Py_DECREF(f);
        return -1;
    }
    for (i64 k = 0; k < n; k++) {
        out[k] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(f, k));
        if (out[k] == -1.0 && PyErr_Occurred()) { Py_DECREF(f); return -1; }
    }
    Py_DECREF(f);
    return 0;
}

/* Core(n_links, inv_rate, after_s, flit, dl_bytes, buffer_flits (< 0: unlimited), chunk_flits, credit_return_s) */
static int Core_init(Core *c, PyObject *args, PyObject *kw) {
    (void)kw;
    long long n, dl, cap, chunk;
    PyObject *inv, *after, *ret;
    int flit;
    if (!PyArg_ParseTuple(args, "LOOpLLLO", &n, &inv, &after, &flit, &dl, &cap, &chunk, &ret)) return -1;
    if (n < 1 || dl < 1 || chunk < 1) {
        PyErr_SetString(PyExc_ValueError, "need n_links >= 1, dl_bytes >= 1 and chunk_flits >= 1");
        return -1;
    }
    c->n = n; c->flit = flit; c->dl = dl;
    c->inv_rate = malloc(sizeof(double) * (size_t)n); c->after = malloc(sizeof(double) * (size_t)n);
    c->busy_until = calloc((size_t)n, sizeof(double)); c->busy_s = calloc((size_t)n, sizeof(double));
    c->wake_at = malloc(sizeof(double) * (size_t)n); c->bytes_sent = calloc((size_t)n, sizeof(i64));
    c->q = calloc((size_t)n, sizeof(Queue));
    c->path_off = malloc(sizeof(i64) * 16); c->cappaths = 16;
    if (!c->inv_rate || !c->after || !c->busy_until || !c->busy_s || !c->wake_at || !c->bytes_sent || !c->q ||
        !c->path_off) { PyErr_NoMemory(); return -1; }
    c->path_off[0] = 0;
    for (i64 k = 0; k < n; k++) c->wake_at[k] = INFINITY;
    c->free_unit = -1;
    if (read_floats(inv, n, c->inv_rate, "inv_rate") < 0 || read_floats(after, n, c->after, "after_s") < 0) return -1;
    if (!PyList_Check(after) || !PyList_Check(ret)) {
        PyErr_SetString(PyExc_TypeError, "after_s and credit_return_s must be the fabric's lists");
        return -1;
    }
    Py_INCREF(after);
    Py_XSETREF(c->after_src, after);
    Py_INCREF(ret);
    Py_XSETREF(c->ret_src, ret);
    c->limited = cap >= 0;
    c->chunk_flits = chunk;
    c->waiting = calloc((size_t)n, 1);
    c->stall_since = malloc(sizeof(double) * (size_t)n); c->stall_s = calloc((size_t)n, sizeof(double));
    c->credit_ret = malloc(sizeof(double) * (size_t)n);
    for (int ch = 0; ch < 2; ch++) {
        c->credits[ch] = malloc(sizeof(i64) * (size_t)n);
        c->returns[ch] = calloc((size_t)n, sizeof(Returns));
        if (!c->credits[ch] || !c->returns[ch]) { PyErr_NoMemory(); return -1; }
        for (i64 k = 0; k < n; k++) c->credits[ch][k] = cap;
    }
    if (!c->waiting || !c->stall_since || !c->stall_s || !c->credit_ret) { PyErr_NoMemory(); return -1; }
    for (i64 k = 0; k < n; k++) c->stall_since[k] = NAN;
    return read_floats(ret, n, c->credit_ret, "credit_return_s");
}

/* enqueue_all(now, ready, wire bytes, shares, paths, channel) -> message id: Engine._enqueue_all --
 * a new message, and one unit per (bytes, flits, last-flit bytes) share queued at the first link
 * of its path, in order */
static PyObject *Core_enqueue_all(Core *c, PyObject *const *a, Py_ssize_t na) {
    if (na != 6) { PyErr_SetString(PyExc_TypeError, "enqueue_all takes 6 arguments"); return NULL; }
    const double now = PyFloat_AsDouble(a[0]), ready = PyFloat_AsDouble(a[1]);
    const long long wire = PyLong_AsLongLong(a[2]), channel = PyLong_AsLongLong(a[5]);
    if (PyErr_Occurred()) return NULL;
    if (channel != 0 && channel != 1) { PyErr_SetString(PyExc_ValueError, "channel is 0 (request) or 1 (response)"); return NULL; }
    PyObject *shares = PySequence_Fast(a[3], "shares"), *paths = shares ? PySequence_Fast(a[4], "paths") : NULL;
    if (!paths) { Py_XDECREF(shares); return NULL; }
    const i64 m = msg_new(c, wire, (int)channel);
    i64 ns = PySequence_Fast_GET_SIZE(shares);
    if (PySequence_Fast_GET_SIZE(paths) < ns) ns = PySequence_Fast_GET_SIZE(paths);  /* zip */
    if (m < 0) goto fail;
    for (i64 k = 0; k < ns; k++) {
        PyObject *sh = PySequence_Fast_GET_ITEM(shares, k), *pt = PySequence_Fast_GET_ITEM(paths, k);
        if (!PyTuple_Check(sh) || PyTuple_GET_SIZE(sh) != 3 || !PyTuple_Check(pt) || PyTuple_GET_SIZE(pt) < 1 ||
            PyTuple_GET_SIZE(pt) > 64) {
            PyErr_SetString(PyExc_TypeError, "enqueue_all: a share is (bytes, flits, last) and a path a tuple of 1-64 links");
            goto fail;
        }
        i64 links[64];
        const i64 len = PyTuple_GET_SIZE(pt);
        for (i64 h = 0; h < len; h++) links[h] = PyLong_AsLongLong(PyTuple_GET_ITEM(pt, h));
        const long long nbytes = PyLong_AsLongLong(PyTuple_GET_ITEM(sh, 0)), nflits = PyLong_AsLongLong(PyTuple_GET_ITEM(sh, 1)),
                        last = PyLong_AsLongLong(PyTuple_GET_ITEM(sh, 2));
        if (PyErr_Occurred()) goto fail;
        const i64 pid = path_id(c, links, len);
        if (pid < 0) goto fail;
        const i64 u = unit_new(c);
        if (u < 0) goto fail;
        Unit *un = &c->units[u];
        un->ready = ready; un->msg = (int32_t)m; un->path = (int32_t)pid; un->hop = 0;
        un->nbytes = nbytes; un->nflits = nflits; un->last = last;
        if (enqueue_at(c, links[0], u, now) < 0) goto fail;
    }
    Py_DECREF(shares); Py_DECREF(paths);
    return PyLong_FromLongLong(m);
fail:
    Py_DECREF(shares); Py_DECREF(paths);
    return NULL;
}

/* at(t, callback id, urgent) */
static PyObject *Core_at(Core *c, PyObject *const *a, Py_ssize_t na) {
    if (na != 3) { PyErr_SetString(PyExc_TypeError, "at takes 3 arguments"); return NULL; }
    const double t = PyFloat_AsDouble(a[0]);
    const long long cid = PyLong_AsLongLong(a[1]);
    const int urgent = PyObject_IsTrue(a[2]);
    if (PyErr_Occurred()) return NULL;
    if (cid < 1) { PyErr_SetString(PyExc_ValueError, "callback ids start at 1"); return NULL; }
    if (push(c, t, urgent ? 0 : 1, -cid) < 0) return NULL;
    Py_RETURN_NONE;
}

/* run() -> (0, now, 0, 0.0, 0) nothing left | (1, now, callback id, 0.0, 0) | (2, now, message, arrival, remaining) */
static PyObject *Core_run(Core *c, PyObject *unused) {
    (void)unused;
    i64 x = 0;
    const int code = step(c, &x);
    if (code < 0) return NULL;
    if (code == 2) {
        c->msg_free[c->nfree++] = x;  /* arrived: its id may be reused by what the handler sends */
        return Py_BuildValue("(idLdL)", code, c->now, (long long)x, c->msgs[x].arrival, (long long)c->msgs[x].rem);
    }
    return Py_BuildValue("(idLdL)", code, c->now, (long long)x, 0.0, 0LL);
}

/* settle(): finish an arrival's event without running further (a run stopped by its handler) */
static PyObject *Core_settle(Core *c, PyObject *unused) {
    (void)unused;
    if (settle_arrival(c) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Core_pending(Core *c, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(c->nheap > 0);
}

/* idle(now): no unit queued at any port and none still on a link */
static PyObject *Core_idle(Core *c, PyObject *arg) {
    const double now = PyFloat_AsDouble(arg);
    if (now == -1.0 && PyErr_Occurred()) return NULL;
    for (i64 k = 0; k < c->n; k++)
        if (c->q[k].len || c->busy_until[k] > now) Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

/* stats() -> (bytes, busy seconds, credit-stall seconds) per link */
static PyObject *Core_stats(Core *c, PyObject *unused) {
    (void)unused;
    PyObject *b = PyList_New(c->n), *s = PyList_New(c->n), *st = PyList_New(c->n);
    if (!b || !s || !st) { Py_XDECREF(b); Py_XDECREF(s); Py_XDECREF(st); return NULL; }
    for (i64 k = 0; k < c->n; k++) {
        PyList_SET_ITEM(b, k, PyLong_FromLongLong(c->bytes_sent[k]));
        PyList_SET_ITEM(s, k, PyFloat_FromDouble(c->busy_s[k]));
        PyList_SET_ITEM(st, k, PyFloat_FromDouble(c->stall_s[k]));
    }
    return Py_BuildValue("(NNN)", b, s, st);
}

static PyObject *Core_last_credit_return(Core *c, PyObject *unused) {
    (void)unused;
    return PyFloat_FromDouble(c->last_credit_return);
}

static PyObject *Core_events(Core *c, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(c->events);
}

static PyMethodDef Core_methods[] = {
    {"enqueue_all", (PyCFunction)(void (*)(void))Core_enqueue_all, METH_FASTCALL,
     "A message's shares queued at the first links of their paths; returns its id."},
    {"at", (PyCFunction)(void (*)(void))Core_at, METH_FASTCALL, "Schedule callback id at t (urgent or normal)."},
    {"run", (PyCFunction)Core_run, METH_NOARGS, "Run until a callback, an arrival or the end."},
    {"settle", (PyCFunction)Core_settle, METH_NOARGS, "Finish a returned arrival's event."},
    {"pending", (PyCFunction)Core_pending, METH_NOARGS, "Whether events are queued."},
    {"idle", (PyCFunction)Core_idle, METH_O, "No data queued or on a link at time now."},
    {"stats", (PyCFunction)Core_stats, METH_NOARGS, "(bytes, busy seconds, stall seconds) per link."},
    {"last_credit_return", (PyCFunction)Core_last_credit_return, METH_NOARGS, "When the last credit gets back."},
    {"events", (PyCFunction)Core_events, METH_NOARGS, "Events run so far."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_engine_core.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Simlette's ports: event queue, port queues, units, credits.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
};

static PyObject *py_abi(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyLong_FromLong(ABI);
}

static PyMethodDef module_methods[] = {
    {"abi", py_abi, METH_NOARGS, "The interface's version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_engine_core",
                                    "Simlette's port loop without credits, compiled.", -1, module_methods};

PyMODINIT_FUNC PyInit__engine_core(void) {
    if (PyType_Ready(&CoreType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

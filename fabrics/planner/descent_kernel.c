/* The shared-host planner's coordinate descent over one bit partition (paper 003, Appendices
 * A.1-A.2, A.7) as one compiled loop (-O3, no FMA contraction, no -march).
 *
 * A port of the descent branch of fabrics/planner/shared_host.py (_search_partition) with the
 * leaf evaluation of _LeafSearch.leaf, its bounds (joint_bound, _pair_bound), the generator atoms
 * (_atoms) and the multiplicity greedy (_LeafSearch._raise): the same float operations in the
 * same order, so plans are bit-identical (tests/unit/test_fabrics_planner_kernel.py compares the
 * two paths). What stays in Python is reached through two callbacks, each called once per new
 * value: row_fn(r, j, fb) builds a leaf row (axis r's option j with its supported set fb) and
 * time_fn(vec, p) prices one axis-local generator set at multiplicity p (Eq. 1). Rows live in
 * RowTable objects (one per axis and bit block, kept by the request), times in a TimeTable (kept
 * per process, per λ and R), so they are shared between partitions as in the Python path.
 * The greedy is not memoised here: it is a pure function of the leaf, recomputing it is cheap.
 *
 * Generator sets are bitsets of nw 64-bit words (bit g = host mask g). Built by setup.py as the
 * optional extension fabrics.planner._descent_kernel; fabrics/planner/descent.py loads it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t u64;

#define DK_ABI 2
#define MAX_AXES 8     /* active axes of a request (picks are packed 8 bits each in a u64) */
#define MAX_OPTIONS 255
#define MAX_WORDS 64   /* bitsets of up to 4096 masks */

/* ---------------------------------------------------------------- bitsets */

/* SWAR popcount: no -march, so __builtin_popcountll would be a library call */
static inline int popcount64(u64 x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
}

static inline int bs_count(const u64 *a, int nw) {
    int n = 0;
    for (int i = 0; i < nw; i++) n += popcount64(a[i]);
    return n;
}
static inline int bs_equal(const u64 *a, const u64 *b, int nw) {
    for (int i = 0; i < nw; i++) if (a[i] != b[i]) return 0;
    return 1;
}
static inline int bs_empty(const u64 *a, int nw) {
    for (int i = 0; i < nw; i++) if (a[i]) return 0;
    return 1;
}
static inline u64 mix(u64 h, u64 x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

/* ---------------------------------------------------------------- maps keyed by bitset words */

typedef struct {
    int kw; /* words per key */
    Py_ssize_t n, cap;
    u64 *keys;
    Py_ssize_t *vals; /* -1: empty slot */
} Map;

static int map_init(Map *m, int kw) {
    m->kw = kw, m->n = 0, m->cap = 64;
    m->keys = calloc((size_t)m->cap * kw, 8);
    m->vals = malloc((size_t)m->cap * sizeof(Py_ssize_t));
    if (!m->keys || !m->vals) return -1;
    for (Py_ssize_t i = 0; i < m->cap; i++) m->vals[i] = -1;
    return 0;
}

static void map_free(Map *m) {
    free(m->keys);
    free(m->vals);
    m->keys = NULL, m->vals = NULL, m->cap = m->n = 0;
}

/* the slot holding ``key`` (*found = 1) or the empty slot where it goes */
static Py_ssize_t map_slot(const Map *m, const u64 *key, int *found) {
    u64 h = 0x84222325cbf29ce4ULL; /* words folded with rotations, then murmur3's finaliser */
    for (int i = 0; i < m->kw; i++) {
        int k = (7 * i) & 63;
        h ^= k ? (key[i] << k) | (key[i] >> (64 - k)) : key[i];
    }
    h ^= h >> 33, h *= 0xff51afd7ed558ccdULL, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ULL, h ^= h >> 33;
    Py_ssize_t mask = m->cap - 1, s = (Py_ssize_t)(h & (u64)mask);
    while (m->vals[s] >= 0) {
        if (bs_equal(m->keys + (size_t)s * m->kw, key, m->kw)) { *found = 1; return s; }
        s = (s + 1) & mask;
    }
    *found = 0;
    return s;
}

static int map_put(Map *m, const u64 *key, Py_ssize_t val) {
    if (2 * (m->n + 1) > m->cap) {
        Map grown;
        grown.kw = m->kw, grown.n = 0, grown.cap = 2 * m->cap;
        grown.keys = calloc((size_t)grown.cap * m->kw, 8);
        grown.vals = malloc((size_t)grown.cap * sizeof(Py_ssize_t));
        if (!grown.keys || !grown.vals) { free(grown.keys); free(grown.vals); return -1; }
        for (Py_ssize_t i = 0; i < grown.cap; i++) grown.vals[i] = -1;
        for (Py_ssize_t i = 0; i < m->cap; i++) {
            if (m->vals[i] < 0) continue;
            int found;
            Py_ssize_t s = map_slot(&grown, m->keys + (size_t)i * m->kw, &found);
            memcpy(grown.keys + (size_t)s * m->kw, m->keys + (size_t)i * m->kw, (size_t)m->kw * 8);
            grown.vals[s] = m->vals[i];
        }
        grown.n = m->n;
        map_free(m);
        *m = grown;
    }
    int found;
    Py_ssize_t s = map_slot(m, key, &found);
    if (!found) {
        memcpy(m->keys + (size_t)s * m->kw, key, (size_t)m->kw * 8);
        m->n++;
    }
    m->vals[s] = val;
    return 0;
}

/* ---------------------------------------------------------------- times (Eq. 1 per set and p) */

typedef struct {
    double *t;
    int *h; /* phases of the fastest schedule; -1: no valid schedule (T = inf); -2: not priced yet */
    Py_ssize_t cap;
} TimeVec;

typedef struct {
    PyObject_HEAD
    TimeVec *vec; /* per axis-local generator set id */
    Py_ssize_t n;
} TimeTable;

static void timetable_dealloc(TimeTable *self) {
    for (Py_ssize_t i = 0; i < self->n; i++) {
        free(self->vec[i].t);
        free(self->vec[i].h);
    }
    free(self->vec);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject TimeTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fabrics.planner._descent_kernel.TimeTable",
    .tp_basicsize = sizeof(TimeTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)timetable_dealloc,
    .tp_doc = "(T, h) of one axis (its key, λ and R) per (axis-local generator set id, multiplicity p).",
};

/* ---------------------------------------------------------------- supported sets (σ-independent) */

typedef struct {
    PyObject_HEAD
    Map map; /* supported set (nw words) -> set id, or -1: the axis cannot run on it */
    int nw;
} FullTable;

static void fulltable_dealloc(FullTable *self) {
    map_free(&self->map);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int fulltable_init(FullTable *self, PyObject *args, PyObject *kwds) {
    int nw;
    if (!PyArg_ParseTuple(args, "i", &nw)) return -1;
    if (nw < 1 || nw > MAX_WORDS) {
        PyErr_SetString(PyExc_ValueError, "FullTable(nw): nw in 1..64 words");
        return -1;
    }
    map_free(&self->map);
    self->nw = nw;
    if (map_init(&self->map, nw) < 0) { PyErr_NoMemory(); return -1; }
    return 0;
}

static PyTypeObject FullTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fabrics.planner._descent_kernel.FullTable",
    .tp_basicsize = sizeof(FullTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)fulltable_init,
    .tp_dealloc = (destructor)fulltable_dealloc,
    .tp_doc = "FullTable(nw): the axis-local set id of every supported set met on one bit block.",
};

/* ---------------------------------------------------------------- rows */

typedef struct {
    double w, wt1, wfloor; /* weight, w·T at p = 1, w·h·λ */
    Py_ssize_t own_set, full_set; /* set ids; full_set < 0: the axis runs on its own set only */
    int own_len, full_len;
    double *lb; /* w·T at the most multiplicity ``spare`` ports allow, per spare (NaN: not yet) */
} Row;

typedef struct {
    PyObject_HEAD
    int nw, ports;
    Map map; /* (own set, supported set) -> index in rows */
    Row **rows; /* each row allocated once: pointers to it stay valid */
    Py_ssize_t n, cap;
} RowTable;

static void rowtable_free_rows(RowTable *self) {
    for (Py_ssize_t i = 0; i < self->n; i++) {
        free(self->rows[i]->lb);
        free(self->rows[i]);
    }
    free(self->rows);
    self->rows = NULL, self->n = self->cap = 0;
    map_free(&self->map);
}

static void rowtable_dealloc(RowTable *self) {
    rowtable_free_rows(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int rowtable_init(RowTable *self, PyObject *args, PyObject *kwds) {
    int nw, ports;
    if (!PyArg_ParseTuple(args, "ii", &nw, &ports)) return -1;
    if (nw < 1 || nw > MAX_WORDS || ports < 1) {
        PyErr_SetString(PyExc_ValueError, "RowTable(nw, ports): nw in 1..64 words, ports >= 1");
        return -1;
    }
    rowtable_free_rows(self);
    self->nw = nw;
    self->ports = ports;
    if (map_init(&self->map, 2 * nw) < 0) { PyErr_NoMemory(); return -1; }
    return 0;
}

static PyTypeObject RowTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fabrics.planner._descent_kernel.RowTable",
    .tp_basicsize = sizeof(RowTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)rowtable_init,
    .tp_dealloc = (destructor)rowtable_dealloc,
    .tp_doc = "RowTable(nw, ports): leaf rows of one axis of one request on one bit block, keyed by (own set, supported set).",
};

/* ---------------------------------------------------------------- one partition's search state */

/* A leaf's generator atoms (at most one per host generator, so budget + 1 of each), and the
 * greedy's multiplicities per atom; per call, not static: a callback may let another thread in. */
typedef struct {
    int n, *size, *pg, *trial_pg, *best_pg;
    unsigned *own, *full; /* rows owning / supporting the atom, bit r */
    u64 *bits; /* n sets of nw words */
} Atoms;

typedef struct {
    int A, nw, budget, min_step;
    double lam, w[MAX_AXES];
    RowTable *rt[MAX_AXES];
    FullTable *ft[MAX_AXES];
    TimeTable *tt[MAX_AXES];
    int nopt[MAX_AXES];
    u64 *opt[MAX_AXES]; /* nopt[r] sets of nw words */
    Py_ssize_t *opt_set[MAX_AXES]; /* their set ids */
    u64 sub[MAX_AXES][MAX_WORDS]; /* masks inside axis r's block */
    int nsingles, singles[MAX_AXES], npairs, pairs[MAX_AXES][2];
    PyObject *full_fn, *time_fn;
    int has_best, best_used, best_picks[MAX_AXES], best_ps[MAX_AXES];
    double best_obj;
    /* per leaf */
    Row *row[MAX_AXES];
    u64 fb[MAX_AXES][MAX_WORDS];
    Atoms at;
} Search;

static int atoms_alloc(Atoms *at, int cap, int nw) {
    at->size = malloc((size_t)cap * sizeof(int));
    at->pg = malloc((size_t)cap * sizeof(int));
    at->trial_pg = malloc((size_t)cap * sizeof(int));
    at->best_pg = malloc((size_t)cap * sizeof(int));
    at->own = malloc((size_t)cap * sizeof(unsigned));
    at->full = malloc((size_t)cap * sizeof(unsigned));
    at->bits = malloc((size_t)cap * nw * 8);
    return at->size && at->pg && at->trial_pg && at->best_pg && at->own && at->full && at->bits ? 0 : -1;
}

static void atoms_free(Atoms *at) {
    free(at->size), free(at->pg), free(at->trial_pg), free(at->best_pg), free(at->own), free(at->full), free(at->bits);
}

typedef struct {
    double obj;
    int used, ps[MAX_AXES];
} Cand;

/* set ``sid``'s times with room for multiplicity p (grown as needed); NULL: no memory */
static TimeVec *time_vec(TimeTable *tt, Py_ssize_t sid, Py_ssize_t p) {
    if (sid >= tt->n) {
        Py_ssize_t n = sid + 1 > 2 * tt->n ? sid + 1 : 2 * tt->n;
        TimeVec *grown = realloc(tt->vec, (size_t)n * sizeof(TimeVec));
        if (!grown) return NULL;
        memset(grown + tt->n, 0, (size_t)(n - tt->n) * sizeof(TimeVec));
        tt->vec = grown;
        tt->n = n;
    }
    TimeVec *v = &tt->vec[sid];
    if (p >= v->cap) {
        Py_ssize_t cap = p + 1 > 2 * v->cap ? p + 1 : 2 * v->cap;
        if (cap < 8) cap = 8;
        double *nt = realloc(v->t, (size_t)cap * sizeof(double));
        if (!nt) return NULL;
        v->t = nt;
        int *nh = realloc(v->h, (size_t)cap * sizeof(int));
        if (!nh) return NULL;
        for (Py_ssize_t i = v->cap; i < cap; i++) nh[i] = -2;
        v->h = nh;
        v->cap = cap;
    }
    return v;
}

/* (T, h) of axis r on set ``sid`` at multiplicity p (h = -1: no valid schedule); priced by
 * time_fn(r, sid, p) the first time. -1 on a Python error. The table is looked up again after
 * the call: Python code may let another thread in, which may grow it. */
static int time_of(Search *s, int r, Py_ssize_t sid, Py_ssize_t p, double *t, int *h) {
    TimeTable *tt = s->tt[r];
    if (sid < tt->n && p < tt->vec[sid].cap && tt->vec[sid].h[p] != -2) { /* priced before: the usual case */
        *t = tt->vec[sid].t[p];
        *h = tt->vec[sid].h[p];
        return 0;
    }
    TimeVec *v = time_vec(tt, sid, p);
    if (!v) { PyErr_NoMemory(); return -1; }
    if (v->h[p] == -2) {
        PyObject *res = PyObject_CallFunction(s->time_fn, "inn", r, sid, p);
        if (!res) return -1;
        double value;
        int phases;
        if (!PyArg_ParseTuple(res, "di", &value, &phases)) { Py_DECREF(res); return -1; }
        Py_DECREF(res);
        v = time_vec(s->tt[r], sid, p);
        if (!v) { PyErr_NoMemory(); return -1; }
        v->t[p] = value;
        v->h[p] = phases < 0 ? -1 : phases;
    }
    *t = v->t[p];
    *h = v->h[p];
    return 0;
}

/* the set id of axis r's supported set fb (-1: not block folds); full_fn(r, fb) the first time */
static int full_of(Search *s, int r, const u64 *fb, Py_ssize_t *sid) {
    Map *m = &s->ft[r]->map;
    int found;
    Py_ssize_t slot = map_slot(m, fb, &found);
    if (found) { *sid = m->vals[slot] - 1; return 0; } /* stored as id + 1 (map values are >= 0) */
    PyObject *fb_int = _PyLong_FromByteArray((const unsigned char *)fb, (size_t)s->nw * 8, 1, 0);
    if (!fb_int) return -1;
    PyObject *res = PyObject_CallFunction(s->full_fn, "iO", r, fb_int);
    Py_DECREF(fb_int);
    if (!res) return -1;
    Py_ssize_t id = PyLong_AsSsize_t(res);
    Py_DECREF(res);
    if (id == -1 && PyErr_Occurred()) return -1;
    *sid = id < 0 ? -1 : id;
    if (map_put(m, fb, *sid + 1) < 0) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* _LeafSearch.new_row: axis r on its option j with the supported set fb */
static Row *row_of(Search *s, int r, int j) {
    RowTable *rt = s->rt[r];
    int nw = s->nw;
    u64 key[2 * MAX_WORDS];
    memcpy(key, s->opt[r] + (size_t)j * nw, (size_t)nw * 8);
    memcpy(key + nw, s->fb[r], (size_t)nw * 8);
    int found;
    Py_ssize_t slot = map_slot(&rt->map, key, &found);
    if (found) return rt->rows[rt->map.vals[slot]];
    Row row = {0};
    row.w = s->w[r];
    row.own_set = s->opt_set[r][j];
    row.own_len = bs_count(key, nw);
    row.full_len = bs_count(key + nw, nw);
    row.full_set = -1;
    if (!bs_equal(key, key + nw, nw)) { /* own ⊆ supported: larger iff different */
        if (full_of(s, r, key + nw, &row.full_set) < 0) return NULL;
    }
    double to, tf;
    int ho, hf;
    if (time_of(s, r, row.own_set, 1, &to, &ho) < 0) return NULL;
    if (row.full_set >= 0) {
        if (time_of(s, r, row.full_set, 1, &tf, &hf) < 0) return NULL;
        if (hf >= 0 && (ho < 0 || tf <= to)) to = tf, ho = hf;
    }
    row.wt1 = row.w * to;
    row.wfloor = row.w * (ho >= 0 ? (double)ho * s->lam : INFINITY);
    Row *kept = malloc(sizeof(Row));
    row.lb = malloc((size_t)(rt->ports + 1) * sizeof(double));
    if (!kept || !row.lb) goto oom;
    for (int i = 0; i <= rt->ports; i++) row.lb[i] = NAN;
    if (rt->n == rt->cap) {
        Py_ssize_t cap = rt->cap ? 2 * rt->cap : 64;
        Row **grown = realloc(rt->rows, (size_t)cap * sizeof(Row *));
        if (!grown) goto oom;
        rt->rows = grown;
        rt->cap = cap;
    }
    if (map_put(&rt->map, key, rt->n) < 0) goto oom;
    *kept = row;
    rt->rows[rt->n++] = kept;
    return kept;
oom:
    free(kept);
    free(row.lb);
    PyErr_NoMemory();
    return NULL;
}

/* w·T of a row at the most multiplicity ``spare`` ports allow it alone (the leaf's lower bound) */
static int spare_bound(Search *s, int r, int spare, double *out) {
    Row *row = s->row[r];
    if (isnan(row->lb[spare])) {
        double t, tf;
        int h;
        if (time_of(s, r, row->own_set, 1 + spare / row->own_len, &t, &h) < 0) return -1;
        if (row->full_set >= 0) {
            if (time_of(s, r, row->full_set, 1 + spare / row->full_len, &tf, &h) < 0) return -1;
            if (tf < t) t = tf; /* min(t, tf) */
        }
        row->lb[spare] = row->w * t;
    }
    *out = row->lb[spare];
    return 0;
}

/* _pair_bound: the two axes of one mesh share the spare ports (their sets are disjoint) */
static int pair_bound(Search *s, int ra, int rb, int spare, double *out) {
    const Row *a = s->row[ra], *b = s->row[rb];
    double best = INFINITY;
    for (int side = 0; side < 2; side++) {
        Py_ssize_t va = side ? a->full_set : a->own_set;
        int la = side ? a->full_len : a->own_len;
        if (va < 0) continue;
        for (int q = 1; q < 2 + spare / la; q++) {
            int left = spare - (q - 1) * la, h;
            double tb, tf, ta;
            if (time_of(s, rb, b->own_set, 1 + left / b->own_len, &tb, &h) < 0) return -1;
            if (b->full_set >= 0) {
                if (time_of(s, rb, b->full_set, 1 + left / b->full_len, &tf, &h) < 0) return -1;
                if (tf < tb) tb = tf;
            }
            if (time_of(s, ra, va, q, &ta, &h) < 0) return -1;
            double x = a->w * ta + b->w * tb;
            if (x < best) best = x;
        }
    }
    *out = best;
    return 0;
}

/* ---------------------------------------------------------------- atoms and the greedy */


/* _atoms: the leaf's generators refined by every row's own set and (when the axis may run on
 * it) its supported set; only the membership and the sizes are kept (the greedy reads no mask). */
static void atoms_of(const Search *s, const u64 *host, const u64 *const *own_sets, Atoms *at) {
    int nw = s->nw, n = 1;
    u64 *bits_of = at->bits;
#define ATOM(a) (bits_of + (size_t)(a) * nw)
    memcpy(ATOM(0), host, (size_t)nw * 8);
    at->own[0] = at->full[0] = 0;
    for (int r = 0; r < s->A; r++) {
        for (int side = 1; side <= 2; side++) {
            const u64 *bits = side == 1 ? own_sets[r] : (s->row[r]->full_set >= 0 ? s->fb[r] : NULL);
            if (!bits) continue; /* an empty set: host is never empty, so it is not "every atom inside" */
            int all = 1;
            for (int i = 0; i < nw && all; i++) all = (bits[i] & host[i]) == host[i];
            unsigned tag = 1u << r;
            if (all) {
                for (int a = 0; a < n; a++) *(side == 1 ? &at->own[a] : &at->full[a]) |= tag;
                continue;
            }
            if (bs_empty(bits, nw)) continue;
            int m = n;
            for (int a = 0; a < m; a++) {
                u64 inside[MAX_WORDS];
                int any = 0, same = 1;
                for (int i = 0; i < nw; i++) {
                    inside[i] = ATOM(a)[i] & bits[i];
                    any |= inside[i] != 0;
                    same &= inside[i] == ATOM(a)[i];
                }
                if (!any) continue;
                if (!same) { /* the part outside stays untagged, as a new atom */
                    for (int i = 0; i < nw; i++) ATOM(n)[i] = ATOM(a)[i] ^ inside[i];
                    at->own[n] = at->own[a];
                    at->full[n] = at->full[a];
                    n++;
                    memcpy(ATOM(a), inside, (size_t)nw * 8);
                }
                *(side == 1 ? &at->own[a] : &at->full[a]) |= tag;
            }
        }
    }
    at->n = n;
    for (int a = 0; a < n; a++) at->size[a] = bs_count(ATOM(a), nw);
#undef ATOM
}

/* w·T of row q at own multiplicity p_own, its supported set at the least multiplied atom */
static int term(Search *s, const Atoms *at, int q, int p_own, const int *pg, double *out) {
    const Row *row = s->row[q];
    double to, tf;
    int ho, hf;
    if (time_of(s, q, row->own_set, p_own, &to, &ho) < 0) return -1;
    if (row->full_set >= 0) {
        int p_full = 0, first = 1;
        for (int a = 0; a < at->n; a++)
            if (at->full[a] >> q & 1 && (first || pg[a] < p_full)) p_full = pg[a], first = 0;
        if (time_of(s, q, row->full_set, p_full, &tf, &hf) < 0) return -1;
        if (hf >= 0 && (ho < 0 || tf <= to)) to = tf;
    }
    *out = row->w * to;
    return 0;
}

/* _LeafSearch._raise: spend leftover ports on the multiplicity step that lowers Σ w·T most */
static int greedy(Search *s, const Atoms *at, int n, double obj, Cand *out) {
    int A = s->A, na = at->n, ps[MAX_AXES], used = n;
    int *pg = at->pg, *trial_pg = at->trial_pg, *best_pg = at->best_pg;
    double current[MAX_AXES], trial[MAX_AXES], best_terms[MAX_AXES];
    unsigned touched[MAX_AXES], live = (1u << A) - 1;
    for (int r = 0; r < A; r++) {
        touched[r] = 1u << r;
        for (int a = 0; a < na; a++)
            if (at->own[a] >> r & 1) touched[r] |= at->full[a];
        ps[r] = 1;
    }
    for (int a = 0; a < na; a++) pg[a] = 1;
    for (int r = 0; r < A; r++)
        if (term(s, at, r, 1, pg, &current[r]) < 0) return -1;
    for (;;) {
        int best_r = -1, best_used = 0;
        double best_o = 0.0;
        for (int r = 0; r < A; r++) {
            if (!(live >> r & 1)) continue;
            int p = ps[r] + 1, extra = 0;
            for (int a = 0; a < na; a++)
                if (at->own[a] >> r & 1 && pg[a] < p) extra += (p - pg[a]) * at->size[a];
            if (used + extra > s->budget) { live &= ~(1u << r); continue; }
            for (int a = 0; a < na; a++) trial_pg[a] = (at->own[a] >> r & 1 && pg[a] < p) ? p : pg[a];
            memcpy(trial, current, (size_t)A * sizeof(double));
            for (int q = 0; q < A; q++)
                if (touched[r] >> q & 1 && term(s, at, q, q == r ? p : ps[q], trial_pg, &trial[q]) < 0) return -1;
            double o = 0.0; /* Σ w·T in row order */
            for (int q = 0; q < A; q++) o += trial[q];
            if (o < obj - 1e-15 && (best_r < 0 || o < best_o || (o == best_o && used + extra < best_used))) {
                best_r = r, best_o = o, best_used = used + extra;
                memcpy(best_pg, trial_pg, (size_t)na * sizeof(int));
                memcpy(best_terms, trial, (size_t)A * sizeof(double));
            }
        }
        if (best_r < 0) break;
        obj = best_o, used = best_used;
        memcpy(pg, best_pg, (size_t)na * sizeof(int));
        memcpy(current, best_terms, (size_t)A * sizeof(double));
        ps[best_r]++;
    }
    out->obj = obj;
    out->used = used;
    memcpy(out->ps, ps, sizeof(ps));
    return 0;
}

/* ---------------------------------------------------------------- a leaf (_LeafSearch.leaf) */

/* 1: *cand holds the leaf's (obj, ports, ps); 0: bounded away; -1: Python error */
static int leaf(Search *s, const int *picks, const u64 *host, Cand *cand) {
    int A = s->A, nw = s->nw;
    const u64 *own_sets[MAX_AXES];
    double total = 0.0, floor_ = 0.0;
    for (int r = 0; r < A; r++) {
        own_sets[r] = s->opt[r] + (size_t)picks[r] * nw;
        for (int i = 0; i < nw; i++) s->fb[r][i] = host[i] & s->sub[r][i];
        Row *row = row_of(s, r, picks[r]);
        if (!row) return -1;
        s->row[r] = row;
        total += row->wt1;
        floor_ += row->wfloor;
    }
    int n = bs_count(host, nw);
    if (!(n + s->min_step <= s->budget && (!s->has_best || floor_ < s->best_obj))) {
        cand->obj = total;
        cand->used = n;
        for (int r = 0; r < A; r++) cand->ps[r] = 1;
        return 1;
    }
    int spare = s->budget - n;
    if (s->has_best) { /* the descent's bound is its best */
        double lb = 0.0, wt;
        for (int r = 0; r < A; r++) {
            if (spare_bound(s, r, spare, &wt) < 0) return -1;
            lb += wt;
        }
        if (lb > s->best_obj) return 0;
        if (s->npairs) {
            double jb = 0.0;
            for (int i = 0; i < s->nsingles; i++) jb += s->row[s->singles[i]]->lb[spare];
            for (int i = 0; i < s->npairs; i++) {
                if (pair_bound(s, s->pairs[i][0], s->pairs[i][1], spare, &wt) < 0) return -1;
                jb += wt;
            }
            if (jb > s->best_obj * (1 + 1e-12)) return 0;
        }
    }
    atoms_of(s, host, own_sets, &s->at);
    return greedy(s, &s->at, n, total, cand) < 0 ? -1 : 1;
}

static inline int cand_less(double o1, int u1, double o2, int u2) { return o1 < o2 || (o1 == o2 && u1 < u2); }

/* the descent's leaf(): ports over budget or bounded away -> 0; a new best is kept */
static int visit(Search *s, const int *picks, Cand *cand) {
    u64 host[MAX_WORDS] = {0};
    for (int r = 0; r < s->A; r++) {
        const u64 *o = s->opt[r] + (size_t)picks[r] * s->nw;
        for (int i = 0; i < s->nw; i++) host[i] |= o[i];
    }
    if (bs_count(host, s->nw) > s->budget) return 0;
    int got = leaf(s, picks, host, cand);
    if (got <= 0) return got;
    if (!s->has_best || cand_less(cand->obj, cand->used, s->best_obj, s->best_used)) {
        s->has_best = 1;
        s->best_obj = cand->obj;
        s->best_used = cand->used;
        memcpy(s->best_picks, picks, sizeof(s->best_picks));
        memcpy(s->best_ps, cand->ps, sizeof(s->best_ps));
    }
    return 1;
}

/* ---------------------------------------------------------------- tried leaves (a set of packed picks) */

typedef struct {
    u64 *keys; /* 0 = empty; stored as packed + 1 */
    size_t cap, n;
} Tried;

static u64 pack(const int *picks, int A) {
    u64 k = 0;
    for (int r = 0; r < A; r++) k |= (u64)picks[r] << (8 * r);
    return k + 1;
}

/* 1 when newly added, 0 when already there, -1 out of memory */
static int tried_add(Tried *t, u64 key) {
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        u64 *keys = calloc(cap, 8);
        if (!keys) return -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->keys[i]) continue;
            size_t s = (size_t)mix(0, t->keys[i]) & (cap - 1);
            while (keys[s]) s = (s + 1) & (cap - 1);
            keys[s] = t->keys[i];
        }
        free(t->keys);
        t->keys = keys;
        t->cap = cap;
    }
    size_t s = (size_t)mix(0, key) & (t->cap - 1);
    while (t->keys[s]) {
        if (t->keys[s] == key) return 0;
        s = (s + 1) & (t->cap - 1);
    }
    t->keys[s] = key;
    t->n++;
    return 1;
}

/* Coordinate descent from the plain cube (option 0 of every ladder), each leaf tried once. */
static int descend(Search *s) {
    int picks[MAX_AXES] = {0}, trial[MAX_AXES];
    Tried tried = {NULL, 0, 0};
    Cand current, cand;
    int rc = -1, got;
    if (tried_add(&tried, pack(picks, s->A)) < 0) goto oom;
    got = visit(s, picks, &current);
    if (got <= 0) { rc = got; goto done; }
    for (int round = 0; round < 2 * s->A + 2; round++) {
        int changed = 0;
        for (int i = 0; i < s->A; i++) {
            for (int j = 0; j < s->nopt[i]; j++) {
                memcpy(trial, picks, sizeof(trial));
                trial[i] = j;
                int added = tried_add(&tried, pack(trial, s->A));
                if (added < 0) goto oom;
                if (!added) continue;
                got = visit(s, trial, &cand);
                if (got < 0) goto done;
                if (got && cand_less(cand.obj, cand.used, current.obj, current.used)) {
                    current = cand;
                    memcpy(picks, trial, sizeof(picks));
                    changed = 1;
                }
            }
        }
        if (!changed) break;
    }
    rc = 1;
    goto done;
oom:
    PyErr_NoMemory();
done:
    free(tried.keys);
    return rc;
}

static int read_bitset(PyObject *bytes, int nw, u64 *out) {
    if (!PyBytes_Check(bytes) || PyBytes_GET_SIZE(bytes) != (Py_ssize_t)nw * 8) {
        PyErr_Format(PyExc_ValueError, "a generator bitset must be %d little-endian bytes", nw * 8);
        return -1;
    }
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(bytes);
    for (int i = 0; i < nw; i++) {
        u64 w = 0;
        for (int k = 7; k >= 0; k--) w = w << 8 | b[8 * i + k];
        out[i] = w;
    }
    return 0;
}

static int parse_axis(Search *s, int r, PyObject *args[5]) {
    PyObject *rt = args[0], *ft = args[1], *tt = args[2], *opts = args[3], *sets = args[4];
    if (!PyObject_TypeCheck(rt, &RowTableType) || ((RowTable *)rt)->nw != s->nw || ((RowTable *)rt)->ports < s->budget ||
        !PyObject_TypeCheck(ft, &FullTableType) || ((FullTable *)ft)->nw != s->nw || !PyObject_TypeCheck(tt, &TimeTableType) ||
        !PyList_Check(opts) || !PyList_Check(sets) || PyList_GET_SIZE(opts) < 1 || PyList_GET_SIZE(opts) > MAX_OPTIONS ||
        PyList_GET_SIZE(sets) != PyList_GET_SIZE(opts)) {
        PyErr_SetString(PyExc_ValueError, "descend: per axis a RowTable (nw words, >= budget ports), a FullTable "
                                          "(nw words), a TimeTable and 1..255 options with one set id each");
        return -1;
    }
    s->rt[r] = (RowTable *)rt, s->ft[r] = (FullTable *)ft, s->tt[r] = (TimeTable *)tt;
    s->nopt[r] = (int)PyList_GET_SIZE(opts);
    s->opt[r] = malloc((size_t)s->nopt[r] * s->nw * 8);
    s->opt_set[r] = malloc((size_t)s->nopt[r] * sizeof(Py_ssize_t));
    if (!s->opt[r] || !s->opt_set[r]) { PyErr_NoMemory(); return -1; }
    for (int j = 0; j < s->nopt[r]; j++) {
        if (read_bitset(PyList_GET_ITEM(opts, j), s->nw, s->opt[r] + (size_t)j * s->nw) < 0) return -1;
        s->opt_set[r][j] = PyLong_AsSsize_t(PyList_GET_ITEM(sets, j));
        if (s->opt_set[r][j] < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "descend: set ids are >= 0");
            return -1;
        }
    }
    return 0;
}

static int parse_rows(Search *s, PyObject *singles, PyObject *pairs) {
    s->nsingles = (int)PyList_GET_SIZE(singles);
    s->npairs = (int)PyList_GET_SIZE(pairs);
    if (s->nsingles > MAX_AXES || s->npairs > MAX_AXES) { PyErr_SetString(PyExc_ValueError, "descend: too many rows"); return -1; }
    for (int i = 0; i < s->nsingles; i++) {
        s->singles[i] = (int)PyLong_AsLong(PyList_GET_ITEM(singles, i));
        if (s->singles[i] < 0 || s->singles[i] >= s->A) { PyErr_SetString(PyExc_ValueError, "descend: bad single row"); return -1; }
    }
    for (int i = 0; i < s->npairs; i++) {
        if (!PyArg_ParseTuple(PyList_GET_ITEM(pairs, i), "ii", &s->pairs[i][0], &s->pairs[i][1])) return -1;
        if (s->pairs[i][0] < 0 || s->pairs[i][0] >= s->A || s->pairs[i][1] < 0 || s->pairs[i][1] >= s->A) {
            PyErr_SetString(PyExc_ValueError, "descend: bad pair row");
            return -1;
        }
    }
    return 0;
}

/* descend(nw, budget, min_step, lam, weights, row_tables, full_tables, time_tables, options, option_sets,
 *         subgroups, singles, pairs, full_fn, time_fn)
 * -> None (no leaf fits) or (picks, obj, ports, ps), picks and ps per active axis. */
static PyObject *py_descend(PyObject *self, PyObject *args) {
    Search *s = calloc(1, sizeof(Search));
    if (!s) return PyErr_NoMemory();
    PyObject *lists[9], *out = NULL;
    if (!PyArg_ParseTuple(args, "iiidO!O!O!O!O!O!O!O!O!OO", &s->nw, &s->budget, &s->min_step, &s->lam,
                          &PyList_Type, &lists[0], &PyList_Type, &lists[1], &PyList_Type, &lists[2], &PyList_Type,
                          &lists[3], &PyList_Type, &lists[4], &PyList_Type, &lists[5], &PyList_Type, &lists[6],
                          &PyList_Type, &lists[7], &PyList_Type, &lists[8], &s->full_fn, &s->time_fn))
        goto done;
    s->A = (int)PyList_GET_SIZE(lists[0]);
    int same = 1;
    for (int i = 1; i < 7; i++) same &= PyList_GET_SIZE(lists[i]) == s->A;
    if (s->A < 1 || s->A > MAX_AXES || s->nw < 1 || s->nw > MAX_WORDS || !same) {
        PyErr_SetString(PyExc_ValueError, "descend: 1..8 axes, each with a weight, three tables, options, set ids "
                                          "and a subgroup; nw 1..64");
        goto done;
    }
    for (int r = 0; r < s->A; r++) {
        s->w[r] = PyFloat_AsDouble(PyList_GET_ITEM(lists[0], r));
        if (s->w[r] == -1.0 && PyErr_Occurred()) goto done;
        PyObject *axis[5];
        for (int i = 0; i < 5; i++) axis[i] = PyList_GET_ITEM(lists[1 + i], r);
        if (parse_axis(s, r, axis) < 0) goto done;
        if (read_bitset(PyList_GET_ITEM(lists[6], r), s->nw, s->sub[r]) < 0) goto done;
    }
    if (parse_rows(s, lists[7], lists[8]) < 0) goto done;
    if (s->budget < 1) { PyErr_SetString(PyExc_ValueError, "descend: budget >= 1 port"); goto done; }
    if (atoms_alloc(&s->at, s->budget + 1, s->nw) < 0) { PyErr_NoMemory(); goto done; }
    int rc = descend(s);
    if (rc < 0) goto done;
    if (!s->has_best) { out = Py_NewRef(Py_None); goto done; }
    PyObject *picks = PyTuple_New(s->A), *ps = PyTuple_New(s->A);
    if (!picks || !ps) { Py_XDECREF(picks); Py_XDECREF(ps); goto done; }
    for (int r = 0; r < s->A; r++) {
        PyTuple_SET_ITEM(picks, r, PyLong_FromLong(s->best_picks[r]));
        PyTuple_SET_ITEM(ps, r, PyLong_FromLong(s->best_ps[r]));
    }
    out = Py_BuildValue("(NdiN)", picks, s->best_obj, s->best_used, ps);
done:
    for (int r = 0; r < MAX_AXES; r++) {
        free(s->opt[r]);
        free(s->opt_set[r]);
    }
    atoms_free(&s->at);
    free(s);
    return out;
}

static PyObject *py_abi(PyObject *self, PyObject *noargs) { return PyLong_FromLong(DK_ABI); }

static PyMethodDef methods[] = {
    {"descend", py_descend, METH_VARARGS, "Coordinate descent over one bit partition (see descent_kernel.c)."},
    {"abi", py_abi, METH_NOARGS, "The argument list's version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_descent_kernel",
                                    "The shared-host planner's coordinate descent, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__descent_kernel(void) {
    if (PyType_Ready(&TimeTableType) < 0 || PyType_Ready(&RowTableType) < 0 || PyType_Ready(&FullTableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "TimeTable", (PyObject *)&TimeTableType) < 0 ||
        PyModule_AddObjectRef(m, "RowTable", (PyObject *)&RowTableType) < 0 ||
        PyModule_AddObjectRef(m, "FullTable", (PyObject *)&FullTableType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

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

#define DK_ABI 1
#define MAX_AXES 8     /* active axes of a request (picks are packed 8 bits each in a u64) */
#define MAX_OPTIONS 255
#define MAX_WORDS 64   /* bitsets of up to 4096 masks */

/* ---------------------------------------------------------------- bitsets */

static inline int bs_count(const u64 *a, int nw) {
    int n = 0;
    for (int i = 0; i < nw; i++) n += __builtin_popcountll(a[i]);
    return n;
}
static inline int bs_equal(const u64 *a, const u64 *b, int nw) { return memcmp(a, b, (size_t)nw * 8) == 0; }
static inline int bs_empty(const u64 *a, int nw) {
    for (int i = 0; i < nw; i++) if (a[i]) return 0;
    return 1;
}
static inline u64 mix(u64 h, u64 x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

/* ---------------------------------------------------------------- times (Eq. 1 per set and p) */

typedef struct {
    double *t;
    signed char *state; /* 0 not priced yet, 1 valid, -1 no valid schedule (T = inf) */
    Py_ssize_t cap;
} TimeVec;

typedef struct {
    PyObject_HEAD
    TimeVec *vec;
    Py_ssize_t n;
} TimeTable;

static void timetable_dealloc(TimeTable *self) {
    for (Py_ssize_t i = 0; i < self->n; i++) {
        free(self->vec[i].t);
        free(self->vec[i].state);
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
    .tp_doc = "T and validity per (axis-local generator set id, multiplicity p), filled through time_fn.",
};

/* T of set ``vid`` at multiplicity p; *valid = 0 when no schedule is valid. -1 on a Python error. */
static int time_of(TimeTable *tt, PyObject *time_fn, Py_ssize_t vid, Py_ssize_t p, double *t, int *valid) {
    if (vid >= tt->n) {
        Py_ssize_t n = vid + 1 > 2 * tt->n ? vid + 1 : 2 * tt->n;
        TimeVec *grown = realloc(tt->vec, (size_t)n * sizeof(TimeVec));
        if (!grown) { PyErr_NoMemory(); return -1; }
        memset(grown + tt->n, 0, (size_t)(n - tt->n) * sizeof(TimeVec));
        tt->vec = grown;
        tt->n = n;
    }
    TimeVec *v = &tt->vec[vid];
    if (p >= v->cap) {
        Py_ssize_t cap = p + 1 > 2 * v->cap ? p + 1 : 2 * v->cap;
        if (cap < 8) cap = 8;
        double *nt = realloc(v->t, (size_t)cap * sizeof(double));
        if (!nt) { PyErr_NoMemory(); return -1; }
        v->t = nt;
        signed char *ns = realloc(v->state, (size_t)cap);
        if (!ns) { PyErr_NoMemory(); return -1; }
        memset(ns + v->cap, 0, (size_t)(cap - v->cap));
        v->state = ns;
        v->cap = cap;
    }
    if (v->state[p] == 0) {
        PyObject *res = PyObject_CallFunction(time_fn, "nn", vid, p);
        if (!res) return -1;
        double value;
        int ok;
        if (!PyArg_ParseTuple(res, "dp", &value, &ok)) { Py_DECREF(res); return -1; }
        Py_DECREF(res);
        v->t[p] = value;
        v->state[p] = ok ? 1 : -1;
    }
    *t = v->t[p];
    *valid = v->state[p] > 0;
    return 0;
}

/* ---------------------------------------------------------------- rows */

typedef struct {
    double w, wt1, wfloor; /* weight, w·T at p = 1, w·h·λ */
    Py_ssize_t own_vec, full_vec; /* time ids; full_vec < 0: the axis runs on its own set only */
    int own_len, full_len;
    double *lb; /* w·T at the most multiplicity ``spare`` ports allow, per spare (NaN: not yet) */
} Row;

typedef struct {
    PyObject_HEAD
    int nw, ports;
    Py_ssize_t n, cap;
    u64 *keys; /* cap entries of 2·nw words: own set, supported set */
    Row **rows; /* NULL: empty slot */
} RowTable;

static void rowtable_free_rows(RowTable *self) {
    for (Py_ssize_t i = 0; i < self->cap; i++) {
        if (self->rows[i]) {
            free(self->rows[i]->lb);
            free(self->rows[i]);
        }
    }
    free(self->rows);
    free(self->keys);
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
    self->n = 0;
    self->cap = 64;
    self->keys = calloc((size_t)self->cap * 2 * nw, 8);
    self->rows = calloc((size_t)self->cap, sizeof(Row *));
    if (!self->keys || !self->rows) { PyErr_NoMemory(); return -1; }
    return 0;
}

static PyTypeObject RowTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fabrics.planner._descent_kernel.RowTable",
    .tp_basicsize = sizeof(RowTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)rowtable_init,
    .tp_dealloc = (destructor)rowtable_dealloc,
    .tp_doc = "RowTable(nw, ports): leaf rows of one axis on one bit block, keyed by (own set, supported set).",
};

static Py_ssize_t slot_of(const RowTable *rt, const u64 *own, const u64 *fb, int *found) {
    int nw = rt->nw;
    u64 h = 0x84222325cbf29ce4ULL;
    for (int i = 0; i < nw; i++) h = mix(mix(h, own[i]), fb[i]);
    Py_ssize_t mask = rt->cap - 1, s = (Py_ssize_t)(h & (u64)mask);
    while (rt->rows[s]) {
        const u64 *k = rt->keys + (size_t)s * 2 * nw;
        if (bs_equal(k, own, nw) && bs_equal(k + nw, fb, nw)) { *found = 1; return s; }
        s = (s + 1) & mask;
    }
    *found = 0;
    return s;
}

static int rowtable_grow(RowTable *rt) {
    Py_ssize_t old_cap = rt->cap;
    u64 *old_keys = rt->keys;
    Row **old_rows = rt->rows;
    int nw = rt->nw;
    rt->cap *= 2;
    rt->keys = calloc((size_t)rt->cap * 2 * nw, 8);
    rt->rows = calloc((size_t)rt->cap, sizeof(Row *));
    if (!rt->keys || !rt->rows) {
        free(rt->keys);
        free(rt->rows);
        rt->keys = old_keys, rt->rows = old_rows, rt->cap = old_cap;
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < old_cap; i++) {
        if (!old_rows[i]) continue;
        const u64 *k = old_keys + (size_t)i * 2 * nw;
        int found;
        Py_ssize_t s = slot_of(rt, k, k + nw, &found);
        memcpy(rt->keys + (size_t)s * 2 * nw, k, (size_t)nw * 16);
        rt->rows[s] = old_rows[i];
    }
    free(old_keys);
    free(old_rows);
    return 0;
}

/* ---------------------------------------------------------------- one partition's search state */

typedef struct {
    int A, nw, budget, min_step;
    RowTable *rt[MAX_AXES];
    int nopt[MAX_AXES];
    u64 *opt[MAX_AXES]; /* nopt[r] sets of nw words */
    u64 sub[MAX_AXES][MAX_WORDS]; /* masks inside axis r's block */
    int nsingles, singles[MAX_AXES], npairs, pairs[MAX_AXES][2];
    TimeTable *tt;
    PyObject *row_fn, *time_fn;
    int has_best, best_used, best_picks[MAX_AXES], best_ps[MAX_AXES];
    double best_obj;
    /* per leaf */
    Row *row[MAX_AXES];
    u64 fb[MAX_AXES][MAX_WORDS];
} Search;

typedef struct {
    double obj;
    int used, ps[MAX_AXES];
} Cand;

static Row *row_of(Search *s, int r, int j) {
    RowTable *rt = s->rt[r];
    const u64 *own = s->opt[r] + (size_t)j * s->nw, *fb = s->fb[r];
    int found;
    Py_ssize_t slot = slot_of(rt, own, fb, &found);
    if (found) return rt->rows[slot];
    PyObject *fb_int = _PyLong_FromByteArray((const unsigned char *)fb, (size_t)s->nw * 8, 1, 0);
    if (!fb_int) return NULL;
    PyObject *res = PyObject_CallFunction(s->row_fn, "iiO", r, j, fb_int);
    Py_DECREF(fb_int);
    if (!res) return NULL;
    Row *row = calloc(1, sizeof(Row));
    if (!row) { Py_DECREF(res); PyErr_NoMemory(); return NULL; }
    if (!PyArg_ParseTuple(res, "dddnnii", &row->w, &row->wt1, &row->wfloor, &row->own_vec, &row->full_vec,
                          &row->own_len, &row->full_len)) {
        Py_DECREF(res);
        free(row);
        return NULL;
    }
    Py_DECREF(res);
    row->lb = malloc((size_t)(rt->ports + 1) * sizeof(double));
    if (!row->lb) { free(row); PyErr_NoMemory(); return NULL; }
    for (int i = 0; i <= rt->ports; i++) row->lb[i] = NAN;
    if (2 * (rt->n + 1) > rt->cap) {
        if (rowtable_grow(rt) < 0) { free(row->lb); free(row); return NULL; }
        slot = slot_of(rt, own, fb, &found);
    }
    memcpy(rt->keys + (size_t)slot * 2 * s->nw, own, (size_t)s->nw * 8);
    memcpy(rt->keys + (size_t)slot * 2 * s->nw + s->nw, fb, (size_t)s->nw * 8);
    rt->rows[slot] = row;
    rt->n++;
    return row;
}

/* w·T of a row at the most multiplicity ``spare`` ports allow it alone (the leaf's lower bound) */
static int spare_bound(Search *s, Row *row, int spare, double *out) {
    if (isnan(row->lb[spare])) {
        double t, tf;
        int ok;
        if (time_of(s->tt, s->time_fn, row->own_vec, 1 + spare / row->own_len, &t, &ok) < 0) return -1;
        if (row->full_vec >= 0) {
            if (time_of(s->tt, s->time_fn, row->full_vec, 1 + spare / row->full_len, &tf, &ok) < 0) return -1;
            if (tf < t) t = tf; /* min(t, tf) */
        }
        row->lb[spare] = row->w * t;
    }
    *out = row->lb[spare];
    return 0;
}

/* _pair_bound: the two axes of one mesh share the spare ports (their sets are disjoint) */
static int pair_bound(Search *s, const Row *a, const Row *b, int spare, double *out) {
    double best = INFINITY;
    for (int side = 0; side < 2; side++) {
        Py_ssize_t va = side ? a->full_vec : a->own_vec;
        int la = side ? a->full_len : a->own_len;
        if (va < 0) continue;
        for (int q = 1; q < 2 + spare / la; q++) {
            int left = spare - (q - 1) * la, ok;
            double tb, tf, ta;
            if (time_of(s->tt, s->time_fn, b->own_vec, 1 + left / b->own_len, &tb, &ok) < 0) return -1;
            if (b->full_vec >= 0) {
                if (time_of(s->tt, s->time_fn, b->full_vec, 1 + left / b->full_len, &tf, &ok) < 0) return -1;
                if (tf < tb) tb = tf;
            }
            if (time_of(s->tt, s->time_fn, va, q, &ta, &ok) < 0) return -1;
            double x = a->w * ta + b->w * tb;
            if (x < best) best = x;
        }
    }
    *out = best;
    return 0;
}

/* ---------------------------------------------------------------- atoms and the greedy */

typedef struct {
    int n, size[MAX_WORDS * 64 + 1];
    unsigned own[MAX_WORDS * 64 + 1], full[MAX_WORDS * 64 + 1]; /* rows owning / supported, bit r */
} Atoms;

static u64 atom_bits[MAX_WORDS * 64 + 1][MAX_WORDS]; /* scratch of _atoms (the module runs under the GIL) */

/* _atoms: the leaf's generators refined by every row's own set and (when the axis may run on
 * it) its supported set; only the membership and the sizes are kept (the greedy reads no mask). */
static void atoms_of(const Search *s, const u64 *host, const u64 *const *own_sets, Atoms *at) {
    int nw = s->nw, n = 1;
    memcpy(atom_bits[0], host, (size_t)nw * 8);
    at->own[0] = at->full[0] = 0;
    for (int r = 0; r < s->A; r++) {
        for (int side = 1; side <= 2; side++) {
            const u64 *bits = side == 1 ? own_sets[r] : (s->row[r]->full_vec >= 0 ? s->fb[r] : NULL);
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
                    inside[i] = atom_bits[a][i] & bits[i];
                    any |= inside[i] != 0;
                    same &= inside[i] == atom_bits[a][i];
                }
                if (!any) continue;
                if (!same) { /* the part outside stays untagged, as a new atom */
                    for (int i = 0; i < nw; i++) atom_bits[n][i] = atom_bits[a][i] ^ inside[i];
                    at->own[n] = at->own[a];
                    at->full[n] = at->full[a];
                    n++;
                    memcpy(atom_bits[a], inside, (size_t)nw * 8);
                }
                *(side == 1 ? &at->own[a] : &at->full[a]) |= tag;
            }
        }
    }
    at->n = n;
    for (int a = 0; a < n; a++) at->size[a] = bs_count(atom_bits[a], nw);
}

/* w·T of row q at own multiplicity p_own, its supported set at the least multiplied atom */
static int term(Search *s, const Atoms *at, int q, int p_own, const int *pg, double *out) {
    const Row *row = s->row[q];
    double to, tf;
    int ok_o, ok_f;
    if (time_of(s->tt, s->time_fn, row->own_vec, p_own, &to, &ok_o) < 0) return -1;
    if (row->full_vec >= 0) {
        int p_full = 0, first = 1;
        for (int a = 0; a < at->n; a++)
            if (at->full[a] >> q & 1 && (first || pg[a] < p_full)) p_full = pg[a], first = 0;
        if (time_of(s->tt, s->time_fn, row->full_vec, p_full, &tf, &ok_f) < 0) return -1;
        if (ok_f && (!ok_o || tf <= to)) to = tf;
    }
    *out = row->w * to;
    return 0;
}

/* _LeafSearch._raise: spend leftover ports on the multiplicity step that lowers Σ w·T most */
static int greedy(Search *s, const Atoms *at, int n, double obj, Cand *out) {
    int A = s->A, na = at->n, ps[MAX_AXES], used = n;
    static int pg[MAX_WORDS * 64 + 1], trial_pg[MAX_WORDS * 64 + 1], best_pg[MAX_WORDS * 64 + 1];
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
            if (spare_bound(s, s->row[r], spare, &wt) < 0) return -1;
            lb += wt;
        }
        if (lb > s->best_obj) return 0;
        if (s->npairs) {
            double jb = 0.0;
            for (int i = 0; i < s->nsingles; i++) jb += s->row[s->singles[i]]->lb[spare];
            for (int i = 0; i < s->npairs; i++) {
                if (pair_bound(s, s->row[s->pairs[i][0]], s->row[s->pairs[i][1]], spare, &wt) < 0) return -1;
                jb += wt;
            }
            if (jb > s->best_obj * (1 + 1e-12)) return 0;
        }
    }
    static Atoms at;
    atoms_of(s, host, own_sets, &at);
    return greedy(s, &at, n, total, cand) < 0 ? -1 : 1;
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

/* descend(nw, budget, min_step, tables, options, subgroups, singles, pairs, times, row_fn, time_fn)
 * -> None (no leaf fits) or (picks, obj, ports, ps), picks and ps per active axis. */
static PyObject *py_descend(PyObject *self, PyObject *args) {
    Search *s = calloc(1, sizeof(Search));
    if (!s) return PyErr_NoMemory();
    PyObject *tables, *options, *subgroups, *singles, *pairs, *times, *out = NULL;
    if (!PyArg_ParseTuple(args, "iiiO!O!O!O!O!O!OO", &s->nw, &s->budget, &s->min_step, &PyList_Type, &tables,
                          &PyList_Type, &options, &PyList_Type, &subgroups, &PyList_Type, &singles, &PyList_Type,
                          &pairs, &TimeTableType, &times, &s->row_fn, &s->time_fn))
        goto done;
    s->tt = (TimeTable *)times;
    s->A = (int)PyList_GET_SIZE(tables);
    if (s->A < 1 || s->A > MAX_AXES || s->nw < 1 || s->nw > MAX_WORDS || PyList_GET_SIZE(options) != s->A ||
        PyList_GET_SIZE(subgroups) != s->A) {
        PyErr_SetString(PyExc_ValueError, "descend: 1..8 axes with one table, option list and subgroup each; nw 1..64");
        goto done;
    }
    for (int r = 0; r < s->A; r++) {
        PyObject *t = PyList_GET_ITEM(tables, r), *opts = PyList_GET_ITEM(options, r);
        if (!PyObject_TypeCheck(t, &RowTableType) || ((RowTable *)t)->nw != s->nw ||
            ((RowTable *)t)->ports < s->budget || !PyList_Check(opts) || PyList_GET_SIZE(opts) < 1 ||
            PyList_GET_SIZE(opts) > MAX_OPTIONS) {
            PyErr_SetString(PyExc_ValueError, "descend: a RowTable of nw words and >= budget ports, 1..255 options per axis");
            goto done;
        }
        s->rt[r] = (RowTable *)t;
        s->nopt[r] = (int)PyList_GET_SIZE(opts);
        s->opt[r] = malloc((size_t)s->nopt[r] * s->nw * 8);
        if (!s->opt[r]) { PyErr_NoMemory(); goto done; }
        for (int j = 0; j < s->nopt[r]; j++)
            if (read_bitset(PyList_GET_ITEM(opts, j), s->nw, s->opt[r] + (size_t)j * s->nw) < 0) goto done;
        if (read_bitset(PyList_GET_ITEM(subgroups, r), s->nw, s->sub[r]) < 0) goto done;
    }
    s->nsingles = (int)PyList_GET_SIZE(singles);
    s->npairs = (int)PyList_GET_SIZE(pairs);
    if (s->nsingles > MAX_AXES || s->npairs > MAX_AXES) { PyErr_SetString(PyExc_ValueError, "descend: too many rows"); goto done; }
    for (int i = 0; i < s->nsingles; i++) {
        s->singles[i] = (int)PyLong_AsLong(PyList_GET_ITEM(singles, i));
        if (s->singles[i] < 0 || s->singles[i] >= s->A) { PyErr_SetString(PyExc_ValueError, "descend: bad single row"); goto done; }
    }
    for (int i = 0; i < s->npairs; i++) {
        if (!PyArg_ParseTuple(PyList_GET_ITEM(pairs, i), "ii", &s->pairs[i][0], &s->pairs[i][1])) goto done;
        if (s->pairs[i][0] < 0 || s->pairs[i][0] >= s->A || s->pairs[i][1] < 0 || s->pairs[i][1] >= s->A) {
            PyErr_SetString(PyExc_ValueError, "descend: bad pair row");
            goto done;
        }
    }
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
    for (int r = 0; r < MAX_AXES; r++) free(s->opt[r]);
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
    if (PyType_Ready(&TimeTableType) < 0 || PyType_Ready(&RowTableType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "TimeTable", (PyObject *)&TimeTableType) < 0 ||
        PyModule_AddObjectRef(m, "RowTable", (PyObject *)&RowTableType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* The capped last-hop assignment of a balanced shortest-path tree (collectives/trees.py,
 * _assign_with_cap) as one compiled loop.
 *
 * A port of the Python reference, step for step, so the trees are identical
 * (tests/unit/test_tree_kernel.py compares both on every topology family): items in sphere
 * order, each placed by a depth-first augmenting search (Kuhn's algorithm) that tries the
 * item's generators in generator order, takes a generator with room under the cap, or else
 * tries to move one of the generator's items (in the order they were placed there) elsewhere;
 * a moved item leaves its place in that order and the new one is appended, as list.remove and
 * list.append do in Python. A generator is visited at most once per placement, so the search
 * is at most as deep as the number of generators.
 *
 * Built by setup.py as the optional extension collectives._tree_kernel; collectives/trees.py
 * loads it and keeps the Python loop as the fallback.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#define TK_ABI 1

typedef struct {
    Py_ssize_t n, G, cap;
    const unsigned char *ok; /* ok[g * n + i]: generator g is a last hop of item i */
    Py_ssize_t *owned;       /* owned[g * cap + k]: the k-th item placed on generator g */
    Py_ssize_t *count;       /* items on generator g */
    int *match;              /* generator of item i */
    unsigned char *visited;  /* generators visited by the current placement */
} Assign;

static void place_on(Assign *a, Py_ssize_t g, Py_ssize_t item) {
    a->owned[g * a->cap + a->count[g]++] = item;
    a->match[item] = (int)g;
}

static void move_off(Assign *a, Py_ssize_t g, Py_ssize_t k) {
    Py_ssize_t *row = a->owned + g * a->cap;
    memmove(row + k, row + k + 1, (size_t)(a->count[g] - k - 1) * sizeof(Py_ssize_t));
    a->count[g]--;
}

static int augment(Assign *a, Py_ssize_t item) {
    for (Py_ssize_t g = 0; g < a->G; g++) {
        if (!a->ok[g * a->n + item] || a->visited[g]) continue;
        a->visited[g] = 1;
        if (a->count[g] < a->cap) {
            place_on(a, g, item);
            return 1;
        }
        /* g's items are not touched by the deeper searches (they visit other generators only),
         * so walking its row in place is the same as walking a copy */
        const Py_ssize_t *row = a->owned + g * a->cap;
        for (Py_ssize_t k = 0; k < a->count[g]; k++) {
            if (augment(a, row[k])) {
                move_off(a, g, k);
                place_on(a, g, item);
                return 1;
            }
        }
    }
    return 0;
}

/* assign(ok, n, G, cap, out) -> bool: ok is n*G bytes (generator-major), out n int32 slots */
static PyObject *py_assign(PyObject *self, PyObject *args) {
    Py_buffer ok, out;
    Py_ssize_t n, G, cap;
    if (!PyArg_ParseTuple(args, "y*nnnw*", &ok, &n, &G, &cap, &out)) return NULL;
    PyObject *result = NULL;
    if (n < 0 || G < 1 || cap < 1 || ok.len != n * G || out.len != n * (Py_ssize_t)sizeof(int)) {
        PyErr_SetString(PyExc_ValueError, "assign: ok must hold n*G bytes and out n int32 slots");
        goto done;
    }
    Assign a = {.n = n, .G = G, .cap = cap, .ok = ok.buf, .match = out.buf};
    a.owned = malloc((size_t)(G * cap) * sizeof(Py_ssize_t));
    a.count = calloc((size_t)G, sizeof(Py_ssize_t));
    a.visited = malloc((size_t)G);
    if (!a.owned || !a.count || !a.visited) {
        PyErr_NoMemory();
    } else {
        int placed = 1;
        for (Py_ssize_t i = 0; i < n && placed; i++) {
            memset(a.visited, 0, (size_t)G);
            placed = augment(&a, i);
        }
        result = PyBool_FromLong(placed);
    }
    free(a.owned);
    free(a.count);
    free(a.visited);
done:
    PyBuffer_Release(&ok);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *py_abi(PyObject *self, PyObject *noargs) { return PyLong_FromLong(TK_ABI); }

static PyMethodDef methods[] = {
    {"assign", py_assign, METH_VARARGS, "Capped last-hop assignment (Kuhn's algorithm, trees.py order)."},
    {"abi", py_abi, METH_NOARGS, "The argument list's version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tree_kernel",
                                    "Balanced-tree last-hop assignment (collectives/trees.py).", -1, methods};

PyMODINIT_FUNC PyInit__tree_kernel(void) { return PyModule_Create(&module); }

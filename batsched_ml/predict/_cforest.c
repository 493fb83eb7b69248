/* The walk of batsched_ml.predict.forest.FastForest, compiled: one job's class probabilities
 * from the weekly forest in about a microsecond instead of tens.
 *
 * FastForest.proba (Python) is the reference and this file does exactly what it does (and
 * FastForest.predict_one and predict: the class whose probability is larger, ties to the
 * first, one row or many rows at a time): the row is rounded to float32 (as scikit-learn's
 * predict does) and compared, as a double, with each
 * split's double threshold (`x <= threshold` goes left); each tree's leaf adds its two class
 * probabilities to two double sums, in tree order; both sums are divided by the number of
 * trees. No multiplication, so no fused multiply-add could change a rounding (setup.py builds
 * it with -ffp-contract=off anyway). The tests compare both walks on trained forests, bit for
 * bit; BATSCHED_ML_KERNEL=python turns every compiled part off.
 *
 * The arrays are copied and checked once, at construction, so that no walk can leave its tree
 * or loop: every inner node's children are later nodes of the same tree, every split's feature
 * is a column of the row, and a leaf has no child.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "" /* setup.py passes this file's SHA-256: a stale build is not used */
#endif

typedef struct {
    PyObject_HEAD
    Py_ssize_t n_trees;
    Py_ssize_t n_nodes;
    Py_ssize_t n_features;
    int64_t *roots;   /* first node of each tree (global index) */
    int64_t *left;    /* global index of the left child, -1 for a leaf */
    int64_t *right;
    int64_t *feature;
    double *threshold;
    double *p0;
    double *p1;
    double *row;      /* scratch: the row rounded to float32, as doubles */
    PyObject *classes; /* the two class labels predict_one answers with, or NULL */
} ForestObject;

static void
forest_free_arrays(ForestObject *self)
{
    PyMem_Free(self->roots);
    PyMem_Free(self->left);
    PyMem_Free(self->right);
    PyMem_Free(self->feature);
    PyMem_Free(self->threshold);
    PyMem_Free(self->p0);
    PyMem_Free(self->p1);
    PyMem_Free(self->row);
    self->roots = self->left = self->right = self->feature = NULL;
    self->threshold = self->p0 = self->p1 = self->row = NULL;
}

static void
forest_dealloc(ForestObject *self)
{
    forest_free_arrays(self);
    Py_CLEAR(self->classes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A buffer's struct format without its native byte-order prefix ("B" when it gives none). */
static const char *
item_format(const Py_buffer *view)
{
    const char *format = view->format ? view->format : "B";
    return (*format == '<' || *format == '=' || *format == '@') ? format + 1 : format;
}

/* A copy of a 1-d C-contiguous buffer of `itemsize`-byte items with struct format `kind`
 * (the caller passes numpy int64 or float64 arrays); NULL and an exception otherwise. */
static void *
copy_buffer(PyObject *obj, const char *name, char kind, Py_ssize_t *length)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    const char *format = item_format(&view);
    int ok = view.ndim == 1 && view.itemsize == 8 && format[1] == '\0' &&
             (kind == 'd' ? format[0] == 'd' : (format[0] == 'q' || format[0] == 'l'));
    if (!ok) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "%s must be a 1-d array of %s", name,
                     kind == 'd' ? "float64" : "int64");
        return NULL;
    }
    *length = view.shape[0];
    void *out = PyMem_Malloc(view.len > 0 ? (size_t)view.len : 1);
    if (out == NULL) {
        PyBuffer_Release(&view);
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(out, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return out;
}

static int
forest_init(ForestObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"offsets", "left", "right", "feature", "threshold", "p0", "p1",
                            "n_features", "classes", NULL};
    PyObject *objs[7];
    PyObject *classes = Py_None;
    Py_ssize_t n_features;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOn|O", names, &objs[0], &objs[1],
                                     &objs[2], &objs[3], &objs[4], &objs[5], &objs[6],
                                     &n_features, &classes))
        return -1;
    if (classes != Py_None && !(PyTuple_CheckExact(classes) && PyTuple_GET_SIZE(classes) == 2)) {
        PyErr_SetString(PyExc_ValueError, "classes must be a tuple of two labels");
        return -1;
    }
    Py_CLEAR(self->classes);
    if (classes != Py_None) {
        Py_INCREF(classes);
        self->classes = classes;
    }
    forest_free_arrays(self);
    Py_ssize_t n_offsets, n, lengths[6];
    int64_t *offsets = copy_buffer(objs[0], "offsets", 'q', &n_offsets);
    if (offsets == NULL)
        return -1;
    self->left = copy_buffer(objs[1], "left", 'q', &lengths[0]);
    self->right = self->left ? copy_buffer(objs[2], "right", 'q', &lengths[1]) : NULL;
    self->feature = self->right ? copy_buffer(objs[3], "feature", 'q', &lengths[2]) : NULL;
    self->threshold = self->feature ? copy_buffer(objs[4], "threshold", 'd', &lengths[3]) : NULL;
    self->p0 = self->threshold ? copy_buffer(objs[5], "p0", 'd', &lengths[4]) : NULL;
    self->p1 = self->p0 ? copy_buffer(objs[6], "p1", 'd', &lengths[5]) : NULL;
    if (self->p1 == NULL)
        goto fail;
    n = lengths[0];
    for (int i = 1; i < 6; i++) {
        if (lengths[i] != n) {
            PyErr_SetString(PyExc_ValueError, "the per-node arrays differ in length");
            goto fail;
        }
    }
    if (n_features < 1) {
        PyErr_SetString(PyExc_ValueError, "n_features must be positive");
        goto fail;
    }
    if (n_offsets < 2 || offsets[0] != 0 || offsets[n_offsets - 1] != n) {
        PyErr_SetString(PyExc_ValueError, "the tree offsets do not cover the nodes");
        goto fail;
    }
    for (Py_ssize_t t = 0; t + 1 < n_offsets; t++) {
        int64_t start = offsets[t], end = offsets[t + 1];
        if (end <= start) {
            PyErr_SetString(PyExc_ValueError, "the tree offsets do not cover the nodes");
            goto fail;
        }
        for (int64_t i = start; i < end; i++) {
            int64_t local = i - start, size = end - start;
            int64_t l = self->left[i], r = self->right[i];
            if (l == -1 || r == -1) {
                if (l != r) {
                    PyErr_SetString(PyExc_ValueError, "a node has exactly one child");
                    goto fail;
                }
                continue;
            }
            if (l <= local || l >= size || r <= local || r >= size) {
                PyErr_SetString(PyExc_ValueError,
                                "a child is outside its tree or not after its parent");
                goto fail;
            }
            if (self->feature[i] < 0 || self->feature[i] >= n_features) {
                PyErr_SetString(PyExc_ValueError, "a split uses a feature out of range");
                goto fail;
            }
            /* children as global indices: the walk needs no offset */
            self->left[i] = l + start;
            self->right[i] = r + start;
        }
    }
    self->n_trees = n_offsets - 1;
    self->n_nodes = n;
    self->n_features = n_features;
    self->roots = offsets; /* offsets[t] is tree t's root */
    self->row = PyMem_Malloc((size_t)n_features * sizeof(double));
    if (self->row == NULL) {
        PyErr_NoMemory();
        forest_free_arrays(self);
        return -1;
    }
    return 0;
fail:
    PyMem_Free(offsets);
    forest_free_arrays(self);
    return -1;
}

/* The arrays a walk reads. */
typedef struct {
    const int64_t *left, *right, *feature;
    const double *threshold, *x;
} Walk;

/* One step of a walk from *node: to its child, 1; 0 at a leaf. */
static inline int
step(Walk w, int64_t *node)
{
    int64_t at = *node;
    if (w.left[at] == -1)
        return 0;
    *node = w.x[w.feature[at]] <= w.threshold[at] ? w.left[at] : w.right[at];
    return 1;
}

/* The two class sums of the row in self->row (already rounded to float32), in tree order. */
static void
forest_walk(const ForestObject *self, double *first_sum, double *second_sum)
{
    const Walk w = {self->left, self->right, self->feature, self->threshold, self->row};
    const double *p0 = self->p0, *p1 = self->p1;
    double first = 0.0, second = 0.0;
    Py_ssize_t t = 0;
    /* four trees walked side by side: each step of a walk waits for its node's line, and four
     * independent walks wait together (`|`, not `||`: every walk steps); their leaves are
     * added in tree order all the same */
    for (; t + 4 <= self->n_trees; t += 4) {
        int64_t a = self->roots[t], b = self->roots[t + 1], c = self->roots[t + 2],
                d = self->roots[t + 3];
        while (step(w, &a) | step(w, &b) | step(w, &c) | step(w, &d))
            ;
        first += p0[a];
        second += p1[a];
        first += p0[b];
        second += p1[b];
        first += p0[c];
        second += p1[c];
        first += p0[d];
        second += p1[d];
    }
    for (; t < self->n_trees; t++) {
        int64_t node = self->roots[t];
        while (step(w, &node))
            ;
        first += p0[node];
        second += p1[node];
    }
    *first_sum = first;
    *second_sum = second;
}

/* self->row from a sequence of numbers (each rounded to float32); -1 and an exception if it
 * is not one of n_features numbers. */
static int
forest_read_row(ForestObject *self, PyObject *row)
{
    if (self->roots == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the forest is not initialised");
        return -1;
    }
    PyObject *seq = PySequence_Fast(row, "a row must be a sequence of numbers");
    if (seq == NULL)
        return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    if (m != self->n_features) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "a row of %zd features, not %zd", m, self->n_features);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    double *x = self->row;
    for (Py_ssize_t j = 0; j < m; j++) {
        double value = PyFloat_CheckExact(items[j]) ? PyFloat_AS_DOUBLE(items[j])
                                                    : PyFloat_AsDouble(items[j]);
        if (value == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        x[j] = (double)(float)value; /* numpy's float32 cast: round to nearest even */
    }
    Py_DECREF(seq);
    return 0;
}

static PyObject *
forest_proba(ForestObject *self, PyObject *row)
{
    double first, second;
    if (forest_read_row(self, row) < 0)
        return NULL;
    forest_walk(self, &first, &second);
    double count = (double)self->n_trees;
    return Py_BuildValue("(dd)", first / count, second / count);
}

/* FastForest.predict_one: the second class label if its probability is larger, else the first
 * (ties to the first), the probabilities being proba's quotients, compared as Python compares
 * them. */
static PyObject *
forest_predict_one(ForestObject *self, PyObject *row)
{
    if (self->classes == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the forest was built without its classes");
        return NULL;
    }
    double first, second;
    if (forest_read_row(self, row) < 0)
        return NULL;
    forest_walk(self, &first, &second);
    double count = (double)self->n_trees;
    PyObject *label = PyTuple_GET_ITEM(self->classes, second / count > first / count ? 1 : 0);
    Py_INCREF(label);
    return label;
}

/* winners(rows, out): for each row of `rows` (a C-contiguous 2-d float32 array of n_features
 * columns), out[i] = 1 if the second class wins (FastForest.predict_one), else 0 (`out`: a
 * writable 1-d uint8 array, one item a row). The rows are float32 already: the same values as
 * forest_read_row's rounding of them. */
static PyObject *
forest_winners(ForestObject *self, PyObject *args)
{
    PyObject *rows_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OO", &rows_obj, &out_obj))
        return NULL;
    if (self->roots == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the forest is not initialised");
        return NULL;
    }
    Py_buffer rows, out;
    if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) <
        0) {
        PyBuffer_Release(&rows);
        return NULL;
    }
    const char *rf = item_format(&rows), *of = item_format(&out);
    if (rows.ndim != 2 || rows.itemsize != 4 || strcmp(rf, "f") != 0 ||
        rows.shape[1] != self->n_features) {
        PyErr_Format(PyExc_ValueError, "rows must be a 2-d float32 array of %zd columns",
                     self->n_features);
        goto fail;
    }
    if (out.ndim != 1 || out.itemsize != 1 || strcmp(of, "B") != 0 ||
        out.shape[0] != rows.shape[0]) {
        PyErr_SetString(PyExc_ValueError, "out must be a 1-d uint8 array, one item a row");
        goto fail;
    }
    const float *x = (const float *)rows.buf;
    unsigned char *won = (unsigned char *)out.buf;
    double count = (double)self->n_trees;
    for (Py_ssize_t i = 0; i < rows.shape[0]; i++) {
        for (Py_ssize_t j = 0; j < self->n_features; j++)
            self->row[j] = (double)x[i * self->n_features + j];
        double first, second;
        forest_walk(self, &first, &second);
        won[i] = second / count > first / count;
    }
    PyBuffer_Release(&rows);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&rows);
    PyBuffer_Release(&out);
    return NULL;
}

static PyObject *
forest_get_n_trees(ForestObject *self, void *closure)
{
    return PyLong_FromSsize_t(self->n_trees);
}

static PyMethodDef forest_methods[] = {
    {"proba", (PyCFunction)forest_proba, METH_O,
     "proba(row) -> (p_first, p_second): one row's class probabilities, as FastForest.proba."},
    {"predict_one", (PyCFunction)forest_predict_one, METH_O,
     "predict_one(row) -> label: the class FastForest.predict_one gives (needs classes=)."},
    {"winners", (PyCFunction)forest_winners, METH_VARARGS,
     "winners(rows, out): out[i] = 1 where the second class wins row i (FastForest.predict)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef forest_getset[] = {
    {"n_trees", (getter)forest_get_n_trees, NULL, "number of trees", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ForestType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "batsched_ml.predict._cforest.Forest",
    .tp_basicsize = sizeof(ForestObject),
    .tp_dealloc = (destructor)forest_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Forest(offsets, left, right, feature, threshold, p0, p1, n_features, "
              "classes=None): compile_forest's arrays (int64 and float64), copied and "
              "checked, and the two class labels predict_one answers with.",
    .tp_methods = forest_methods,
    .tp_getset = forest_getset,
    .tp_init = (initproc)forest_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "batsched_ml.predict._cforest",
    .m_doc = "FastForest's walk, compiled (batsched_ml/predict/forest.py is the reference).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__cforest(void)
{
    if (PyType_Ready(&ForestType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ForestType);
    if (PyModule_AddObject(m, "Forest", (PyObject *)&ForestType) < 0 ||
        PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(&ForestType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* The weekly forest's trees, grown in C: the very trees of scikit-learn's
 * RandomForestClassifier (Gini, best splits, depth-first), found with less work.
 *
 * scikit-learn's tree sorts the node's samples on each drawn feature at every node. This file
 * finds the same split without sorting: every feature of the training set is turned into ranks
 * once a week (the distinct values in ascending order, shared by the week's 40 trees), and a
 * node adds its samples' class weights into one bin per rank, then walks the bins in order
 * (when a feature has far more distinct values than the node has samples, it sorts the node's
 * ranks instead). Walking the bins visits the node's values in the order the sorted samples
 * have, so everything scikit-learn computes from that order is computed here from the same
 * numbers:
 *
 * - split positions: between two present values v_prev < v where NOT (v <= v_prev + 1e-7) in
 *   float32 arithmetic (scikit-learn's FEATURE_THRESHOLD is a float32), at least
 *   min_samples_leaf samples on each side;
 *   a feature is constant in a node when max <= min + 1e-7 (float32);
 * - the class weights left of a position: sums of bootstrap counts, integers, so exact in any
 *   order; Gini, the proxy improvement and the improvement are scikit-learn's expressions on
 *   them, operation for operation;
 * - the best split: the first strictly greater proxy, features in the order drawn, positions
 *   ascending; the threshold v_prev / 2 + v / 2 in double;
 * - the features drawn: scikit-learn's Fisher-Yates draw with its xorshift generator
 *   (our_rand_r, seeded with RandomState(tree seed).randint(0, 2**31 - 1)), its bookkeeping of
 *   known and newly found constant features carried from node to node in depth-first order;
 * - the nodes: numbered as popped from a stack (left child first), a node's value its class
 *   weights divided by its weight, leaf tests and impurities as in DepthFirstTreeBuilder.
 *
 * batsched_ml/predict/grow.py prepares the input and is the only caller; scikit-learn's own
 * fit is the reference (tests/test_grow.py compares every array of every tree). setup.py
 * builds it with -ffp-contract=off: no fused multiply-add may change a rounding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "" /* setup.py passes this file's SHA-256: a stale build is not used */
#endif

#define TREE_LEAF (-1)
#define TREE_UNDEFINED (-2)
#define RAND_R_MAX 2147483647u

/* scikit-learn: `cdef const float32_t FEATURE_THRESHOLD = 1e-7` (a float, rounded from the
 * double literal) */
static const float FEATURE_THRESHOLD = (float)1e-7;

typedef struct {
    int64_t start, end, depth, parent, is_left, n_constant;
    double impurity;
    uint64_t sums; /* the packed sums of samples[start:end] (its parent's split counted them) */
} Record;

/* A sample's class weights and count packed into one integer, so that a bin takes one addition:
 * bits 0-20 the number of samples, 21-41 the weight of class 0, 42-62 that of class 1. The
 * weights are bootstrap counts: integers, and every sum of them is below 2**21 (checked), so the
 * sums are exact, as scikit-learn's double sums of the same integers are. */
#define FIELD 21
#define FIELD_MASK ((UINT64_C(1) << FIELD) - 1)
#define COUNT_OF(v) ((int64_t)((v)&FIELD_MASK))
#define W0_OF(v) ((double)(((v) >> FIELD) & FIELD_MASK))
#define W1_OF(v) ((double)(((v) >> (2 * FIELD)) & FIELD_MASK))
#define COPIES 4 /* bins of a feature with few values: one set per sample position mod 4 */

typedef struct {
    /* input, compacted to the rows of nonzero weight (the tree's samples, in row order) */
    int64_t m;              /* how many */
    int32_t *ranks;         /* (n_features, m): each sample's rank of each feature */
    uint64_t *packed;       /* each sample's count and class weight, packed */
    const float *values;    /* the distinct values of all features, ascending per feature */
    const int64_t *offsets; /* feature f's values are values[offsets[f]:offsets[f + 1]] */
    int64_t n_features, max_features, min_samples_leaf, min_samples_split, max_depth;
    uint32_t rand_state;
    double weighted_n_samples;
    /* work */
    int32_t *samples;       /* 0 .. m-1, partitioned node by node */
    int32_t *right_samples; /* a partition's right side, before it is copied back */
    int64_t *features, *constant_features;
    uint64_t *bins;         /* per rank (COPIES sets): packed sums, all zero between uses */
    uint64_t *keys, *spare; /* the sort path: rank << 32 | sample */
    /* output */
    int64_t capacity, node_count;
    int64_t *left, *right, *feature, *n_node;
    double *threshold, *impurity, *wn_node, *value;
    uint8_t *missing_left;
} Grower;

typedef struct {
    int64_t feature, pos;
    double threshold, proxy, impurity_left, impurity_right, improvement;
    int missing_go_to_left;
    uint64_t left_sums; /* the packed sums of samples[start:pos] once partitioned */
} Split;

static uint32_t
our_rand_r(uint32_t *seed)
{
    if (*seed == 0)
        *seed = 1;
    *seed ^= (uint32_t)(*seed << 13);
    *seed ^= (uint32_t)(*seed >> 17);
    *seed ^= (uint32_t)(*seed << 5);
    return *seed % (RAND_R_MAX + 1u);
}

static int64_t
rand_int(int64_t low, int64_t high, uint32_t *seed)
{
    return low + (int64_t)our_rand_r(seed) % (high - low);
}

/* Gini of one side, as scikit-learn's children_impurity (one output, two classes) */
static double
gini(double c0, double c1, double weight)
{
    double sq = 0.0;
    sq += c0 * c0;
    sq += c1 * c1;
    double g = 0.0;
    g += 1.0 - sq / (weight * weight);
    return g / 1.0;
}

/* A candidate position: the packed sums `left` of the samples on its left. */
static inline void
consider(Split *best, int64_t f, int64_t start, int64_t n, uint64_t left, double t0, double t1,
         double wn, float v_prev, float v, int64_t min_leaf)
{
    int64_t n_left = COUNT_OF(left);
    if (n_left < min_leaf || n - n_left < min_leaf)
        return;
    double l0 = W0_OF(left), l1 = W1_OF(left);
    double wl = l0 + l1;
    double wr = wn - wl;
    double il = gini(l0, l1, wl);
    double ir = gini(t0 - l0, t1 - l1, wr);
    double proxy = -wr * ir - wl * il;
    if (proxy > best->proxy) {
        best->proxy = proxy;
        best->feature = f;
        best->pos = start + n_left;
        best->threshold = (double)v_prev / 2.0 + (double)v / 2.0;
        best->missing_go_to_left = n_left > n - n_left;
    }
}

/* Sorts n keys by their high 32 bits, of which the low `bits` may be nonzero (LSD radix, 8 bits
 * a pass, stable); the sorted keys are in `keys` or `spare`: the one returned. Every pass's
 * digit counts are taken in one sweep first (a digit's count does not depend on the order);
 * a pass whose digit is the same in every key is skipped. */
static uint64_t *
radix_sort(uint64_t *keys, uint64_t *spare, int64_t n, int bits)
{
    int64_t count[4][256];
    int passes = (bits + 7) / 8;
    if (passes == 0)
        return keys;
    memset(count, 0, sizeof(count[0]) * (size_t)passes);
    if (passes == 1) {
        for (int64_t i = 0; i < n; i++)
            count[0][(keys[i] >> 32) & 0xff]++;
    } else if (passes == 2) {
        for (int64_t i = 0; i < n; i++) {
            uint64_t k = keys[i] >> 32;
            count[0][k & 0xff]++;
            count[1][(k >> 8) & 0xff]++;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            uint64_t k = keys[i] >> 32;
            for (int p = 0; p < passes; p++)
                count[p][(k >> (8 * p)) & 0xff]++;
        }
    }
    for (int p = 0; p < passes; p++) {
        int shift = 32 + 8 * p;
        int64_t *c = count[p];
        if (c[(keys[0] >> shift) & 0xff] == n)
            continue; /* one digit: already in order */
        int64_t sum = 0;
        for (int d = 0; d < 256; d++) {
            int64_t here = c[d];
            c[d] = sum;
            sum += here;
        }
        for (int64_t i = 0; i < n; i++)
            spare[c[(keys[i] >> shift) & 0xff]++] = keys[i];
        uint64_t *t = keys;
        keys = spare;
        spare = t;
    }
    return keys;
}

static int
bits_of(int64_t n)
{
    int bits = 0;
    while (bits < 32 && ((int64_t)1 << bits) < n)
        bits++;
    return bits;
}

/* Scan feature f over samples[start:end]; 1 if it is constant there, else 0 (and `best`
 * updated with its positions). */
static int
scan_feature(Grower *g, Split *best, int64_t f, int64_t start, int64_t end, double t0, double t1,
             double wn)
{
    const int32_t *rank = g->ranks + f * g->m;
    const float *vals = g->values + g->offsets[f];
    int64_t n_values = g->offsets[f + 1] - g->offsets[f];
    int64_t n = end - start, msl = g->min_samples_leaf;
    const int32_t *samples = g->samples;
    const uint64_t *packed = g->packed;
    if (n_values <= 2 * n + 1024) {
        /* bins; with few values, COPIES sets of them, so that samples of one value in a row
         * do not wait for each other's addition */
        int copies = COPIES * n_values * 2 <= n ? COPIES : 1;
        uint64_t *bins = g->bins;
        int32_t lo = INT32_MAX, hi = -1;
        if (copies == COPIES) {
            /* no lowest and highest rank kept sample by sample: the few values' bins are
             * summed into the first set afterwards, and the present ones found there */
            uint64_t *b0 = bins, *b1 = bins + n_values, *b2 = b1 + n_values, *b3 = b2 + n_values;
            int64_t p = start;
            for (; p + COPIES <= end; p += COPIES) {
                b0[rank[samples[p]]] += packed[samples[p]];
                b1[rank[samples[p + 1]]] += packed[samples[p + 1]];
                b2[rank[samples[p + 2]]] += packed[samples[p + 2]];
                b3[rank[samples[p + 3]]] += packed[samples[p + 3]];
            }
            for (; p < end; p++)
                b0[rank[samples[p]]] += packed[samples[p]];
            for (int32_t r = 0; r < (int32_t)n_values; r++) {
                uint64_t here = b0[r] + b1[r] + b2[r] + b3[r];
                b1[r] = b2[r] = b3[r] = 0;
                b0[r] = here;
                if (here != 0) {
                    lo = r < lo ? r : lo;
                    hi = r;
                }
            }
            copies = 1;
        } else {
            for (int64_t p = start; p < end; p++) {
                int32_t r = rank[samples[p]];
                bins[r] += packed[samples[p]];
                lo = r < lo ? r : lo;
                hi = r > hi ? r : hi;
            }
        }
        int constant = vals[hi] <= vals[lo] + FEATURE_THRESHOLD;
        uint64_t left = 0;
        float v_prev = 0.0f;
        for (int32_t r = lo; r <= hi; r++) {
            uint64_t here = bins[r];
            bins[r] = 0;
            for (int c = 1; c < copies; c++) {
                here += bins[c * n_values + r];
                bins[c * n_values + r] = 0;
            }
            if (here == 0)
                continue;
            float v = vals[r];
            if (!constant && r != lo && !(v <= v_prev + FEATURE_THRESHOLD))
                consider(best, f, start, n, left, t0, t1, wn, v_prev, v, msl);
            left += here;
            v_prev = v;
        }
        return constant;
    }
    uint64_t *keys = g->keys;
    for (int64_t p = start; p < end; p++) {
        int32_t s = samples[p];
        keys[p - start] = ((uint64_t)(uint32_t)rank[s] << 32) | (uint64_t)(uint32_t)s;
    }
    keys = radix_sort(keys, g->spare, n, bits_of(n_values));
    int32_t lo = (int32_t)(keys[0] >> 32), hi = (int32_t)(keys[n - 1] >> 32);
    if (vals[hi] <= vals[lo] + FEATURE_THRESHOLD)
        return 1;
    uint64_t left = 0;
    float v_prev = 0.0f;
    int32_t r_prev = -1;
    for (int64_t i = 0; i < n; i++) {
        int32_t r = (int32_t)(keys[i] >> 32);
        if (r != r_prev) {
            float v = vals[r];
            if (r_prev >= 0 && !(v <= v_prev + FEATURE_THRESHOLD))
                consider(best, f, start, n, left, t0, t1, wn, v_prev, v, msl);
            v_prev = v;
            r_prev = r;
        }
        left += packed[keys[i] & 0xffffffffu];
    }
    return 0;
}

/* The packed sums of samples[start:end] */
static uint64_t
sums_of(const Grower *g, int64_t start, int64_t end)
{
    uint64_t sum = 0;
    for (int64_t p = start; p < end; p++)
        sum += g->packed[g->samples[p]];
    return sum;
}

/* scikit-learn's node_split_best for samples[start:end] (class weights t0, t1, weight wn) */
static void
node_split(Grower *g, Record *rec, double t0, double t1, double wn, Split *best)
{
    int64_t start = rec->start, end = rec->end;
    int64_t *features = g->features, *constant_features = g->constant_features;
    int64_t f_i = g->n_features, f_j, tmp;
    int64_t n_visited = 0, n_found = 0, n_drawn = 0;
    int64_t n_known = rec->n_constant, n_total = n_known;
    best->pos = end;
    best->feature = 0;
    best->threshold = 0.0;
    best->proxy = -INFINITY;
    best->impurity_left = best->impurity_right = INFINITY;
    best->improvement = -INFINITY;
    best->missing_go_to_left = 0;
    while (f_i > n_total &&
           (n_visited < g->max_features || n_visited <= n_found + n_drawn)) {
        n_visited++;
        f_j = rand_int(n_drawn, f_i - n_found, &g->rand_state);
        if (f_j < n_known) {
            tmp = features[n_drawn];
            features[n_drawn] = features[f_j];
            features[f_j] = tmp;
            n_drawn++;
            continue;
        }
        f_j += n_found;
        if (scan_feature(g, best, features[f_j], start, end, t0, t1, wn)) {
            tmp = features[f_j];
            features[f_j] = features[n_total];
            features[n_total] = tmp;
            n_found++;
            n_total++;
            continue;
        }
        f_i--;
        tmp = features[f_i];
        features[f_i] = features[f_j];
        features[f_j] = tmp;
    }
    if (best->pos < end) {
        /* partition_samples_final: X <= threshold goes left, that is, as the values are
         * ascending, a rank up to the last whose value is <= threshold */
        const int32_t *rank = g->ranks + best->feature * g->m;
        const float *vals = g->values + g->offsets[best->feature];
        int32_t last = -1, above = (int32_t)(g->offsets[best->feature + 1] -
                                             g->offsets[best->feature]);
        while (above - last > 1) { /* vals[last] <= threshold < vals[above] */
            int32_t middle = last + (above - last) / 2;
            if ((double)vals[middle] <= best->threshold)
                last = middle;
            else
                above = middle;
        }
        /* stable: the samples of every node stay in ascending order (those of the root are
         * 0 .. m-1), so that the scans read each feature's ranks forward, not at random (the
         * split found does not depend on their order: sums of integers, and splits only
         * between distinct values) */
        int32_t *samples = g->samples, *right = g->right_samples;
        int64_t a = start, n_right = 0;
        for (int64_t p = start; p < end; p++) { /* without a branch: a node's samples go
                                                  * either way in no order a branch predicts */
            int32_t s = samples[p];
            int64_t goes_left = rank[s] <= last;
            samples[a] = s; /* a <= p: a sample not read yet is never overwritten */
            right[n_right] = s;
            a += goes_left;
            n_right += 1 - goes_left;
        }
        memcpy(samples + a, right, sizeof(int32_t) * (size_t)n_right);
        uint64_t left = sums_of(g, start, best->pos);
        best->left_sums = left;
        double l0 = W0_OF(left), l1 = W1_OF(left);
        double wl = l0 + l1;
        double wr = wn - wl;
        best->impurity_left = gini(l0, l1, wl);
        best->impurity_right = gini(t0 - l0, t1 - l1, wr);
        best->improvement = (wn / g->weighted_n_samples) *
                            (rec->impurity - (wr / wn * best->impurity_right) -
                             (wl / wn * best->impurity_left));
    }
    memcpy(features, constant_features, sizeof(int64_t) * (size_t)n_known);
    memcpy(constant_features + n_known, features + n_known, sizeof(int64_t) * (size_t)n_found);
    rec->n_constant = n_total;
}

/* DepthFirstTreeBuilder.build; 0, or -1 when out of capacity or memory */
static int
build(Grower *g)
{
    int64_t stack_size = 0, stack_capacity = 64;
    Record *stack = malloc(sizeof(Record) * (size_t)stack_capacity);
    if (stack == NULL)
        return -1;
    stack[stack_size++] =
        (Record){0, g->m, 0, TREE_UNDEFINED, 0, 0, INFINITY, sums_of(g, 0, g->m)};
    int first = 1;
    while (stack_size > 0) {
        Record rec = stack[--stack_size];
        int64_t n = rec.end - rec.start;
        uint64_t sums = rec.sums;
        double t0 = W0_OF(sums), t1 = W1_OF(sums);
        double wn = t0 + t1;
        int is_leaf = rec.depth >= g->max_depth || n < g->min_samples_split ||
                      n < 2 * g->min_samples_leaf;
        if (first) {
            rec.impurity = gini(t0, t1, wn); /* node_impurity: the same expression */
            first = 0;
        }
        is_leaf = is_leaf || rec.impurity <= DBL_EPSILON;
        Split split;
        if (!is_leaf) {
            node_split(g, &rec, t0, t1, wn, &split);
            is_leaf = split.pos >= rec.end || split.improvement + DBL_EPSILON < 0.0;
        }
        int64_t id = g->node_count;
        if (id >= g->capacity) {
            free(stack);
            return -1;
        }
        g->node_count++;
        g->impurity[id] = rec.impurity;
        g->n_node[id] = n;
        g->wn_node[id] = wn;
        if (rec.parent != TREE_UNDEFINED) {
            if (rec.is_left)
                g->left[rec.parent] = id;
            else
                g->right[rec.parent] = id;
        }
        if (is_leaf) {
            g->left[id] = g->right[id] = TREE_LEAF;
            g->feature[id] = TREE_UNDEFINED;
            g->threshold[id] = TREE_UNDEFINED;
            g->missing_left[id] = 0;
        } else {
            g->feature[id] = split.feature;
            g->threshold[id] = split.threshold;
            g->missing_left[id] = (uint8_t)split.missing_go_to_left;
        }
        g->value[2 * id] = t0 / wn;
        g->value[2 * id + 1] = t1 / wn;
        if (!is_leaf) {
            if (stack_size + 2 > stack_capacity) {
                stack_capacity *= 2;
                Record *grown = realloc(stack, sizeof(Record) * (size_t)stack_capacity);
                if (grown == NULL) {
                    free(stack);
                    return -1;
                }
                stack = grown;
            }
            stack[stack_size++] = (Record){split.pos, rec.end, rec.depth + 1, id, 0,
                                           rec.n_constant, split.impurity_right,
                                           sums - split.left_sums};
            stack[stack_size++] = (Record){rec.start, split.pos, rec.depth + 1, id, 1,
                                           rec.n_constant, split.impurity_left, split.left_sums};
        }
    }
    free(stack);
    return 0;
}

/* A buffer of `ndim` dimensions, C-contiguous, of struct format `kind` (one of "iqfdB"). */
static int
get_buffer(PyObject *obj, const char *name, char kind, int ndim, int writable, Py_buffer *view)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    const char *format = view->format ? view->format : "B";
    if (*format == '<' || *format == '=' || *format == '@')
        format++;
    char got = format[0];
    if (got == 'l' && view->itemsize == 8)
        got = 'q';
    size_t size = kind == 'i' || kind == 'f' ? 4 : (kind == 'B' ? 1 : 8);
    if (view->ndim != ndim || (size_t)view->itemsize != size || got != kind ||
        format[1] != '\0') {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: expected a %d-d C-contiguous array of format '%c'",
                     name, ndim, kind);
        return -1;
    }
    return 0;
}

#define N_BUFFERS 13

static PyObject *
grow(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"ranks", "values", "offsets", "y", "indices", "left", "right", "feature",
                            "threshold", "impurity", "n_node_samples",
                            "weighted_n_node_samples", "value", "missing_go_to_left",
                            "max_features", "min_samples_leaf", "min_samples_split",
                            "max_depth", "seed", NULL};
    PyObject *objs[N_BUFFERS + 1];
    long long max_features, min_samples_leaf, min_samples_split, max_depth;
    unsigned long long seed;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOOOOOOLLLLK", names, &objs[0],
                                     &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                                     &objs[6], &objs[7], &objs[8], &objs[9], &objs[10],
                                     &objs[11], &objs[12], &objs[13], &max_features,
                                     &min_samples_leaf, &min_samples_split, &max_depth, &seed))
        return NULL;
    static const char kinds[] = "ifqBqqqqddqddB";
    static const int dims[] = {2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    Py_buffer views[N_BUFFERS + 1];
    int got = 0;
    for (; got < N_BUFFERS + 1; got++) {
        if (get_buffer(objs[got], names[got], kinds[got], dims[got], got >= 5, &views[got]) < 0)
            break;
    }
    PyObject *result = NULL;
    if (got < N_BUFFERS + 1)
        goto done;
    int64_t n_features = views[0].shape[0], n_rows = views[0].shape[1];
    int64_t capacity = views[5].shape[0];
    int ok = views[2].shape[0] == n_features + 1 && views[3].shape[0] == n_rows &&
             views[4].shape[0] >= 1 && n_rows < ((int64_t)1 << 31) &&
             max_features >= 1 && min_samples_leaf >= 1 && max_depth >= 0 &&
             seed <= RAND_R_MAX && views[12].shape[0] == 2 * capacity;
    for (int i = 6; ok && i < N_BUFFERS + 1; i++)
        ok = i == 12 || views[i].shape[0] == capacity;
    const int64_t *offsets = views[2].buf;
    const int32_t *ranks = views[0].buf;
    const uint8_t *y = views[3].buf;
    const int64_t *indices = views[4].buf;
    int64_t n_draws = views[4].shape[0];
    int64_t max_values = 0;
    for (int64_t f = 0; ok && f < n_features; f++) {
        int64_t k = offsets[f + 1] - offsets[f];
        ok = offsets[f] >= 0 && k >= 1 && offsets[f + 1] <= views[1].shape[0];
        if (k > max_values)
            max_values = k;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "grow: inconsistent shapes, ranks or parameters");
        goto done;
    }
    Grower g = {
        .values = views[1].buf, .offsets = offsets, .n_features = n_features,
        .max_features = max_features, .min_samples_leaf = min_samples_leaf,
        .min_samples_split = min_samples_split, .max_depth = max_depth,
        .rand_state = (uint32_t)seed, .capacity = capacity, .left = views[5].buf,
        .right = views[6].buf, .feature = views[7].buf, .threshold = views[8].buf,
        .impurity = views[9].buf, .n_node = views[10].buf, .wn_node = views[11].buf,
        .value = views[12].buf, .missing_left = views[13].buf,
    };
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    /* each row's weight: how often the bootstrap drew it (scikit-learn's counts); the rows of
     * nonzero weight, in order, are the samples (its splitter.init); every sum of weights is at
     * most n_draws, which must fit a packed field */
    int32_t *count = calloc((size_t)n_rows, sizeof(int32_t));
    int64_t m = 0;
    if (count == NULL) {
        failed = 1;
    } else {
        for (int64_t d = 0; d < n_draws; d++) {
            int64_t i = indices[d];
            if (i < 0 || i >= n_rows)
                failed = 4;
            else
                m += count[i]++ == 0;
        }
    }
    if (!failed && n_draws >= (int64_t)FIELD_MASK)
        failed = 3;
    double total = (double)n_draws; /* the sum of the weights, exact */
    g.m = m;
    g.weighted_n_samples = total;
    size_t rows = (size_t)(m > 0 ? m : 1);
    size_t columns = (size_t)(n_features > 0 ? n_features : 1);
    g.ranks = malloc(sizeof(int32_t) * rows * columns);
    g.packed = malloc(sizeof(uint64_t) * rows);
    g.samples = malloc(sizeof(int32_t) * rows);
    g.right_samples = malloc(sizeof(int32_t) * rows);
    g.keys = malloc(sizeof(uint64_t) * rows);
    g.spare = malloc(sizeof(uint64_t) * rows);
    g.features = malloc(sizeof(int64_t) * columns);
    g.constant_features = malloc(sizeof(int64_t) * columns);
    g.bins = calloc((size_t)COPIES * ((size_t)max_values + 1), sizeof(uint64_t));
    if (failed) {
    } else if (!g.ranks || !g.packed || !g.samples || !g.right_samples || !g.keys || !g.spare ||
               !g.features || !g.constant_features || !g.bins) {
        failed = 1;
    } else {
        int32_t *row_of = g.samples; /* first the rows kept, then the samples 0 .. m-1 */
        int64_t j = 0;
        for (int64_t i = 0; i < n_rows; i++) {
            if (count[i] == 0)
                continue;
            uint64_t weight = (uint64_t)count[i];
            g.packed[j] = 1 + (y[i] ? weight << (2 * FIELD) : weight << FIELD);
            row_of[j++] = (int32_t)i;
        }
        uint32_t bad = 0; /* a rank beyond its feature's values (checked where used) */
        for (int64_t f = 0; f < n_features; f++) {
            const int32_t *column = ranks + f * n_rows;
            int32_t *to = g.ranks + f * m;
            uint32_t k = (uint32_t)(offsets[f + 1] - offsets[f]);
            for (j = 0; j < m; j++) {
                int32_t r = column[row_of[j]];
                to[j] = r;
                bad |= (uint32_t)r >= k;
            }
        }
        for (j = 0; j < m; j++)
            g.samples[j] = (int32_t)j;
        for (int64_t f = 0; f < n_features; f++)
            g.features[f] = f;
        if (bad)
            failed = 4;
        else if (!failed)
            failed = build(&g) < 0 ? 1 : 0;
    }
    free(count);
    free(g.ranks);
    free(g.packed);
    free(g.samples);
    free(g.right_samples);
    free(g.keys);
    free(g.spare);
    free(g.features);
    free(g.constant_features);
    free(g.bins);
    Py_END_ALLOW_THREADS
    if (failed == 1)
        PyErr_SetString(PyExc_MemoryError, "grow: out of memory or node capacity");
    else if (failed == 3)
        PyErr_SetString(PyExc_ValueError, "grow: 2**21 bootstrap draws or more");
    else if (failed == 4)
        PyErr_SetString(PyExc_ValueError,
                        "grow: inconsistent ranks or indices (beyond their values or rows)");
    else
        result = PyLong_FromLongLong(g.node_count);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    return result;
}

/* The float whose sort key (rank_columns) is k: the key inverted. */
static inline float
value_of(uint32_t k)
{
    uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    float v;
    memcpy(&v, &u, sizeof(v));
    return v;
}

/* An open-addressing set of sort keys (linear probing), and each slot's rank once sorted.
 * EMPTY is the key of a NaN, which a column never holds (finite values). */
#define EMPTY UINT32_MAX
#define TABLE_BITS_MAX 16 /* more distinct values than 2**15: the rows are sorted instead */

typedef struct {
    uint32_t *keys;
    int32_t *slot_rank;
    int bits;
} Table;

static inline uint32_t
slot_of(const Table *t, uint32_t k)
{
    uint32_t mask = ((uint32_t)1 << t->bits) - 1;
    uint32_t s = (uint32_t)(k * 2654435769u) >> (32 - t->bits);
    while (t->keys[s] != k && t->keys[s] != EMPTY)
        s = (s + 1) & mask;
    return s;
}

/* The table emptied, with 2**bits slots; 0, or -1 without memory. */
static int
table_reset(Table *t, int bits)
{
    if (t->bits != bits || t->keys == NULL) {
        free(t->keys);
        free(t->slot_rank);
        t->keys = malloc(sizeof(uint32_t) << bits);
        t->slot_rank = malloc(sizeof(int32_t) << bits);
        t->bits = bits;
        if (t->keys == NULL || t->slot_rank == NULL)
            return -1;
    }
    memset(t->keys, 0xff, sizeof(uint32_t) << bits);
    return 0;
}

/* The table's keys, each as the high half of keys[i] (radix_sort's keys); how many. */
static int64_t
table_keys(const Table *t, uint64_t *keys)
{
    int64_t m = 0;
    for (int64_t j = 0; j < ((int64_t)1 << t->bits); j++)
        if (t->keys[j] != EMPTY)
            keys[m++] = (uint64_t)t->keys[j] << 32;
    return m;
}

/* Ranks a column of sort keys without sorting its rows: its distinct keys gathered in a hash
 * table, only they sorted (a week's column holds 3 to a few thousand distinct values among
 * 50,000 rows), then each row's rank read from its key's slot. Writes rank[0:n] and the
 * distinct values ascending into values; returns how many, -1 when there are too many for the
 * table (the caller sorts the rows), -2 without memory. `keys` and `spare` hold n each. */
static int64_t
rank_hashed(const uint32_t *column, int64_t n, Table *t, uint64_t *keys, uint64_t *spare,
            int32_t *rank, float *values)
{
    int bits = 10;
    int64_t count = 0;
    if (table_reset(t, bits) < 0)
        return -2;
    for (int64_t i = 0; i < n; i++) {
        uint32_t k = column[i];
        if (k == EMPTY)
            return -1;
        uint32_t s = slot_of(t, k);
        if (t->keys[s] == EMPTY) {
            t->keys[s] = k;
            if (++count * 2 > ((int64_t)1 << bits)) { /* half full: twice the slots */
                if (bits == TABLE_BITS_MAX || 4 * count > n)
                    return -1;
                int64_t m = table_keys(t, keys);
                if (table_reset(t, ++bits) < 0)
                    return -2;
                for (int64_t j = 0; j < m; j++) {
                    uint32_t kj = (uint32_t)(keys[j] >> 32);
                    t->keys[slot_of(t, kj)] = kj;
                }
            }
        }
    }
    int64_t m = table_keys(t, keys);
    uint64_t *sorted = radix_sort(keys, spare, m, 32);
    for (int64_t j = 0; j < m; j++) {
        uint32_t k = (uint32_t)(sorted[j] >> 32);
        values[j] = value_of(k);
        t->slot_rank[slot_of(t, k)] = (int32_t)j;
    }
    for (int64_t i = 0; i < n; i++)
        rank[i] = t->slot_rank[slot_of(t, column[i])];
    return m;
}

/* rank(x, ranks, values, offsets, first=0) -> None: columns first .. first + k - 1 of x
 * (float32, (rows, features), finite; k = ranks.shape[0]) ranked: column first + f's distinct
 * values ascending into values[offsets[f]:offsets[f + 1]], each row's rank among them into
 * ranks[f] ((k, rows) int32). -0.0 counts as 0.0 (equal values, as numpy.unique has them).
 * x is read where it is: threads that rank different columns share it, with no copy. */
static PyObject *
rank_columns(PyObject *self, PyObject *args)
{
    PyObject *objs[4];
    Py_ssize_t first = 0;
    if (!PyArg_ParseTuple(args, "OOOO|n", &objs[0], &objs[1], &objs[2], &objs[3], &first))
        return NULL;
    static const char *names[] = {"x", "ranks", "values", "offsets"};
    static const char kinds[] = "fifq";
    static const int dims[] = {2, 2, 1, 1};
    Py_buffer views[4];
    int got = 0;
    for (; got < 4; got++) {
        if (get_buffer(objs[got], names[got], kinds[got], dims[got], got >= 1, &views[got]) < 0)
            break;
    }
    PyObject *result = NULL;
    if (got < 4)
        goto done;
    int64_t n_rows = views[0].shape[0], width = views[0].shape[1];
    int64_t n_features = views[1].shape[0];
    if (first < 0 || first + n_features > width || views[1].shape[1] != n_rows ||
        views[2].shape[0] != n_features * n_rows || views[3].shape[0] != n_features + 1 ||
        n_rows < 1 || n_rows >= ((int64_t)1 << 31)) {
        PyErr_SetString(PyExc_ValueError, "rank: inconsistent shapes");
        goto done;
    }
    const float *x = views[0].buf;
    int32_t *ranks = views[1].buf;
    float *values = views[2].buf;
    int64_t *offsets = views[3].buf;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)n_rows);
    uint64_t *spare = malloc(sizeof(uint64_t) * (size_t)n_rows);
    uint32_t *column = malloc(sizeof(uint32_t) * (size_t)n_rows);
    Table table = {NULL, NULL, 0};
    if (keys == NULL || spare == NULL || column == NULL) {
        failed = 1;
    } else {
        int64_t filled = 0;
        offsets[0] = 0;
        for (int64_t f = 0; f < n_features && !failed; f++) {
            for (int64_t i = 0; i < n_rows; i++) {
                float v = x[i * width + first + f];
                uint32_t u;
                if (v == 0.0f)
                    v = 0.0f;
                memcpy(&u, &v, sizeof(u));
                column[i] = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending */
            }
            int32_t *rank = ranks + f * n_rows;
            int64_t distinct =
                rank_hashed(column, n_rows, &table, keys, spare, rank, values + filled);
            if (distinct == -2) {
                failed = 1;
            } else if (distinct < 0) { /* too many distinct values: sort the rows */
                for (int64_t i = 0; i < n_rows; i++)
                    keys[i] = ((uint64_t)column[i] << 32) | (uint64_t)i;
                uint64_t *sorted = radix_sort(keys, spare, n_rows, 32);
                int32_t r = -1;
                uint64_t previous = 0;
                for (int64_t i = 0; i < n_rows; i++) {
                    uint64_t high = sorted[i] >> 32;
                    if (r < 0 || high != previous) {
                        r++;
                        previous = high;
                        values[filled + r] = value_of((uint32_t)high);
                    }
                    rank[sorted[i] & 0xffffffffu] = r;
                }
                distinct = r + 1;
            }
            filled += distinct;
            offsets[f + 1] = filled;
        }
    }
    free(column);
    free(table.keys);
    free(table.slot_rank);
    free(keys);
    free(spare);
    Py_END_ALLOW_THREADS
    if (failed)
        PyErr_NoMemory();
    else
        result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"grow", (PyCFunction)(void (*)(void))grow, METH_VARARGS | METH_KEYWORDS,
     "grow(ranks, values, offsets, y, indices, left, right, feature, threshold, impurity, "
     "n_node_samples, weighted_n_node_samples, value, missing_go_to_left, max_features, "
     "min_samples_leaf, min_samples_split, max_depth, seed) -> node_count: one tree into the "
     "given arrays (batsched_ml/predict/grow.py)."},
    {"rank", rank_columns, METH_VARARGS,
     "rank(x, ranks, values, offsets, first=0) -> None: each column's distinct values and each "
     "row's rank among them, from column `first` on (batsched_ml/predict/grow.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "batsched_ml.predict._cgrow",
    .m_doc = "The weekly forest's trees, grown as scikit-learn grows them (batsched_ml/predict/"
             "grow.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cgrow(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* SimGrid 3.32's clock and sleep actions on the exact platform, shared by the two compiled
 * kernels: _ckernel.c (the actors are Python generators) and _csim.c (the actors are C state
 * machines, the scheduler a Python callback). The rules are batsched_ml/sim/simgrid.py's design note, the
 * reference: the step is the smallest of every sleep's remaining max_duration and the transfer's
 * remains / rate; `now += step`; then every sleep's `m - step` and the transfer's
 * `remains - rate * step` (built with -ffp-contract=off: no fused multiply-add), set to an end
 * below the precisions (surf/precision 1e-9 for durations, 1e-9 x 1e-5 for work); the actions
 * that end wake their actors in the order the actions were created.
 *
 * A source that includes this file counts it in its digest (batsched_ml/compiled.py's
 * source_digest): a changed header makes both builds stale.
 */
#ifndef BATSCHED_ML_SIMGRID_CLOCK_H
#define BATSCHED_ML_SIMGRID_CLOCK_H

#include <Python.h>
#include <string.h>

static double TIMING_PRECISION;
static double WORK_PRECISION;
static double COMM_RATE;

/* the precisions as Python computes them in simgrid.py, at run time in double */
static void
clock_constants(void)
{
    volatile double surf = 1e-9, maxmin = 1e-5, rate = 1e12;
    TIMING_PRECISION = surf;
    WORK_PRECISION = maxmin * surf;
    COMM_RATE = rate;
}

/* The sleeps, sorted by remaining duration, lowest first (see simgrid.Kernel): every sleep
   loses the same steps and rounding is monotonic, so the order never changes and the sleeps a
   step ends are a prefix. `sleepers` are the kernel's actors (it owns their references). */
typedef struct {
    double *ms;
    long long *keys;
    void **sleepers;
    Py_ssize_t n, cap;
} SleepList;

static int
sleep_add(SleepList *s, void *sleeper, double duration, long long key)
{
    if (s->n == s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 64;
        double *ms = PyMem_Realloc(s->ms, cap * sizeof(double));
        if (ms == NULL)
            goto nomem;
        s->ms = ms;
        long long *keys = PyMem_Realloc(s->keys, cap * sizeof(long long));
        if (keys == NULL)
            goto nomem;
        s->keys = keys;
        void **sleepers = PyMem_Realloc(s->sleepers, cap * sizeof(void *));
        if (sleepers == NULL)
            goto nomem;
        s->sleepers = sleepers;
        s->cap = cap;
    }
    Py_ssize_t lo = 0, hi = s->n; /* bisect_right: after the equal ones */
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (duration < s->ms[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    Py_ssize_t tail = s->n - lo;
    memmove(s->ms + lo + 1, s->ms + lo, tail * sizeof(double));
    memmove(s->keys + lo + 1, s->keys + lo, tail * sizeof(long long));
    memmove(s->sleepers + lo + 1, s->sleepers + lo, tail * sizeof(void *));
    s->ms[lo] = duration;
    s->keys[lo] = key;
    s->sleepers[lo] = sleeper;
    s->n++;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

static void
sleep_remove(SleepList *s, Py_ssize_t at, Py_ssize_t count)
{
    Py_ssize_t tail = s->n - at - count;
    memmove(s->ms + at, s->ms + at + count, tail * sizeof(double));
    memmove(s->keys + at, s->keys + at + count, tail * sizeof(long long));
    memmove(s->sleepers + at, s->sleepers + at + count, tail * sizeof(void *));
    s->n -= count;
}

static void
sleep_free(SleepList *s)
{
    PyMem_Free(s->ms);
    PyMem_Free(s->keys);
    PyMem_Free(s->sleepers);
    s->ms = NULL;
    s->keys = NULL;
    s->sleepers = NULL;
    s->n = s->cap = 0;
}

/* A mailbox: the requests (communications) not yet matched, first in first out, as a ring. */
typedef struct {
    void **items;
    Py_ssize_t head, len, cap;
} Mailbox;

static int
mailbox_push(Mailbox *box, void *comm)
{
    if (box->len == box->cap) {
        Py_ssize_t cap = box->cap ? 2 * box->cap : 16;
        void **items = PyMem_Malloc(cap * sizeof(void *));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < box->len; i++)
            items[i] = box->items[(box->head + i) % box->cap];
        PyMem_Free(box->items);
        box->items = items;
        box->cap = cap;
        box->head = 0;
    }
    box->items[(box->head + box->len) % box->cap] = comm;
    box->len++;
    return 0;
}

/* the i-th pending request (0: the first) */
static inline void *
mailbox_at(const Mailbox *box, Py_ssize_t i)
{
    return box->items[(box->head + i) % box->cap];
}

static inline void *
mailbox_pop(Mailbox *box)
{
    void *comm = box->items[box->head];
    box->head = (box->head + 1) % box->cap;
    box->len--;
    return comm;
}

/* What the kernel does with an ended action: wake a sleeper (the list's reference to it moves
   to the callee), end the transfer. `failed` says an earlier wake failed: the callee then only
   releases what it holds. Both return -1 on error. */
typedef int (*WakeSleeper)(void *kernel, void *sleeper, int failed);
typedef int (*EndTransfer)(void *kernel, int failed);

/* One step of the clock (EngineImpl::solve, handle_ended_actions): 1 if it moved, 0 if nothing
   can happen any more, -1 on error. `remains` is the transfer's under way (NULL: none), `key`
   its creation key; when it ends, end_transfer is called at its place among the ended sleeps. */
static int
clock_solve(double *now, SleepList *s, double *remains, long long key, void *kernel,
            WakeSleeper wake, EndTransfer end_transfer)
{
    double *ms = s->ms;
    Py_ssize_t n = s->n;
    double step;
    if (remains != NULL) {
        step = *remains > 0 ? *remains / COMM_RATE : 0.0;
        if (n && ms[0] < step)
            step = ms[0];
    }
    else if (n)
        step = ms[0];
    else
        return 0;
    *now += step;
    for (Py_ssize_t i = 0; i < n; i++)
        ms[i] = ms[i] - step; /* double_update, for every sleep */
    Py_ssize_t done = 0;
    while (done < n && ms[done] < TIMING_PRECISION)
        done++;
    int transfer_ended = 0;
    if (remains != NULL) {
        double left = *remains - COMM_RATE * step;
        if (left < WORK_PRECISION)
            transfer_ended = 1;
        else
            *remains = left;
    }
    if (done == 0)
        return transfer_ended ? (end_transfer(kernel, 0) < 0 ? -1 : 1) : 1;
    /* the ended sleeps in the order they were created (insertion sort: a handful at most) */
    long long *keys = PyMem_Malloc(done * sizeof(long long));
    void **sleepers = PyMem_Malloc(done * sizeof(void *));
    if (keys == NULL || sleepers == NULL) {
        PyMem_Free(keys);
        PyMem_Free(sleepers);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < done; i++) {
        long long k = s->keys[i];
        void *sleeper = s->sleepers[i];
        Py_ssize_t j = i;
        while (j > 0 && keys[j - 1] > k) {
            keys[j] = keys[j - 1];
            sleepers[j] = sleepers[j - 1];
            j--;
        }
        keys[j] = k;
        sleepers[j] = sleeper;
    }
    sleep_remove(s, 0, done);
    int failed = 0;
    for (Py_ssize_t i = 0; i < done; i++) {
        if (transfer_ended && key < keys[i]) {
            transfer_ended = 0;
            if (end_transfer(kernel, failed) < 0)
                failed = 1;
        }
        if (wake(kernel, sleepers[i], failed) < 0)
            failed = 1;
    }
    if (transfer_ended && end_transfer(kernel, failed) < 0)
        failed = 1;
    PyMem_Free(keys);
    PyMem_Free(sleepers);
    return failed ? -1 : 1;
}

#endif

/* The compiled replay engine: the embedded Batsim and the FCFS-EASY scheduler of the base
 * variant, in one C loop, for the replays that need nothing else (batsched_ml/compiled_replay.py
 * says which).
 *
 * It is a transcription, not a model: the references are batsched_ml/sim/simulator.py (Batsim's
 * actors: the static submitter, the server, one REQ-REP actor per message, one actor per job),
 * batsched_ml/sim/simgrid.py (SimGrid's scheduling rounds, here as in _ckernel.c; the clock, the
 * sleeps, the step and the mailbox are _simgrid_clock.h's, the very code _ckernel.c runs: the
 * same double operations in the same order, the same creation keys, the same ties),
 * batsched_ml/scheduler/core.py with easy.py (one EASY pass per message that brought a
 * submission or a completion, the queue in FCFS order, the lowest-numbered free machines) and
 * batsched_ml/sim/jobs_csv.py (each row from SimGrid's clock in long double, as Batsim's
 * export.cpp). Each actor is a state machine whose states are the yields of its Python
 * generator, so the simcalls, their order and their sub-rounds are the same; the EXCHANGE of the
 * REQ-REP actor calls the scheduler directly (it takes no simulated time).
 *
 * What FCFS-EASY makes simpler, and why it is the same:
 * - the queue is a list in arrival order: the submitter sends jobs by (subtime, id as a string),
 *   so FCFS's key (subtime, subtime, seq) puts each new job last; the starvation threshold's
 *   starving jobs are then a prefix of that order, in that order, and change nothing;
 * - machines are a bitset of 64-bit words; an allocation is kept as its maximal runs, which is
 *   also how Batsim writes it;
 * - decisions are valid by construction (the simulator's checks of a decision are the Python
 *   path's business: any workload this engine is not sure of goes there instead).
 *
 * The tests replay traces, random workloads (equal submission times, ids whose string order is
 * not their numeric order, walltime kills, jobs wider than the machine, fractional times that
 * make SimGrid's clock drift) and the recordings with this engine and with the Python path and
 * compare every file byte for byte (tests/test_compiled_replay.py). Built with
 * -ffp-contract=off like _ckernel.c.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "" /* setup.py passes this file's SHA-256: a stale build is not used */
#endif

#include "_simgrid_clock.h" /* the clock, the sleeps and the step: shared with _ckernel.c */

static const double NO_WALLTIME_ESTIMATE = 86400.0; /* predictors.DAY */
/* the keys the loader reads, made once (PyDict_GetItemString makes a string per call) */
static PyObject *KEY_ID, *KEY_SUBTIME, *KEY_RES, *KEY_WALLTIME, *KEY_PROFILE, *KEY_TYPE,
    *KEY_DELAY;

/* --- jobs --------------------------------------------------------------------------------- */

enum { J_LOADED, J_SUBMITTED, J_RUNNING, J_DONE, J_REJECTED };

typedef struct {
    PyObject *name;    /* str(obj["id"]) */
    PyObject *profile; /* obj["profile"], a str */
    PyObject *walltime_obj; /* the workload's walltime value (the prediction), NULL if none */
    const char *name_utf8, *profile_utf8;
    size_t name_size, profile_size; /* their bytes, measured once at the load */
    double subtime, delay, walltime; /* walltime < 0: none */
    double est;                      /* the scheduler's estimate: the requested time */
    long res;
    long long seq; /* the scheduler's arrival number */
    int state, walltime_reached;
    double start, end;
    int *runs; /* allocation: [low, high] pairs */
    int nruns;
    Py_ssize_t qprev, qnext; /* the scheduler's queue */
} Job;

/* --- what goes to the server (IPMessageType) and to the scheduler ------------------------ */

enum { P_HELLO, P_BYE, P_SUBMITTED, P_COMPLETED, P_EXECUTE, P_REJECT, P_READY, P_NONE };

typedef struct {
    int kind;
    Py_ssize_t a, b; /* a job, or a batch [a, b) of the submission order */
} Payload;

enum { EV_BEGINS, EV_SUBMITTED, EV_COMPLETED, EV_NOTIFY, EV_ENDS };

typedef struct {
    int type;
    double stamp;
    Py_ssize_t job;
} Event;

enum { D_EXECUTE, D_REJECT };

typedef struct {
    int type;
    double stamp;
    Py_ssize_t job;
} Decision;

/* --- actors --------------------------------------------------------------------------------- */

enum { A_SUBMITTER, A_SERVER, A_REQREP, A_JOB };
enum { K_DONE, K_SLEEP, K_PUT, K_GET, K_CREATE };

typedef struct Actor Actor;

typedef struct {
    int kind;
    double duration;
    Payload payload;
    Actor *created;
} Call;

struct Actor {
    Actor *prev, *next; /* the living actors */
    int type, pc;
    Payload answer;
    /* submitter */
    double current;
    Py_ssize_t pos, batch_lo;
    /* server: where its send returns */
    int send_return;
    /* REQ-REP: its message and the reply */
    Event *events;
    Py_ssize_t nevents;
    double msg_now;
    Decision *decisions;
    Py_ssize_t ndecisions, di;
    /* job */
    Py_ssize_t job;
};

typedef struct {
    int is_send, nwaiting;
    Payload payload;
    Actor *waiting[2];
    double remains;
    long long key;
} Comm;

typedef struct {
    double end;
    long long tie;
    long res;
    Py_ssize_t job;
} End;

typedef struct {
    void *items;
    Py_ssize_t len, cap;
} Vec;

static int
vec_reserve(Vec *v, Py_ssize_t need, size_t size)
{
    if (need <= v->cap)
        return 0;
    Py_ssize_t cap = v->cap ? v->cap : 16;
    while (cap < need)
        cap *= 2;
    void *items = PyMem_Realloc(v->items, cap * size);
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    v->items = items;
    v->cap = cap;
    return 0;
}

#define VEC_AT(v, type, i) (((type *)(v).items)[i])

static int
vec_push(Vec *v, const void *item, size_t size)
{
    if (vec_reserve(v, v->len + 1, size) < 0)
        return -1;
    memcpy((char *)v->items + v->len * size, item, size);
    v->len++;
    return 0;
}

/* --- the engine ------------------------------------------------------------------------------ */

typedef struct {
    Job *jobs;
    Py_ssize_t njobs;
    Py_ssize_t *order; /* the submission order: by subtime, then id as a string */
    long nb_machines;
    int backfilling;
    PyObject *progress;
    /* kernel */
    double now;
    long long keys;
    Vec ran, to_run;       /* Actor* */
    Vec calls, call_actors; /* Call, Actor* */
    Mailbox box; /* the server's, the only one Batsim's actors use */
    SleepList sleeps; /* of Actor* */
    Comm *comm;
    Actor *living; /* the actors whose code is not over (freed when it is) */
    /* server (ServerData) */
    Vec outbox; /* Event */
    int sched_ready, end_sent, end_ack, submitters_done;
    Py_ssize_t live, to_delete, running;
    /* scheduler */
    uint64_t *free;
    Py_ssize_t words;
    long free_count;
    Py_ssize_t qhead, qtail, qlen;
    Vec ends;    /* End, sorted by (end, tie) */
    Vec scratch; /* End, a pass's ends with its own starts */
    Vec started; /* Py_ssize_t */
    long long seq;
    int sched_ended;
    /* results */
    PyObject *rows, *rejected, *predictions;
    long long messages;
    char *buf;
    size_t bufcap;
} Engine;

/* a time as the scheduler reads it: Batsim prints SimGrid's clock with %f (simulator.json_time) */
static double
json_time(double clock)
{
    if (clock == floor(clock))
        return clock;
    char text[64];
    snprintf(text, sizeof text, "%.6f", clock);
    return strtod(text, NULL);
}

/* --- the kernel (simgrid.Kernel) -------------------------------------------------------------- */

static Actor *
new_actor(Engine *E, int type)
{
    Actor *actor = PyMem_Calloc(1, sizeof(Actor));
    if (actor == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    actor->type = type;
    actor->answer.kind = P_NONE;
    actor->next = E->living;
    if (E->living != NULL)
        E->living->prev = actor;
    E->living = actor;
    return actor;
}

/* An actor whose code is over: nothing refers to it any more (it is running: neither asleep
   nor waiting on a communication). */
static void
free_actor(Engine *E, Actor *actor)
{
    if (actor->prev != NULL)
        actor->prev->next = actor->next;
    else
        E->living = actor->next;
    if (actor->next != NULL)
        actor->next->prev = actor->prev;
    PyMem_Free(actor->events);
    PyMem_Free(actor->decisions);
    PyMem_Free(actor);
}

static int
start_comm(Engine *E, Comm *comm)
{
    if (E->comm != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "two transfers at once (a bug of _creplay)");
        return -1;
    }
    comm->key = E->keys++;
    E->comm = comm;
    return 0;
}

static int
wake(Engine *E, Actor *actor, Payload payload)
{
    actor->answer = payload;
    return vec_push(&E->to_run, &actor, sizeof(Actor *));
}

static int
end_comm(Engine *E, Comm *comm)
{
    int failed = 0;
    for (int i = 0; i < comm->nwaiting; i++)
        if (wake(E, comm->waiting[i], comm->payload) < 0)
            failed = 1;
    PyMem_Free(comm);
    return failed ? -1 : 0;
}

static int
wake_sleeper(void *kernel, void *sleeper, int failed)
{
    Payload none = {P_NONE, 0, 0};
    return failed ? -1 : wake(kernel, sleeper, none);
}

static int
end_transfer(void *kernel, int failed)
{
    Engine *E = kernel;
    Comm *comm = E->comm;
    E->comm = NULL;
    if (failed) {
        PyMem_Free(comm);
        return -1;
    }
    return end_comm(E, comm);
}

/* One step of the clock (_simgrid_clock.h): 1 if it moved, 0 if nothing can happen, -1. */
static int
solve(Engine *E)
{
    Comm *comm = E->comm;
    return clock_solve(&E->now, &E->sleeps, comm != NULL ? &comm->remains : NULL,
                       comm != NULL ? comm->key : 0, E, wake_sleeper, end_transfer);
}

static int
handle_comm(Engine *E, Actor *actor, const Call *call, int is_send)
{
    Comm *comm;
    if (E->box.len && ((Comm *)mailbox_at(&E->box, 0))->is_send != is_send) {
        comm = mailbox_pop(&E->box);
        if (is_send)
            comm->payload = call->payload;
        if (start_comm(E, comm) < 0)
            return -1;
    }
    else {
        comm = PyMem_Malloc(sizeof(Comm));
        if (comm == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        comm->is_send = is_send;
        comm->nwaiting = 0;
        comm->payload = is_send ? call->payload : (Payload){P_NONE, 0, 0};
        comm->remains = 1.0;
        comm->key = -1;
        if (mailbox_push(&E->box, comm) < 0) {
            PyMem_Free(comm);
            return -1;
        }
    }
    comm->waiting[comm->nwaiting++] = actor;
    return 0;
}

static int
handle_calls(Engine *E)
{
    Py_ssize_t n = E->calls.len;
    for (Py_ssize_t i = 0; i < n; i++) {
        Actor *actor = VEC_AT(E->call_actors, Actor *, i);
        Call *call = &VEC_AT(E->calls, Call, i);
        switch (call->kind) {
        case K_PUT:
        case K_GET:
            if (handle_comm(E, actor, call, call->kind == K_PUT) < 0)
                return -1;
            break;
        case K_SLEEP:
            if (sleep_add(&E->sleeps, actor, call->duration, E->keys) < 0)
                return -1;
            E->keys++;
            break;
        case K_CREATE: { /* ActorImpl::start: appended to the run list, then the creator */
            Payload none = {P_NONE, 0, 0};
            if (vec_push(&E->to_run, &call->created, sizeof(Actor *)) < 0 ||
                wake(E, actor, none) < 0)
                return -1;
            break;
        }
        default:
            PyErr_SetString(PyExc_RuntimeError, "unknown simcall (a bug of _creplay)");
            return -1;
        }
    }
    E->calls.len = 0;
    E->call_actors.len = 0;
    return 0;
}

/* --- jobs.csv rows (jobs_csv.finished_row, rejected_row) ------------------------------------ */

static int
reserve_buf(Engine *E, size_t need)
{
    if (need <= E->bufcap)
        return 0;
    size_t cap = E->bufcap ? E->bufcap : 512;
    while (cap < need)
        cap *= 2;
    char *buf = PyMem_Realloc(E->buf, cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    E->buf = buf;
    E->bufcap = cap;
    return 0;
}

static int
append_row(Engine *E, size_t len)
{
    PyObject *row = PyUnicode_DecodeUTF8(E->buf, (Py_ssize_t)len, NULL);
    if (row == NULL)
        return -1;
    int failed = PyList_Append(E->rows, row);
    Py_DECREF(row);
    return failed;
}

#define PUT_LITERAL(at, text) put((at), (text), sizeof(text) - 1)

/* Append text to the row being written (room was reserved). */
static inline char *
put(char *at, const char *text, size_t len)
{
    memcpy(at, text, len);
    return at + len;
}

static char *
put_long(char *at, long long value)
{
    char digits[24];
    int n = 0;
    unsigned long long v = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (value < 0)
        *at++ = '-';
    while (n)
        *at++ = digits[--n];
    return at;
}

/* A double as C's (and Python's) "%.6f": an integer below 2**53 (not -0.0) is its exact
   decimal and ".000000", written here; anything else goes through snprintf. */
static char *
put_fixed6(char *at, double value)
{
    if (value == floor(value) && fabs(value) < 9007199254740992.0 &&
        !(value == 0 && signbit(value))) {
        at = put_long(at, (long long)value);
        return PUT_LITERAL(at, ".000000");
    }
    return at + snprintf(at, 360, "%.6f", value); /* %.6f of a double: at most 317 + 7 */
}

static int
finished_row(Engine *E, Job *job)
{
    /* export.cpp: the runtime in long double (1e-5 for a job that ran in no time), the rest
       derived from it in long double, each cast to double for %f */
    long double start = job->start, sub = job->subtime;
    long double runtime = (long double)job->end - start;
    if (runtime == 0)
        runtime = 1e-5L;
    long double completion = start + runtime;
    long double turnaround = completion - sub;
    size_t name = job->name_size, profile = job->profile_size;
    if (reserve_buf(E, name + profile + 8 * 400 + (size_t)job->nruns * 24) < 0)
        return -1;
    char *at = E->buf;
    at = put(at, job->name_utf8, name);
    at = PUT_LITERAL(at, ",w0,");
    at = put(at, job->profile_utf8, profile);
    *at++ = ',';
    at = put_fixed6(at, job->subtime);
    *at++ = ',';
    at = put_long(at, job->res);
    *at++ = ',';
    at = put_fixed6(at, job->walltime >= 0 ? job->walltime : -1.0);
    at = job->walltime_reached ? PUT_LITERAL(at, ",0,COMPLETED_WALLTIME_REACHED,")
                               : PUT_LITERAL(at, ",1,COMPLETED_SUCCESSFULLY,");
    double times[6] = {job->start,          (double)runtime,    (double)completion,
                       (double)(start - sub), (double)turnaround, (double)(turnaround / runtime)};
    for (int k = 0; k < 6; k++) {
        at = put_fixed6(at, times[k]);
        *at++ = ',';
    }
    for (int r = 0; r < job->nruns; r++) {
        int low = job->runs[2 * r], high = job->runs[2 * r + 1];
        if (r)
            *at++ = ' ';
        at = put_long(at, low);
        if (high != low) {
            *at++ = '-';
            at = put_long(at, high);
        }
    }
    at = PUT_LITERAL(at, ",-1.000000,\"\"");
    return append_row(E, (size_t)(at - E->buf));
}

static int
rejected_row(Engine *E, Job *job)
{
    size_t need = job->name_size + job->profile_size + 200;
    if (reserve_buf(E, need) < 0)
        return -1;
    int len = snprintf(E->buf, E->bufcap, "%s,w0,%s,%.6f,%ld,%.6f,0,REJECTED,,,,,,,,,\"\"",
                       job->name_utf8, job->profile_utf8, job->subtime, job->res,
                       job->walltime >= 0 ? job->walltime : -1.0);
    if (len < 0 || (size_t)len >= E->bufcap) {
        PyErr_SetString(PyExc_RuntimeError, "row too long (a bug of _creplay)");
        return -1;
    }
    return append_row(E, (size_t)len);
}

/* --- the scheduler (core.BatchScheduler with easy.easy_pass, FCFS, requested time) ------------ */

static void
queue_append(Engine *E, Py_ssize_t j)
{
    Job *job = &E->jobs[j];
    job->qnext = -1;
    job->qprev = E->qtail;
    if (E->qtail >= 0)
        E->jobs[E->qtail].qnext = j;
    else
        E->qhead = j;
    E->qtail = j;
    E->qlen++;
}

static void
queue_remove(Engine *E, Py_ssize_t j)
{
    Job *job = &E->jobs[j];
    if (job->qprev >= 0)
        E->jobs[job->qprev].qnext = job->qnext;
    else
        E->qhead = job->qnext;
    if (job->qnext >= 0)
        E->jobs[job->qnext].qprev = job->qprev;
    else
        E->qtail = job->qprev;
    E->qlen--;
}

/* Take the `count` lowest-numbered free machines for `job` (alloc.lowest), as maximal runs. */
static int
take_lowest(Engine *E, Job *job, long count)
{
    Vec runs = {NULL, 0, 0};
    long left = count;
    for (Py_ssize_t w = 0; w < E->words && left > 0; w++) {
        uint64_t x = E->free[w];
        while (x && left > 0) {
            int b = __builtin_ctzll(x);
            uint64_t shifted = x >> b;
            int run = ~shifted ? __builtin_ctzll(~shifted) : 64;
            int take = run < left ? run : (int)left;
            uint64_t bits = (take == 64 ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1)) << b;
            x &= ~bits;
            E->free[w] &= ~bits;
            left -= take;
            int low = (int)(w * 64 + b), high = low + take - 1;
            if (runs.len && VEC_AT(runs, int, runs.len - 1) + 1 == low)
                VEC_AT(runs, int, runs.len - 1) = high;
            else {
                int pair[2] = {low, high};
                if (vec_reserve(&runs, runs.len + 2, sizeof(int)) < 0)
                    return -1;
                memcpy(&VEC_AT(runs, int, runs.len), pair, sizeof pair);
                runs.len += 2;
            }
        }
    }
    if (left > 0) {
        PyMem_Free(runs.items);
        PyErr_SetString(PyExc_RuntimeError, "not enough free machines (a bug of _creplay)");
        return -1;
    }
    job->runs = runs.items;
    job->nruns = (int)(runs.len / 2);
    E->free_count -= count;
    return 0;
}

static void
release(Engine *E, Job *job)
{
    for (int r = 0; r < job->nruns; r++)
        for (int m = job->runs[2 * r]; m <= job->runs[2 * r + 1]; m++)
            E->free[m / 64] |= (uint64_t)1 << (m % 64);
    E->free_count += job->res;
}

static inline int
end_before(const End *a, double end, long long tie)
{
    return a->end < end || (a->end == end && a->tie < tie);
}

/* insort: after the entries that sort before (end, tie) */
static int
ends_insert(Vec *ends, End entry)
{
    if (vec_reserve(ends, ends->len + 1, sizeof(End)) < 0)
        return -1;
    End *items = ends->items;
    Py_ssize_t lo = 0, hi = ends->len;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (end_before(&items[mid], entry.end, entry.tie) ||
            (items[mid].end == entry.end && items[mid].tie == entry.tie))
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(items + lo + 1, items + lo, (ends->len - lo) * sizeof(End));
    items[lo] = entry;
    ends->len++;
    return 0;
}

static int
add_decision(Vec *decisions, int type, double stamp, Py_ssize_t job)
{
    Decision d = {type, stamp, job};
    return vec_push(decisions, &d, sizeof(Decision));
}

/* One EASY pass (easy.easy_pass) at `now`, then each start (core.BatchScheduler.start). */
static int
schedule(Engine *E, double now, Vec *decisions)
{
    if (E->qlen == 0)
        return 0;
    E->started.len = 0;
    Py_ssize_t j = E->qhead;
    while (j >= 0 && E->jobs[j].res <= E->free_count) {
        if (take_lowest(E, &E->jobs[j], E->jobs[j].res) < 0)
            return -1;
        if (vec_push(&E->started, &j, sizeof j) < 0)
            return -1;
        j = E->jobs[j].qnext;
    }
    if (j >= 0 && E->backfilling) {
        Job *head = &E->jobs[j];
        const End *ends = E->ends.items;
        Py_ssize_t nends = E->ends.len;
        if (E->started.len) { /* jobs started above end too: count their expected ends in */
            E->scratch.len = 0;
            if (vec_reserve(&E->scratch, nends + E->started.len, sizeof(End)) < 0)
                return -1;
            memcpy(E->scratch.items, ends, nends * sizeof(End));
            E->scratch.len = nends;
            for (Py_ssize_t k = 0; k < E->started.len; k++) {
                Job *s = &E->jobs[VEC_AT(E->started, Py_ssize_t, k)];
                End entry = {now + s->est, -1 - k, s->res, -1};
                if (ends_insert(&E->scratch, entry) < 0)
                    return -1;
            }
            ends = E->scratch.items;
            nends = E->scratch.len;
        }
        /* reservation_for */
        long available = E->free_count;
        int found = 0;
        double shadow = 0.0;
        for (Py_ssize_t k = 0; k < nends; k++) {
            if (found && ends[k].end > shadow)
                break;
            available += ends[k].res;
            if (!found && available >= head->res) {
                shadow = ends[k].end > now ? ends[k].end : now;
                found = 1;
            }
        }
        if (!found) {
            PyErr_SetString(PyExc_RuntimeError, "a job can never start (a bug of _creplay)");
            return -1;
        }
        long extra = available - head->res;
        if (E->free_count > 0) {
            for (Py_ssize_t b = head->qnext; b >= 0; b = E->jobs[b].qnext) {
                Job *job = &E->jobs[b];
                long res = job->res;
                if (res > E->free_count)
                    continue;
                if (now + job->est <= shadow) {
                }
                else if (res <= extra)
                    extra -= res;
                else
                    continue;
                if (take_lowest(E, job, res) < 0)
                    return -1;
                if (vec_push(&E->started, &b, sizeof b) < 0)
                    return -1;
                if (E->free_count == 0)
                    break;
            }
        }
    }
    for (Py_ssize_t k = 0; k < E->started.len; k++) {
        Py_ssize_t s = VEC_AT(E->started, Py_ssize_t, k);
        Job *job = &E->jobs[s];
        queue_remove(E, s);
        End entry = {now + job->est, job->seq, job->res, s};
        if (ends_insert(&E->ends, entry) < 0)
            return -1;
        if (add_decision(decisions, D_EXECUTE, now, s) < 0)
            return -1;
    }
    return 0;
}

/* BatchScheduler.handle: record the message's events, then one pass if one may change a
   decision; the rejections of the message come first. */
static int
scheduler_handle(Engine *E, Actor *reqrep)
{
    Vec decisions = {NULL, 0, 0};
    double now = reqrep->msg_now;
    int dirty = 0;
    for (Py_ssize_t i = 0; i < reqrep->nevents; i++) {
        Event *ev = &reqrep->events[i];
        switch (ev->type) {
        case EV_BEGINS:
            break;
        case EV_SUBMITTED: {
            Job *job = &E->jobs[ev->job];
            dirty = 1;
            if (job->res > E->nb_machines || job->res <= 0) {
                PyObject *id = PyUnicode_FromFormat("w0!%U", job->name);
                if (id == NULL || PyList_Append(E->rejected, id) < 0) {
                    Py_XDECREF(id);
                    goto fail;
                }
                Py_DECREF(id);
                if (add_decision(&decisions, D_REJECT, ev->stamp, ev->job) < 0)
                    goto fail;
                break;
            }
            /* MeasuredPredictor: the prediction at the first submission */
            PyObject *id = PyUnicode_FromFormat("w0!%U", job->name);
            if (id == NULL)
                goto fail;
            PyObject *value =
                job->walltime_obj != NULL ? job->walltime_obj : PyFloat_FromDouble(NO_WALLTIME_ESTIMATE);
            if (value == NULL) {
                Py_DECREF(id);
                goto fail;
            }
            if (job->walltime_obj != NULL)
                Py_INCREF(value);
            int failed = PyDict_SetDefault(E->predictions, id, value) == NULL;
            Py_DECREF(id);
            Py_DECREF(value);
            if (failed)
                goto fail;
            job->seq = E->seq++;
            queue_append(E, ev->job);
            break;
        }
        case EV_COMPLETED: {
            Job *job = &E->jobs[ev->job];
            dirty = 1;
            release(E, job);
            PyMem_Free(job->runs); /* the row is written: the allocation is no longer needed */
            job->runs = NULL;
            job->nruns = 0;
            End *ends = E->ends.items;
            Py_ssize_t k = 0;
            while (k < E->ends.len && ends[k].job != ev->job)
                k++;
            if (k == E->ends.len) {
                PyErr_SetString(PyExc_RuntimeError, "a job ended that was not running");
                goto fail;
            }
            memmove(ends + k, ends + k + 1, (E->ends.len - k - 1) * sizeof(End));
            E->ends.len--;
            break;
        }
        case EV_NOTIFY:
            break;
        case EV_ENDS:
            E->sched_ended = 1;
            break;
        }
    }
    if (dirty && !E->sched_ended && schedule(E, now, &decisions) < 0)
        goto fail;
    reqrep->decisions = decisions.items;
    reqrep->ndecisions = decisions.len;
    return 0;
fail:
    PyMem_Free(decisions.items);
    return -1;
}

/* --- Batsim's actors (simulator.BatsimSimulator) ------------------------------------------------ */

static int
send_message(Engine *E, Call *call)
{
    /* generate_and_send_message: the pending events go to a new REQ-REP actor */
    Actor *reqrep = new_actor(E, A_REQREP);
    if (reqrep == NULL)
        return -1;
    reqrep->msg_now = json_time(E->now);
    reqrep->events = E->outbox.items;
    reqrep->nevents = E->outbox.len;
    E->outbox.items = NULL;
    E->outbox.len = E->outbox.cap = 0;
    call->kind = K_CREATE;
    call->created = reqrep;
    return 0;
}

static int
outbox_add(Engine *E, int type, double stamp, Py_ssize_t job)
{
    Event ev = {type, stamp, job};
    return vec_push(&E->outbox, &ev, sizeof ev);
}

/* the server's handlers (server.cpp); 1 when the handler's effect is an actor to create */
static int
server_handle(Engine *E, Payload p, Call *call)
{
    double stamp;
    switch (p.kind) {
    case P_HELLO:
        return 0;
    case P_BYE:
        E->submitters_done++;
        return outbox_add(E, EV_NOTIFY, json_time(E->now), -1);
    case P_SUBMITTED:
        stamp = json_time(E->now);
        for (Py_ssize_t k = p.a; k < p.b; k++) {
            Py_ssize_t j = E->order[k];
            E->jobs[j].state = J_SUBMITTED;
            E->live++;
            if (outbox_add(E, EV_SUBMITTED, stamp, j) < 0)
                return -1;
        }
        return 0;
    case P_COMPLETED: {
        Job *job = &E->jobs[p.a];
        E->running--;
        E->to_delete++;
        if (finished_row(E, job) < 0)
            return -1;
        return outbox_add(E, EV_COMPLETED, json_time(E->now), p.a);
    }
    case P_EXECUTE: {
        Job *job = &E->jobs[p.a];
        if (job->state != J_SUBMITTED) {
            PyErr_SetString(PyExc_RuntimeError, "a job executed twice (a bug of _creplay)");
            return -1;
        }
        E->running++;
        job->state = J_RUNNING;
        Actor *actor = new_actor(E, A_JOB);
        if (actor == NULL)
            return -1;
        actor->job = p.a;
        call->kind = K_CREATE;
        call->created = actor;
        return 1;
    }
    case P_REJECT: {
        Job *job = &E->jobs[p.a];
        job->state = J_REJECTED;
        E->to_delete++;
        return rejected_row(E, job);
    }
    case P_READY:
        E->sched_ready = 1;
        if (E->end_sent)
            E->end_ack = 1;
        return 0;
    }
    PyErr_SetString(PyExc_RuntimeError, "unknown server message (a bug of _creplay)");
    return -1;
}

static int
simulation_finished(Engine *E)
{
    return E->submitters_done == 1 && E->live == E->to_delete && E->running == 0;
}

enum { SV_START, SV_SENT, SV_LOOP, SV_GOT, SV_CREATED, SV_END_SENT };

/* Run an actor until its next simcall (stored in *call): 1, or 0 when its code is over. */
static int
step_actor(Engine *E, Actor *a, Call *call)
{
    Payload payload;
    switch (a->type) {
    case A_SUBMITTER: /* static_job_submitter_process */
        switch (a->pc) {
        case 0:
            call->kind = K_PUT;
            call->payload = (Payload){P_HELLO, 0, 0};
            a->pc = 1;
            return 1;
        case 1:
            a->current = E->now;
            a->pos = a->batch_lo = 0;
            goto submit_loop;
        case 2: /* the batch went: sleep until the next subtime */
            a->batch_lo = a->pos;
            call->kind = K_SLEEP;
            call->duration = E->jobs[E->order[a->pos]].subtime - a->current;
            a->pc = 3;
            return 1;
        case 3: /* awake: the job starts the new batch */
            a->current = E->now;
            a->pos++;
            goto submit_loop;
        case 4:
            call->kind = K_PUT;
            call->payload = (Payload){P_BYE, 0, 0};
            a->pc = 5;
            return 1;
        default:
            return 0;
        }
    submit_loop:
        while (a->pos < E->njobs) {
            double subtime = E->jobs[E->order[a->pos]].subtime;
            if (subtime > a->current) {
                if (a->pos > a->batch_lo) {
                    call->kind = K_PUT;
                    call->payload = (Payload){P_SUBMITTED, a->batch_lo, a->pos};
                    a->pc = 2;
                    return 1;
                }
                call->kind = K_SLEEP;
                call->duration = subtime - a->current;
                a->pc = 3;
                return 1;
            }
            a->pos++;
        }
        if (a->pos > a->batch_lo) {
            call->kind = K_PUT;
            call->payload = (Payload){P_SUBMITTED, a->batch_lo, a->pos};
            a->batch_lo = a->pos;
            a->pc = 4;
            return 1;
        }
        call->kind = K_PUT;
        call->payload = (Payload){P_BYE, 0, 0};
        a->pc = 5;
        return 1;

    case A_SERVER: /* server_process */
        switch (a->pc) {
        case SV_START:
            if (outbox_add(E, EV_BEGINS, 0.0, -1) < 0)
                return -1;
            a->send_return = SV_LOOP;
            a->pc = SV_SENT;
            return send_message(E, call) < 0 ? -1 : 1;
        case SV_SENT: /* the REQ-REP actor is created: the message is sent */
            E->sched_ready = 0;
            E->live -= E->to_delete; /* jobs_to_be_deleted */
            E->to_delete = 0;
            if (a->send_return == SV_END_SENT) {
                E->end_sent = 1;
            }
            goto server_loop;
        case SV_GOT: {
            payload = a->answer;
            int effect = server_handle(E, payload, call);
            if (effect < 0)
                return -1;
            if (effect) {
                a->pc = SV_CREATED;
                return 1;
            }
            goto server_after;
        }
        case SV_CREATED:
            goto server_after;
        default:
            return 0;
        }
    server_after:
        if (E->sched_ready && !E->end_ack && E->box.len == 0) {
            if (E->outbox.len) {
                a->send_return = SV_LOOP;
                a->pc = SV_SENT;
                return send_message(E, call) < 0 ? -1 : 1;
            }
            if (simulation_finished(E) && !E->end_sent) {
                if (outbox_add(E, EV_ENDS, json_time(E->now), -1) < 0)
                    return -1;
                a->send_return = SV_END_SENT;
                a->pc = SV_SENT;
                return send_message(E, call) < 0 ? -1 : 1;
            }
        }
    server_loop:
        if (E->end_ack) {
            a->pc = -1;
            return 0;
        }
        call->kind = K_GET;
        a->pc = SV_GOT;
        return 1;

    case A_REQREP: /* request_reply_scheduler_process */
        switch (a->pc) {
        case 0: {
            E->messages++;
            if (E->messages % 2048 == 0) {
                if (PyErr_CheckSignals() < 0)
                    return -1;
                if (E->progress != Py_None) {
                    PyObject *done = PyLong_FromSsize_t(PyList_GET_SIZE(E->rows));
                    if (done == NULL)
                        return -1;
                    PyObject *out = PyObject_CallOneArg(E->progress, done);
                    Py_DECREF(done);
                    if (out == NULL)
                        return -1;
                    Py_DECREF(out);
                }
            }
            if (scheduler_handle(E, a) < 0)
                return -1;
            PyMem_Free(a->events);
            a->events = NULL;
            a->di = 0;
            goto reqrep_loop;
        }
        case 1: /* at the decision's timestamp: forward it */
            goto reqrep_put;
        case 2:
            a->di++;
            goto reqrep_loop;
        case 3:
            call->kind = K_PUT;
            call->payload = (Payload){P_READY, 0, 0};
            a->pc = 4;
            return 1;
        default:
            return 0;
        }
    reqrep_loop:
        if (a->di < a->ndecisions) {
            Decision *d = &a->decisions[a->di];
            if (d->stamp > E->now) {
                call->kind = K_SLEEP;
                call->duration = d->stamp - E->now;
                a->pc = 1;
                return 1;
            }
            goto reqrep_put;
        }
        if (a->msg_now > E->now) {
            call->kind = K_SLEEP;
            call->duration = a->msg_now - E->now;
            a->pc = 3;
            return 1;
        }
        call->kind = K_PUT;
        call->payload = (Payload){P_READY, 0, 0};
        a->pc = 4;
        return 1;
    reqrep_put: {
        Decision *d = &a->decisions[a->di];
        call->kind = K_PUT;
        call->payload = (Payload){d->type == D_EXECUTE ? P_EXECUTE : P_REJECT, d->job, 0};
        a->pc = 2;
        return 1;
    }

    case A_JOB: { /* execute_job_process, do_delay_task */
        Job *job = &E->jobs[a->job];
        switch (a->pc) {
        case 0:
            job->start = E->now;
            call->kind = K_SLEEP;
            if (job->walltime < 0 || job->delay < job->walltime) {
                call->duration = job->delay;
                job->walltime_reached = 0;
            }
            else {
                call->duration = job->walltime;
                job->walltime_reached = 1;
            }
            a->pc = 1;
            return 1;
        case 1:
            job->end = E->now;
            job->state = J_DONE;
            call->kind = K_PUT;
            call->payload = (Payload){P_COMPLETED, a->job, 0};
            a->pc = 2;
            return 1;
        default:
            return 0;
        }
    }
    }
    PyErr_SetString(PyExc_RuntimeError, "unknown actor (a bug of _creplay)");
    return -1;
}

/* EngineImpl::run over the actors: sub-rounds, their simcalls in order, then the clock. */
static int
run(Engine *E)
{
    for (;;) {
        Vec swap = E->ran;
        E->ran = E->to_run;
        E->to_run = swap;
        E->to_run.len = 0;
        Py_ssize_t n = E->ran.len;
        for (Py_ssize_t pos = 0; pos < n; pos++) {
            Actor *actor = VEC_AT(E->ran, Actor *, pos);
            Call call;
            int r = step_actor(E, actor, &call);
            if (r < 0)
                return -1;
            if (r == 0) {
                free_actor(E, actor); /* its code is over */
                continue;
            }
            if (vec_push(&E->calls, &call, sizeof call) < 0 ||
                vec_push(&E->call_actors, &actor, sizeof actor) < 0)
                return -1;
        }
        if (E->calls.len && handle_calls(E) < 0)
            return -1;
        if (E->to_run.len == 0) {
            int r = solve(E);
            if (r < 0)
                return -1;
            if (r == 0)
                return 0;
        }
    }
}

/* --- set-up ---------------------------------------------------------------------------------- */

/* A number the engine takes as Python's float() would: int (not bool) or float. */
static int
as_double(PyObject *value, double *out)
{
    if (PyFloat_CheckExact(value)) {
        *out = PyFloat_AS_DOUBLE(value);
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || v > (1LL << 53) || v < -(1LL << 53))
            return 0;
        *out = (double)v;
        return 1;
    }
    return 0;
}

static const Job *sorting; /* the jobs compare_order sorts (the GIL is held) */

static int
compare_order(const void *pa, const void *pb)
{
    const Job *jobs = sorting;
    const Job *a = &jobs[*(const Py_ssize_t *)pa], *b = &jobs[*(const Py_ssize_t *)pb];
    if (a->subtime < b->subtime)
        return -1;
    if (a->subtime > b->subtime)
        return 1;
    return strcmp(a->name_utf8, b->name_utf8); /* UTF-8 order is code point order */
}

/* 1 when the workload is one the engine replays, 0 when it is not (the Python path then runs,
   and says what is wrong with it if anything is), -1 on error. */
static int
load(Engine *E, PyObject *jobs, PyObject *profiles)
{
    Py_ssize_t n = PyList_GET_SIZE(jobs);
    E->jobs = PyMem_Calloc(n ? n : 1, sizeof(Job));
    E->order = PyMem_Malloc((n ? n : 1) * sizeof(Py_ssize_t));
    if (E->jobs == NULL || E->order == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *names = PySet_New(NULL);
    if (names == NULL)
        return -1;
    int verdict = 1;
    for (Py_ssize_t i = 0; i < n && verdict == 1; i++) {
        Job *job = &E->jobs[i];
        E->njobs = i + 1; /* what the clean-up releases */
        job->qprev = job->qnext = -1;
        PyObject *obj = PyList_GET_ITEM(jobs, i);
        if (!PyDict_CheckExact(obj)) {
            verdict = 0;
            break;
        }
        PyObject *id = PyDict_GetItemWithError(obj, KEY_ID);
        PyObject *subtime = PyDict_GetItemWithError(obj, KEY_SUBTIME);
        PyObject *res = PyDict_GetItemWithError(obj, KEY_RES);
        PyObject *walltime = PyDict_GetItemWithError(obj, KEY_WALLTIME);
        PyObject *profile = PyDict_GetItemWithError(obj, KEY_PROFILE);
        if (PyErr_Occurred())
            goto error;
        if (id == NULL || subtime == NULL || res == NULL || profile == NULL ||
            !PyUnicode_CheckExact(profile) || !PyLong_CheckExact(res) ||
            !(PyUnicode_CheckExact(id) || PyLong_CheckExact(id))) {
            verdict = 0;
            break;
        }
        job->name = PyObject_Str(id);
        if (job->name == NULL)
            goto error;
        int seen = PySet_Contains(names, job->name);
        if (seen < 0 || (!seen && PySet_Add(names, job->name) < 0))
            goto error;
        if (seen) {
            verdict = 0; /* a duplicate id: the Python path says so */
            break;
        }
        Py_INCREF(profile);
        job->profile = profile;
        Py_ssize_t name_size, profile_size;
        job->name_utf8 = PyUnicode_AsUTF8AndSize(job->name, &name_size);
        job->profile_utf8 = PyUnicode_AsUTF8AndSize(profile, &profile_size);
        if (job->name_utf8 == NULL || job->profile_utf8 == NULL) {
            PyErr_Clear(); /* not UTF-8 (a lone surrogate): the Python path */
            verdict = 0;
            break;
        }
        job->name_size = (size_t)name_size;
        job->profile_size = (size_t)profile_size;
        if (strlen(job->name_utf8) != job->name_size ||
            strlen(job->profile_utf8) != job->profile_size) {
            verdict = 0; /* a NUL inside */
            break;
        }
        if (!as_double(subtime, &job->subtime) || !(job->subtime == job->subtime) ||
            isinf(job->subtime)) {
            verdict = 0;
            break;
        }
        int overflow;
        job->res = PyLong_AsLongAndOverflow(res, &overflow);
        if (overflow || job->res > 1000000000L || job->res < -1000000000L) {
            verdict = 0;
            break;
        }
        /* the simulator's walltime is None for None or -1; the scheduler's for <= 0: only
           None, -1 and > 0 mean the same to both */
        job->walltime = -1.0;
        if (walltime != NULL && walltime != Py_None) {
            double value;
            if (!as_double(walltime, &value) || !(value == -1.0 || value > 0) || isinf(value)) {
                verdict = 0;
                break;
            }
            if (value > 0) {
                job->walltime = value;
                Py_INCREF(walltime);
                job->walltime_obj = walltime;
            }
        }
        job->est = job->walltime > 0 ? job->walltime : NO_WALLTIME_ESTIMATE;
        PyObject *prof = PyDict_GetItemWithError(profiles, profile);
        if (prof == NULL) {
            if (PyErr_Occurred())
                goto error;
            verdict = 0;
            break;
        }
        PyObject *type = PyDict_Check(prof) ? PyDict_GetItemWithError(prof, KEY_TYPE) : NULL;
        PyObject *delay = PyDict_Check(prof) ? PyDict_GetItemWithError(prof, KEY_DELAY) : NULL;
        if (PyErr_Occurred())
            goto error;
        if (type == NULL || delay == NULL || !PyUnicode_CheckExact(type) ||
            PyUnicode_CompareWithASCIIString(type, "delay") != 0 ||
            !as_double(delay, &job->delay) || !(job->delay > 0) || isinf(job->delay)) {
            verdict = 0;
            break;
        }
        E->order[i] = i;
    }
    Py_DECREF(names);
    if (verdict == 1 && n > 1)
    {
        sorting = E->jobs;
        qsort(E->order, (size_t)n, sizeof(Py_ssize_t), compare_order);
    }
    return verdict;
error:
    Py_DECREF(names);
    return -1;
}

static void
engine_free(Engine *E)
{
    for (Py_ssize_t i = 0; i < E->njobs; i++) {
        Job *job = &E->jobs[i];
        Py_XDECREF(job->name);
        Py_XDECREF(job->profile);
        Py_XDECREF(job->walltime_obj);
        PyMem_Free(job->runs);
    }
    PyMem_Free(E->jobs);
    PyMem_Free(E->order);
    while (E->living != NULL)
        free_actor(E, E->living);
    PyMem_Free(E->ran.items);
    PyMem_Free(E->to_run.items);
    PyMem_Free(E->calls.items);
    PyMem_Free(E->call_actors.items);
    while (E->box.len)
        PyMem_Free(mailbox_pop(&E->box));
    PyMem_Free(E->box.items);
    PyMem_Free(E->comm);
    sleep_free(&E->sleeps);
    PyMem_Free(E->outbox.items);
    PyMem_Free(E->free);
    PyMem_Free(E->ends.items);
    PyMem_Free(E->scratch.items);
    PyMem_Free(E->started.items);
    PyMem_Free(E->buf);
    Py_XDECREF(E->rows);
    Py_XDECREF(E->rejected);
    Py_XDECREF(E->predictions);
}

static PyObject *
replay(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"jobs", "profiles", "nb_machines", "backfilling", "progress", NULL};
    PyObject *jobs, *profiles, *progress = Py_None;
    long nb_machines;
    int backfilling = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!l|pO:replay", kwlist, &PyList_Type, &jobs,
                                     &PyDict_Type, &profiles, &nb_machines, &backfilling,
                                     &progress))
        return NULL;
    if (nb_machines <= 0 || nb_machines > (1L << 30))
        Py_RETURN_NONE;
    Engine engine;
    memset(&engine, 0, sizeof engine);
    Engine *E = &engine;
    E->nb_machines = nb_machines;
    E->backfilling = backfilling;
    E->progress = progress;
    E->qhead = E->qtail = -1;
    PyObject *out = NULL;
    int verdict = load(E, jobs, profiles);
    if (verdict <= 0) {
        if (verdict == 0)
            out = Py_NewRef(Py_None);
        goto done;
    }
    E->words = (nb_machines + 63) / 64;
    E->free = PyMem_Calloc((size_t)E->words, sizeof(uint64_t));
    E->rows = PyList_New(0);
    E->rejected = PyList_New(0);
    E->predictions = PyDict_New();
    if (E->free == NULL || E->rows == NULL || E->rejected == NULL || E->predictions == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    for (long m = 0; m < nb_machines; m++)
        E->free[m / 64] |= (uint64_t)1 << (m % 64);
    E->free_count = nb_machines;
    /* the submitter, then the server, ready to run (BatsimSimulator.__init__) */
    Actor *submitter = new_actor(E, A_SUBMITTER);
    Actor *server = submitter == NULL ? NULL : new_actor(E, A_SERVER);
    if (server == NULL || vec_push(&E->to_run, &submitter, sizeof(Actor *)) < 0 ||
        vec_push(&E->to_run, &server, sizeof(Actor *)) < 0)
        goto done;
    if (run(E) < 0)
        goto done;
    if (!E->end_ack) {
        PyErr_SetString(PyExc_RuntimeError, "the replay ended early (a bug of _creplay)");
        goto done;
    }
    out = Py_BuildValue("OLOO", E->rows, E->messages, E->rejected, E->predictions);
done:
    engine_free(E);
    return out;
}

static PyMethodDef methods[] = {
    {"replay", (PyCFunction)(void (*)(void))replay, METH_VARARGS | METH_KEYWORDS,
     "replay(jobs, profiles, nb_machines, backfilling=True, progress=None): the FCFS-EASY "
     "replay of one static workload; (rows, messages, rejected ids, predictions), or None when "
     "the workload is not one this engine replays."},
    {NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "batsched_ml.sim._creplay",
    .m_doc = "The compiled replay engine (see batsched_ml.compiled_replay).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__creplay(void)
{
    clock_constants();
    struct {
        PyObject **key;
        const char *text;
    } keys[] = {{&KEY_ID, "id"},           {&KEY_SUBTIME, "subtime"}, {&KEY_RES, "res"},
                {&KEY_WALLTIME, "walltime"}, {&KEY_PROFILE, "profile"}, {&KEY_TYPE, "type"},
                {&KEY_DELAY, "delay"}};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (*keys[k].key == NULL && (*keys[k].key = PyUnicode_InternFromString(keys[k].text)) == NULL)
            return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

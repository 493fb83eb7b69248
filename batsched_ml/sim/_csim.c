/* The compiled simulator: Batsim 4.2.1's actors on SimGrid's kernel, in C, for static workloads,
 * with the scheduler attached as its decision callback.
 *
 * It is a transcription of the simulator, not of any scheduler: the reference is
 * batsched_ml/sim/simulator.py (Batsim's actors: the static submitter, the server, one REQ-REP
 * actor per message, one actor per job, the killer of KILL_JOB and the waiter of CALL_ME_LATER),
 * batsched_ml/sim/simgrid.py (SimGrid's scheduling rounds, here as in _ckernel.c; the clock, the
 * sleeps, the step and the mailbox are _simgrid_clock.h's, the very code _ckernel.c runs: the
 * same double operations in the same order, the same creation keys, the same ties) and
 * batsched_ml/sim/jobs_csv.py (each row from SimGrid's clock in long double, as Batsim's
 * export.cpp). Each actor is a state machine whose states are the yields of its Python
 * generator, so the simcalls, their order and their sub-rounds are the same.
 *
 * The EXCHANGE of the REQ-REP actor builds the protocol message (the typed events of
 * batsched_ml.protocol.events), calls the scheduler's handle(message) and reads its reply: the
 * scheduler is Python, the one source of every policy, predictor, dispatcher and plug-in. A
 * decision is checked where the Python simulator checks it (the reply's times when it comes,
 * the parse when it is forwarded, the job's state when the server handles it); a decision that
 * is wrong is explained by the Python simulator's own functions (problems.*), so the errors are
 * the same text.
 *
 * What it does not simulate it does not take: dynamic jobs and forwarded profiles (the caller
 * runs the Python simulator for those), and a workload it is not sure of (run() answers None:
 * the Python simulator runs and reports the problem, if any). The tests replay traces, random
 * workloads built to hit the clock's drift, ties, walltime kills, kills and calls, and the
 * recordings of real Batsim with both simulators and compare every file byte for byte
 * (tests/test_compiled_sim.py). Built with -ffp-contract=off like _ckernel.c.
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

/* the keys and names made once (PyDict_GetItemString makes a string per call) */
static PyObject *KEY_ID, *KEY_SUBTIME, *KEY_RES, *KEY_WALLTIME, *KEY_PROFILE, *KEY_TYPE,
    *KEY_DELAY, *S_NOW, *S_EVENTS, *S_TIMESTAMP, *S_JOB_ID, *S_JOB_IDS, *S_ALLOC, *S_EXTRA,
    *S_WHEN, *S_METADATA, *S_INTERVALS, *S_TYPE_ATTR, *S_PROFILE_NAME, *S_PROGRESS,
    *S_SUCCESS, *S_WALLTIME_REACHED, *S_KILLED, *S_NO_MORE_STATIC, *W0;

/* --- what the simulator hands the scheduler and takes from it (batsched_ml.protocol.events) -- */

enum {
    T_MESSAGE, T_SUBMITTED, T_COMPLETED, T_KILLED, T_CALL, T_ENDS, T_NOTIFY, /* events */
    T_EXECUTE, T_REJECT, T_KILL, T_CALL_ME_LATER, T_METADATA,                /* decisions */
    T_REGISTER_PROFILE, T_REGISTER_JOB,
    T_INVALID, /* simulator.InvalidDecision */
    T_COUNT
};
static const char *TYPE_NAMES[T_COUNT] = {
    "Message",   "JobSubmitted", "JobCompleted", "JobKilled",      "RequestedCall",
    "SimulationEnds", "Notify",  "ExecuteJob",   "RejectJob",      "KillJob",
    "CallMeLater",    "SetJobMetadata", "RegisterProfile", "RegisterJob", "InvalidDecision",
};

/* --- jobs --------------------------------------------------------------------------------- */

enum { J_LOADED, J_SUBMITTED, J_RUNNING, J_DONE, J_REJECTED, J_FORGOTTEN };
enum { F_SUCCESS, F_WALLTIME, F_KILLED };

typedef struct Actor Actor;

typedef struct {
    PyObject *name;    /* str(obj["id"]) */
    PyObject *workload; /* its workload's name: "w0", or a dynamic job's */
    PyObject *job_id;  /* workload + "!" + name */
    PyObject *obj;     /* the workload's job object; its copy with the id rewritten is sent */
    PyObject *profile; /* obj["profile"], a str */
    PyObject *alloc;   /* the ProcSet of the EXECUTE_JOB decision (sent back on completion) */
    PyObject *metadata; /* SET_JOB_METADATA's text, NULL if none */
    const char *name_utf8, *profile_utf8, *workload_utf8;
    size_t name_size, profile_size, workload_size; /* their bytes, measured once */
    long long live_seq; /* when it became known to the server: _live's order */
    double subtime, delay, walltime; /* walltime < 0: none */
    long res;
    int state, final, kill_requested;
    double start, end;
    int *runs; /* allocation: [low, high] pairs */
    int nruns;
    Actor *actor; /* its execute_job_process while it runs */
} Job;

/* --- what goes to the server (IPMessageType) ------------------------------------------------ */

enum {
    P_HELLO, P_BYE, P_SUBMITTED, P_COMPLETED, P_EXECUTE, P_REJECT, P_KILL, P_CALL_ME_LATER,
    P_READY, P_WAITING_DONE, P_KILLING_DONE, P_METADATA, P_JOB_REGISTERED,
    P_PROFILE_REGISTERED, P_END_REGISTRATION, P_CONTINUE_REGISTRATION, P_NONE
};

typedef struct {
    int kind;
    Py_ssize_t a, b; /* a job, or a batch [a, b) of the submission order */
    void *ptr;       /* a decision (borrowed from its REQ-REP actor) or a kill report */
} Payload;

/* KILLING_DONE's data: the jobs of the decision, those really killed, their progress */
typedef struct {
    Py_ssize_t *jobs, njobs;
    Py_ssize_t *killed, nkilled;
    PyObject *progress; /* dict */
} KillReport;

enum { EV_BEGINS, EV_SUBMITTED, EV_COMPLETED, EV_NOTIFY, EV_ENDS, EV_CALL, EV_KILLED };

typedef struct {
    int type;
    double stamp;
    Py_ssize_t job;
    PyObject *obj; /* EV_KILLED: the JobKilled event, made by the server (owned) */
} Event;

/* --- actors --------------------------------------------------------------------------------- */

enum { A_SUBMITTER, A_SERVER, A_REQREP, A_JOB, A_KILLER, A_WAITER };
enum { K_DONE, K_SLEEP, K_PUT, K_GET, K_CREATE, K_KILL };

typedef struct {
    int kind;
    double duration;
    Payload payload;
    Actor *created; /* K_CREATE: the new actor; K_KILL: the victim */
} Call;

struct Actor {
    Actor *prev, *next; /* the living actors */
    int type, pc, dead, sleeping;
    Payload answer;
    /* submitter */
    double current;
    Py_ssize_t pos, batch_lo;
    /* server: where its send returns */
    int send_return;
    /* REQ-REP: its message, then the reply and its decisions (borrowed from the reply) */
    Event *events;
    Py_ssize_t nevents;
    double msg_now;
    PyObject *reply, *decisions;
    double reply_now;
    Py_ssize_t ndecisions, di;
    int forward; /* the server message the decision being forwarded becomes */
    Py_ssize_t forward_job; /* and its job (a registered job) */
    /* job */
    Py_ssize_t job;
    /* killer */
    KillReport *report;
    /* waiter */
    double target;
};

typedef struct {
    int is_send, nwaiting;
    Payload payload;
    Actor *waiting[2];
    double remains;
    long long key;
} Comm;

typedef struct {
    void *items;
    Py_ssize_t len, cap;
} Vec;

static int as_double(PyObject *value, double *out);

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
    Py_ssize_t nstatic, jobs_cap; /* the workload's jobs (then the registered ones), room */
    PyObject *ids;     /* job id -> its index (every id ever used) */
    /* dynamic jobs: each workload's profiles and how many live jobs use each (_Workload) */
    int dynamic, acknowledge, profile_reuse, registration_finished;
    PyObject *profiles_of, *refcounts; /* workload -> {profile -> dict}, {profile -> int} */
    PyObject *w0; /* the static workload's name */
    long long live_seq;
    Py_ssize_t killed_rows;
    long nb_machines;
    PyObject *handler, *progress, *begins, *problems;
    PyObject *types[T_COUNT];
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
    Vec to_delete; /* Py_ssize_t: jobs that ended or were rejected, until the next message */
    int sched_ready, end_sent, end_ack, submitters_done;
    Py_ssize_t live, running, waiters, killers;
    uint64_t *busy;
    Py_ssize_t words;
    double last_now; /* the last message's now */
    /* results */
    PyObject *rows;
    long long messages, events_sent;
    char *buf;
    size_t bufcap;
} Engine;

/* |value| * 10**6 rounded as "%.6f" rounds it, for 1e-7 <= |value| < 2**33: 1 and *scaled set,
   else 0. glibc's printf (and Python's '%.6f') rounds the exact binary value to nearest, ties to
   even; here |value| = m / 2**shift exactly (m < 2**53, 20 <= shift <= 76), so m * 10**6 fits in
   128 bits and the quotient and the remainder of its shift are exact: the same digits, without
   printf's multi-precision arithmetic (a twentieth of a long replay's time, in printf and strtod).
   The result is below 2**53: a double holds it exactly. */
static int
fixed6_scaled(double value, unsigned long long *scaled)
{
    double a = fabs(value);
    if (!(a >= 1e-7 && a < 8589934592.0))
        return 0;
    int e;
    double fraction = frexp(a, &e); /* a = fraction * 2**e, 0.5 <= fraction < 1 */
    unsigned long long m = (unsigned long long)ldexp(fraction, 53); /* exact */
    int shift = 53 - e;
    unsigned __int128 p = (unsigned __int128)m * 1000000u;
    unsigned __int128 q = p >> shift;
    unsigned __int128 rest = p - (q << shift);
    unsigned __int128 half = (unsigned __int128)1 << (shift - 1);
    if (rest > half || (rest == half && (q & 1)))
        q++;
    *scaled = (unsigned long long)q;
    return 1;
}

/* a time as the scheduler reads it: Batsim prints SimGrid's clock with %f (simulator.json_time) */
static double
json_time(double clock)
{
    if (clock == floor(clock))
        return clock;
    unsigned long long scaled;
    if (fixed6_scaled(clock, &scaled)) {
        /* strtod of the "%.6f" text: the double nearest scaled / 10**6, which IEEE division of
           these two exact doubles gives too */
        double read = (double)scaled / 1e6;
        return clock < 0 ? -read : read;
    }
    char text[64];
    snprintf(text, sizeof text, "%.6f", clock);
    return strtod(text, NULL);
}

static void
free_events(Event *events, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(events[i].obj);
    PyMem_Free(events);
}

static void
free_report(KillReport *report)
{
    if (report == NULL)
        return;
    PyMem_Free(report->jobs);
    PyMem_Free(report->killed);
    Py_XDECREF(report->progress);
    PyMem_Free(report);
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
   nor waiting on a communication; or killed, and taken out of the sleeps). */
static void
free_actor(Engine *E, Actor *actor)
{
    if (actor->prev != NULL)
        actor->prev->next = actor->next;
    else
        E->living = actor->next;
    if (actor->next != NULL)
        actor->next->prev = actor->prev;
    free_events(actor->events, actor->nevents);
    Py_XDECREF(actor->reply);
    Py_XDECREF(actor->decisions);
    free_report(actor->report);
    PyMem_Free(actor);
}

static int
start_comm(Engine *E, Comm *comm)
{
    if (E->comm != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "two transfers at once (a bug of _csim)");
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
    Payload none = {P_NONE, 0, 0, NULL};
    ((Actor *)sleeper)->sleeping = 0;
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
        comm->payload = is_send ? call->payload : (Payload){P_NONE, 0, 0, NULL};
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

/* KILL (simgrid.Kernel): the victim's code is over at once; a sleeping victim leaves the
   sleeps and is freed, one already woken (in the run list) is freed when its turn comes. */
static void
kill_actor(Engine *E, Actor *victim)
{
    if (victim->dead)
        return;
    victim->dead = 1;
    if (victim->sleeping) {
        for (Py_ssize_t i = 0; i < E->sleeps.n; i++) {
            if (E->sleeps.sleepers[i] == victim) {
                sleep_remove(&E->sleeps, i, 1);
                break;
            }
        }
        victim->sleeping = 0;
        free_actor(E, victim);
    }
}

static int
handle_calls(Engine *E)
{
    Py_ssize_t n = E->calls.len;
    for (Py_ssize_t i = 0; i < n; i++) {
        Actor *actor = VEC_AT(E->call_actors, Actor *, i);
        Call *call = &VEC_AT(E->calls, Call, i);
        Payload none = {P_NONE, 0, 0, NULL};
        switch (call->kind) {
        case K_PUT:
        case K_GET:
            if (handle_comm(E, actor, call, call->kind == K_PUT) < 0)
                return -1;
            break;
        case K_SLEEP:
            if (sleep_add(&E->sleeps, actor, call->duration, E->keys) < 0)
                return -1;
            actor->sleeping = 1;
            E->keys++;
            break;
        case K_CREATE: /* ActorImpl::start: appended to the run list, then the creator */
            if (vec_push(&E->to_run, &call->created, sizeof(Actor *)) < 0 ||
                wake(E, actor, none) < 0)
                return -1;
            break;
        case K_KILL:
            kill_actor(E, call->created);
            if (wake(E, actor, none) < 0)
                return -1;
            break;
        default:
            PyErr_SetString(PyExc_RuntimeError, "unknown simcall (a bug of _csim)");
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
   decimal and ".000000", a time of the usual range its digits from fixed6_scaled, both written
   here; anything else goes through snprintf. */
static char *
put_fixed6(char *at, double value)
{
    if (value == floor(value) && fabs(value) < 9007199254740992.0 &&
        !(value == 0 && signbit(value))) {
        at = put_long(at, (long long)value);
        return PUT_LITERAL(at, ".000000");
    }
    unsigned long long scaled;
    if (fixed6_scaled(value, &scaled)) {
        if (value < 0)
            *at++ = '-';
        at = put_long(at, (long long)(scaled / 1000000));
        *at++ = '.';
        unsigned long fraction = (unsigned long)(scaled % 1000000);
        for (int k = 5; k >= 0; k--) {
            at[k] = (char)('0' + fraction % 10);
            fraction /= 10;
        }
        return at + 6;
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
    const char *meta = "";
    Py_ssize_t meta_size = 0;
    if (job->metadata != NULL && (meta = PyUnicode_AsUTF8AndSize(job->metadata, &meta_size)) == NULL)
        return -1;
    if (job->final == F_KILLED)
        E->killed_rows++;
    if (reserve_buf(E, name + profile + job->workload_size + (size_t)meta_size + 8 * 400 +
                           (size_t)job->nruns * 24) < 0)
        return -1;
    char *at = E->buf;
    at = put(at, job->name_utf8, name);
    *at++ = ',';
    at = put(at, job->workload_utf8, job->workload_size);
    *at++ = ',';
    at = put(at, job->profile_utf8, profile);
    *at++ = ',';
    at = put_fixed6(at, job->subtime);
    *at++ = ',';
    at = put_long(at, job->res);
    *at++ = ',';
    at = put_fixed6(at, job->walltime >= 0 ? job->walltime : -1.0);
    at = job->final == F_SUCCESS  ? PUT_LITERAL(at, ",1,COMPLETED_SUCCESSFULLY,")
         : job->final == F_WALLTIME ? PUT_LITERAL(at, ",0,COMPLETED_WALLTIME_REACHED,")
                                    : PUT_LITERAL(at, ",0,COMPLETED_KILLED,");
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
    at = PUT_LITERAL(at, ",-1.000000,\"");
    at = put(at, meta, (size_t)meta_size);
    *at++ = '"';
    return append_row(E, (size_t)(at - E->buf));
}

static int
rejected_row(Engine *E, Job *job)
{
    const char *meta = "";
    Py_ssize_t meta_size = 0;
    if (job->metadata != NULL && (meta = PyUnicode_AsUTF8AndSize(job->metadata, &meta_size)) == NULL)
        return -1;
    size_t need = job->name_size + job->profile_size + job->workload_size + (size_t)meta_size + 1000;
    if (reserve_buf(E, need) < 0)
        return -1;
    char *at = E->buf;
    at = put(at, job->name_utf8, job->name_size);
    *at++ = ',';
    at = put(at, job->workload_utf8, job->workload_size);
    *at++ = ',';
    at = put(at, job->profile_utf8, job->profile_size);
    *at++ = ',';
    at = put_fixed6(at, job->subtime);
    *at++ = ',';
    at = put_long(at, job->res);
    *at++ = ',';
    at = put_fixed6(at, job->walltime >= 0 ? job->walltime : -1.0);
    at = PUT_LITERAL(at, ",0,REJECTED,,,,,,,,,\"");
    at = put(at, meta, (size_t)meta_size);
    *at++ = '"';
    return append_row(E, (size_t)(at - E->buf));
}

/* --- the scheduler's side: messages out, replies in ----------------------------------------- */

static PyObject *
make(Engine *E, int type, PyObject *const *args, size_t nargs)
{
    return PyObject_Vectorcall(E->types[type], args, nargs, NULL);
}

/* A job's JOB_SUBMITTED: the workload's object with its id rewritten (``{**obj, "id": ...}``) */
static PyObject *
submitted_event(Engine *E, PyObject *stamp, Job *job)
{
    if (job - E->jobs >= E->nstatic) { /* a registered job: the scheduler's own object */
        PyObject *args[3] = {stamp, job->job_id, job->obj};
        return make(E, T_SUBMITTED, args, 3);
    }
    PyObject *obj = PyDict_Copy(job->obj);
    if (obj == NULL)
        return NULL;
    if (PyDict_SetItem(obj, KEY_ID, job->job_id) < 0) {
        Py_DECREF(obj);
        return NULL;
    }
    PyObject *args[3] = {stamp, job->job_id, obj};
    PyObject *event = make(E, T_SUBMITTED, args, 3);
    Py_DECREF(obj);
    return event;
}

static PyObject *
completed_event(Engine *E, PyObject *stamp, Job *job)
{
    PyObject *state = job->final == F_SUCCESS    ? S_SUCCESS
                      : job->final == F_WALLTIME ? S_WALLTIME_REACHED
                                                 : S_KILLED;
    PyObject *code = PyLong_FromLong(job->final == F_SUCCESS ? 0 : -1);
    if (code == NULL)
        return NULL;
    PyObject *args[5] = {stamp, job->job_id, state, code, job->alloc};
    PyObject *event = make(E, T_COMPLETED, args, 5);
    Py_DECREF(code);
    return event;
}

/* The message of a REQ-REP actor's events (generate_and_send_message) */
static PyObject *
build_message(Engine *E, Actor *a)
{
    PyObject *events = PyList_New(a->nevents);
    if (events == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < a->nevents; i++) {
        Event *ev = &a->events[i];
        PyObject *event = NULL;
        if (ev->type == EV_BEGINS) {
            event = Py_NewRef(E->begins);
        }
        else if (ev->type == EV_KILLED) {
            event = Py_NewRef(ev->obj);
        }
        else {
            PyObject *stamp = PyFloat_FromDouble(ev->stamp);
            if (stamp == NULL)
                goto fail;
            switch (ev->type) {
            case EV_SUBMITTED:
                event = submitted_event(E, stamp, &E->jobs[ev->job]);
                break;
            case EV_COMPLETED:
                event = completed_event(E, stamp, &E->jobs[ev->job]);
                Py_CLEAR(E->jobs[ev->job].alloc); /* sent: the job's machines are not needed */
                break;
            case EV_NOTIFY: {
                PyObject *args[2] = {stamp, S_NO_MORE_STATIC};
                event = make(E, T_NOTIFY, args, 2);
                break;
            }
            case EV_ENDS:
                event = make(E, T_ENDS, &stamp, 1);
                break;
            case EV_CALL:
                event = make(E, T_CALL, &stamp, 1);
                break;
            }
            Py_DECREF(stamp);
        }
        if (event == NULL)
            goto fail;
        PyList_SET_ITEM(events, i, event);
    }
    PyObject *now = PyFloat_FromDouble(a->msg_now);
    if (now == NULL)
        goto fail;
    PyObject *args[2] = {now, events};
    PyObject *message = make(E, T_MESSAGE, args, 2);
    Py_DECREF(now);
    Py_DECREF(events);
    return message;
fail:
    Py_DECREF(events);
    return NULL;
}

/* raise simulator.InvalidDecision(decision, subject, reason) */
static int
invalid(Engine *E, PyObject *decision_type, PyObject *subject, PyObject *reason)
{
    if (decision_type == NULL || subject == NULL || reason == NULL)
        return -1;
    PyObject *args[3] = {decision_type, subject, reason};
    PyObject *error = make(E, T_INVALID, args, 3);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return -1;
}

static int
invalid_text(Engine *E, const char *decision_type, PyObject *subject, PyObject *reason)
{
    PyObject *type = PyUnicode_FromString(decision_type);
    int r = invalid(E, type, subject, reason);
    Py_XDECREF(type);
    Py_XDECREF(reason);
    return r;
}

/* A problem the Python simulator explains (simulator.problems): raise what it returns. */
static int
explain(Engine *E, const char *name, PyObject *const *args, size_t nargs)
{
    PyObject *function = PyObject_GetAttrString(E->problems, name);
    if (function == NULL)
        return -1;
    PyObject *error = PyObject_Vectorcall(function, args, nargs, NULL);
    Py_DECREF(function);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return -1;
}

/* A number as a double: int (not bool) or float, as the Python comparisons take them. */
static int
number(PyObject *value, double *out)
{
    if (PyFloat_Check(value)) {
        *out = PyFloat_AS_DOUBLE(value);
        return 0;
    }
    if (PyLong_Check(value) && !PyBool_Check(value)) {
        *out = PyLong_AsDouble(value);
        return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
    }
    PyErr_Format(PyExc_TypeError, "a time must be a number, not %.100s", Py_TYPE(value)->tp_name);
    return -1;
}

/* BatsimSimulator.step's checks of a reply: its now, then each decision's timestamp */
static int
take_reply(Engine *E, Actor *a, PyObject *reply)
{
    PyObject *now = PyObject_GetAttr(reply, S_NOW);
    if (now == NULL)
        return -1;
    double value = 0;
    int finite = !PyBool_Check(now) && (PyFloat_Check(now) || PyLong_Check(now));
    if (finite && number(now, &value) < 0) {
        Py_DECREF(now);
        return -1;
    }
    if (PyFloat_Check(now) && !isfinite(value))
        finite = 0;
    if (!finite && (PyBool_Check(now) || PyFloat_Check(now))) {
        int r = invalid_text(E, "message", S_NOW,
                             PyUnicode_FromFormat("reply 'now' %S is not a finite number", now));
        Py_DECREF(now);
        return r;
    }
    if (!finite) { /* another type: Python's comparison would raise a TypeError */
        Py_DECREF(now);
        PyErr_SetString(PyExc_TypeError, "a reply's 'now' must be a number");
        return -1;
    }
    if (value < E->last_now) {
        PyObject *last = PyFloat_FromDouble(E->last_now);
        int r = last == NULL ? -1
                             : invalid_text(E, "message", S_NOW,
                                            PyUnicode_FromFormat(
                                                "reply 'now' %S is before Batsim's now %S", now,
                                                last));
        Py_XDECREF(last);
        Py_DECREF(now);
        return r;
    }
    PyObject *events = PyObject_GetAttr(reply, S_EVENTS);
    if (events == NULL) {
        Py_DECREF(now);
        return -1;
    }
    PyObject *list = PySequence_List(events);
    Py_DECREF(events);
    if (list == NULL) {
        Py_DECREF(now);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *decision = PyList_GET_ITEM(list, i);
        PyObject *stamp = PyObject_GetAttr(decision, S_TIMESTAMP);
        double t;
        if (stamp == NULL || number(stamp, &t) < 0) {
            Py_XDECREF(stamp);
            goto fail;
        }
        if (t > value) {
            PyObject *type = PyObject_GetAttrString(decision, "TYPE");
            int r = invalid(E, type, S_TIMESTAMP,
                            PyUnicode_FromFormat("stamped %S, later than the reply's now %S",
                                                 stamp, now));
            Py_XDECREF(type);
            Py_DECREF(stamp);
            (void)r;
            goto fail;
        }
        Py_DECREF(stamp);
    }
    Py_DECREF(now);
    a->reply = Py_NewRef(reply);
    a->decisions = list;
    a->ndecisions = PyList_GET_SIZE(list);
    a->reply_now = value;
    return 0;
fail:
    Py_DECREF(now);
    Py_DECREF(list);
    return -1;
}

/* A check of the Python simulator's (simulator.problems): 0 when it finds nothing wrong,
   else -1 with what it found raised. */
static int
check(Engine *E, const char *name, PyObject *const *args, size_t nargs)
{
    PyObject *function = PyObject_GetAttrString(E->problems, name);
    if (function == NULL)
        return -1;
    PyObject *error = PyObject_Vectorcall(function, args, nargs, NULL);
    Py_DECREF(function);
    if (error == NULL)
        return -1;
    if (error == Py_None) {
        Py_DECREF(error);
        return 0;
    }
    PyErr_SetObject((PyObject *)Py_TYPE(error), error);
    Py_DECREF(error);
    return -1;
}

/* simulator._register_profile: the profile is known from the parse on */
static int
register_profile(Engine *E, PyObject *decision)
{
    PyObject *name = PyObject_GetAttrString(decision, "workload_name");
    PyObject *profile_name = name == NULL ? NULL : PyObject_GetAttrString(decision, "profile_name");
    PyObject *profile = profile_name == NULL ? NULL : PyObject_GetAttrString(decision, "profile");
    PyObject *empty = profile == NULL ? NULL : PyDict_New();
    int r = -1;
    if (empty == NULL)
        goto done;
    PyObject *profiles = PyDict_GetItemWithError(E->profiles_of, name);
    if (profiles == NULL && PyErr_Occurred())
        goto done;
    PyObject *args[2] = {decision, profiles != NULL ? profiles : empty};
    if (check(E, "register_profile", args, 2) < 0)
        goto done;
    if (profiles == NULL) {
        PyObject *counts = PyDict_New();
        if (counts == NULL || PyDict_SetItem(E->profiles_of, name, empty) < 0 ||
            PyDict_SetItem(E->refcounts, name, counts) < 0) {
            Py_XDECREF(counts);
            goto done;
        }
        Py_DECREF(counts);
        profiles = empty;
    }
    PyObject *counts = PyDict_GetItemWithError(E->refcounts, name);
    PyObject *zero = PyLong_FromLong(0);
    if (counts == NULL || zero == NULL || PyDict_SetItem(profiles, profile_name, profile) < 0 ||
        PyDict_SetItem(counts, profile_name, zero) < 0) {
        Py_XDECREF(zero);
        goto done;
    }
    Py_DECREF(zero);
    r = 0;
done:
    Py_XDECREF(name);
    Py_XDECREF(profile_name);
    Py_XDECREF(profile);
    Py_XDECREF(empty);
    return r;
}

/* profile -> count += delta in a workload's refcounts (a missing count is `missing`); the
   count after. */
static long
add_refcount(PyObject *counts, PyObject *profile, long missing, long delta)
{
    PyObject *value = PyDict_GetItemWithError(counts, profile);
    if (value == NULL && PyErr_Occurred())
        return LONG_MIN;
    long count = value == NULL ? missing : PyLong_AsLong(value);
    if (count == -1 && PyErr_Occurred())
        return LONG_MIN;
    PyObject *after = PyLong_FromLong(count + delta);
    if (after == NULL || PyDict_SetItem(counts, profile, after) < 0) {
        Py_XDECREF(after);
        return LONG_MIN;
    }
    Py_DECREF(after);
    return count + delta;
}

static int
grow_jobs(Engine *E)
{
    if (E->njobs < E->jobs_cap)
        return 0;
    Py_ssize_t cap = E->jobs_cap ? 2 * E->jobs_cap : 16;
    Job *jobs = PyMem_Realloc(E->jobs, cap * sizeof(Job));
    if (jobs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(jobs + E->jobs_cap, 0, (cap - E->jobs_cap) * sizeof(Job));
    E->jobs = jobs;
    E->jobs_cap = cap;
    return 0;
}

/* simulator._register_job: the job is known (submitted, waiting) from the parse on */
static int
register_job(Engine *E, PyObject *decision, Py_ssize_t *index)
{
    PyObject *job_id = PyObject_GetAttr(decision, S_JOB_ID);
    PyObject *obj = job_id == NULL ? NULL : PyObject_GetAttrString(decision, "job");
    PyObject *parts = obj == NULL ? NULL : PyObject_CallMethod(job_id, "partition", "s", "!");
    int r = -1;
    if (parts == NULL)
        goto done;
    PyObject *workload = PyTuple_GET_ITEM(parts, 0), *name = PyTuple_GET_ITEM(parts, 2);
    PyObject *profiles = PyDict_GetItemWithError(E->profiles_of, workload);
    if (profiles == NULL && PyErr_Occurred())
        goto done;
    int used = PyDict_Contains(E->ids, job_id);
    if (used < 0)
        goto done;
    PyObject *args[4] = {decision, E->registration_finished ? Py_True : Py_False,
                         profiles != NULL ? profiles : Py_None, used ? Py_True : Py_False};
    if (check(E, "register_job", args, 4) < 0)
        goto done;
    if (!PyDict_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "REGISTER_JOB's job must be a dict");
        goto done;
    }
    PyObject *profile_name = PyDict_GetItemWithError(obj, KEY_PROFILE);
    PyObject *subtime = PyDict_GetItemWithError(obj, KEY_SUBTIME);
    PyObject *res = PyDict_GetItemWithError(obj, KEY_RES);
    PyObject *walltime = PyDict_GetItemWithError(obj, KEY_WALLTIME);
    if (PyErr_Occurred())
        goto done;
    PyObject *profile = PyDict_GetItemWithError(profiles, profile_name);
    PyObject *delay = profile != NULL && PyDict_Check(profile)
                          ? PyDict_GetItemWithError(profile, KEY_DELAY)
                          : NULL;
    if (PyErr_Occurred() || grow_jobs(E) < 0)
        goto done;
    Py_ssize_t j = E->njobs;
    Job *job = &E->jobs[j];
    memset(job, 0, sizeof(Job));
    E->njobs++;
    job->name = Py_NewRef(name);
    job->workload = Py_NewRef(workload);
    job->job_id = Py_NewRef(job_id);
    job->obj = Py_NewRef(obj);
    job->profile = Py_NewRef(profile_name);
    Py_ssize_t size;
    if ((job->name_utf8 = PyUnicode_AsUTF8AndSize(name, &size)) == NULL)
        goto done;
    job->name_size = (size_t)size;
    if ((job->workload_utf8 = PyUnicode_AsUTF8AndSize(workload, &size)) == NULL)
        goto done;
    job->workload_size = (size_t)size;
    if (!PyUnicode_Check(profile_name) ||
        (job->profile_utf8 = PyUnicode_AsUTF8AndSize(profile_name, &size)) == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a registered job's profile must be a str");
        goto done;
    }
    job->profile_size = (size_t)size;
    if (delay == NULL || !as_double(delay, &job->delay) ||
        ((job->subtime = PyFloat_AsDouble(subtime)) == -1.0 && PyErr_Occurred())) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a registered job's delay must be an int or a float");
        goto done;
    }
    job->res = PyLong_AsLong(res);
    job->walltime = -1.0;
    if (walltime != NULL && walltime != Py_None) {
        double value = PyFloat_AsDouble(walltime);
        if (value == -1.0 && PyErr_Occurred())
            goto done;
        if (value != -1.0)
            job->walltime = value;
    }
    if (job->res == -1 && PyErr_Occurred())
        goto done;
    job->state = J_SUBMITTED;
    job->live_seq = E->live_seq++;
    E->live++;
    PyObject *number = PyLong_FromSsize_t(j);
    if (number == NULL || PyDict_SetItem(E->ids, job_id, number) < 0) {
        Py_XDECREF(number);
        goto done;
    }
    Py_DECREF(number);
    PyObject *counts = PyDict_GetItemWithError(E->refcounts, workload);
    if (counts == NULL || add_refcount(counts, profile_name, 0, 1) == LONG_MIN)
        goto done;
    *index = j;
    r = 0;
done:
    Py_XDECREF(job_id);
    Py_XDECREF(obj);
    Py_XDECREF(parts);
    return r;
}

/* simulator._release_profile: Batsim 4 forgets a finished job, and its profile once no live
   job uses it */
static int
release_profile(Engine *E, Job *job)
{
    PyObject *counts = PyDict_GetItemWithError(E->refcounts, job->workload);
    if (counts == NULL)
        return PyErr_Occurred() ? -1 : 0;
    long left = add_refcount(counts, job->profile, 1, -1);
    if (left == LONG_MIN)
        return -1;
    if (left <= 0 && !E->profile_reuse) {
        PyObject *profiles = PyDict_GetItemWithError(E->profiles_of, job->workload);
        if (profiles == NULL && PyErr_Occurred())
            return -1;
        if (profiles != NULL && PyDict_Contains(profiles, job->profile) == 1 &&
            PyDict_DelItem(profiles, job->profile) < 0)
            return -1;
        if (PyDict_DelItem(counts, job->profile) < 0)
            return -1;
    }
    return 0;
}

/* simulator._parse for a static simulation: the server message a decision becomes, or an
   error (dynamic jobs are disabled; not a decision; a quote in metadata) */
static int
parse_decision(Engine *E, PyObject *decision, int *kind, Py_ssize_t *job)
{
    if (PyObject_TypeCheck(decision, (PyTypeObject *)E->types[T_EXECUTE]))
        *kind = P_EXECUTE;
    else if (PyObject_TypeCheck(decision, (PyTypeObject *)E->types[T_REJECT]))
        *kind = P_REJECT;
    else if (PyObject_TypeCheck(decision, (PyTypeObject *)E->types[T_KILL]))
        *kind = P_KILL;
    else if (PyObject_TypeCheck(decision, (PyTypeObject *)E->types[T_CALL_ME_LATER]))
        *kind = P_CALL_ME_LATER;
    else if (PyObject_TypeCheck(decision, (PyTypeObject *)E->types[T_METADATA])) {
        PyObject *metadata = PyObject_GetAttr(decision, S_METADATA);
        if (metadata == NULL)
            return -1;
        int quote = PyUnicode_Check(metadata) ? PyUnicode_FindChar(metadata, '"', 0,
                                                                  PyUnicode_GET_LENGTH(metadata), 1)
                                              : -2;
        Py_DECREF(metadata);
        if (quote == -2) {
            PyErr_SetString(PyExc_TypeError, "SET_JOB_METADATA's metadata must be a str");
            return -1;
        }
        if (quote >= 0)
            return explain(E, "parse", &decision, 1);
        *kind = P_METADATA;
    }
    else if (PyObject_TypeCheck(decision, (PyTypeObject *)E->types[T_REGISTER_PROFILE])) {
        if (!E->dynamic)
            return explain(E, "parse", &decision, 1);
        if (register_profile(E, decision) < 0)
            return -1;
        *kind = P_PROFILE_REGISTERED;
    }
    else if (PyObject_TypeCheck(decision, (PyTypeObject *)E->types[T_REGISTER_JOB])) {
        if (!E->dynamic)
            return explain(E, "parse", &decision, 1);
        if (register_job(E, decision, job) < 0)
            return -1;
        *kind = P_JOB_REGISTERED;
    }
    else if (PyObject_TypeCheck(decision, (PyTypeObject *)E->types[T_NOTIFY])) {
        if (!E->dynamic)
            return explain(E, "parse", &decision, 1);
        PyObject *type = PyObject_GetAttrString(decision, "type");
        if (type == NULL)
            return -1;
        int end = PyUnicode_Check(type) &&
                  PyUnicode_CompareWithASCIIString(type, "registration_finished") == 0;
        int more = PyUnicode_Check(type) &&
                   PyUnicode_CompareWithASCIIString(type, "continue_registration") == 0;
        Py_DECREF(type);
        if (!end && !more)
            return explain(E, "notify", &decision, 1);
        *kind = end ? P_END_REGISTRATION : P_CONTINUE_REGISTRATION;
    }
    else
        return explain(E, "parse", &decision, 1);
    return 0;
}

/* the job a decision names (simulator._known_job), or an error */
static Job *
known_job(Engine *E, PyObject *decision, PyObject *job_id)
{
    PyObject *index = PyDict_GetItemWithError(E->ids, job_id);
    if (index == NULL) {
        if (!PyErr_Occurred()) {
            PyObject *args[3] = {decision, job_id, Py_False};
            explain(E, "unknown_job", args, 3);
        }
        return NULL;
    }
    Job *job = &E->jobs[PyLong_AsSsize_t(index)];
    if (job->state == J_LOADED || job->state == J_FORGOTTEN) {
        PyObject *args[3] = {decision, job_id, Py_True};
        explain(E, "unknown_job", args, 3);
        return NULL;
    }
    return job;
}

static const char *
state_name(int state)
{
    switch (state) {
    case J_SUBMITTED:
        return "submitted";
    case J_RUNNING:
        return "running";
    case J_DONE:
        return "done";
    case J_REJECTED:
        return "rejected";
    }
    return "unknown";
}

/* The allocation of an EXECUTE_JOB, checked as simulator._on_execute checks it: its maximal
   runs, their count, the bounds, the machines in use. 0 and the runs in *out, or -1. */
static int
take_alloc(Engine *E, PyObject *decision, PyObject *job_id, Job *job, PyObject *alloc)
{
    PyObject *extra = PyObject_GetAttr(decision, S_EXTRA);
    if (extra == NULL)
        return -1;
    int has_extra = PyObject_IsTrue(extra);
    Py_DECREF(extra);
    if (has_extra < 0)
        return -1;
    PyObject *intervals = has_extra ? NULL : PyObject_CallMethodNoArgs(alloc, S_INTERVALS);
    PyObject *runs = intervals == NULL ? NULL : PySequence_List(intervals);
    Py_XDECREF(intervals);
    if (!has_extra && runs == NULL)
        return -1;
    Py_ssize_t n = runs == NULL ? 0 : PyList_GET_SIZE(runs);
    int *pairs = PyMem_Malloc((n ? n : 1) * 2 * sizeof(int));
    if (pairs == NULL) {
        Py_XDECREF(runs);
        PyErr_NoMemory();
        return -1;
    }
    long long size = 0;
    int ok = !has_extra && n > 0, clash = 0;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *run = PyList_GET_ITEM(runs, i);
        long low, high;
        if (!PyArg_ParseTuple(run, "ll", &low, &high)) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        if (low < 0 || high >= E->nb_machines || high < low ||
            (i && low <= pairs[2 * i - 1] + 1)) {
            ok = 0; /* outside, or not a set's maximal runs: the Python path explains it */
            break;
        }
        pairs[2 * i] = (int)low;
        pairs[2 * i + 1] = (int)high;
        size += high - low + 1;
        for (long m = low; m <= high && !clash; m++)
            clash = (E->busy[m / 64] >> (m % 64)) & 1;
    }
    Py_XDECREF(runs);
    if (!ok || size != job->res || clash) {
        PyMem_Free(pairs);
        /* the busy machines as a Python int mask, for the message */
        PyObject *busy = _PyLong_FromByteArray((const unsigned char *)E->busy,
                                               (size_t)E->words * 8, 1, 0);
        PyObject *res = PyLong_FromLong(job->res);
        PyObject *hosts = PyLong_FromLong(E->nb_machines);
        if (busy != NULL && res != NULL && hosts != NULL) {
            PyObject *args[5] = {decision, job_id, res, hosts, busy};
            explain(E, "execute", args, 5);
        }
        Py_XDECREF(busy);
        Py_XDECREF(res);
        Py_XDECREF(hosts);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "an allocation was refused without a reason");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        for (long m = pairs[2 * i]; m <= pairs[2 * i + 1]; m++)
            E->busy[m / 64] |= (uint64_t)1 << (m % 64);
    job->runs = pairs;
    job->nruns = (int)n;
    job->alloc = Py_NewRef(alloc);
    return 0;
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
outbox_add(Engine *E, int type, double stamp, Py_ssize_t job, PyObject *obj)
{
    Event ev = {type, stamp, job, obj};
    return vec_push(&E->outbox, &ev, sizeof ev);
}

/* _finish: a job that ran is over (completed, past its walltime or killed) */
static int
finish(Engine *E, Py_ssize_t j)
{
    Job *job = &E->jobs[j];
    for (int r = 0; r < job->nruns; r++)
        for (int m = job->runs[2 * r]; m <= job->runs[2 * r + 1]; m++)
            E->busy[m / 64] &= ~((uint64_t)1 << (m % 64));
    if (vec_push(&E->to_delete, &j, sizeof j) < 0)
        return -1;
    job->actor = NULL;
    if (finished_row(E, job) < 0)
        return -1;
    PyMem_Free(job->runs); /* the row is written: the runs are no longer needed */
    job->runs = NULL;
    job->nruns = 0;
    return outbox_add(E, EV_COMPLETED, json_time(E->now), j, NULL);
}

static int
on_execute(Engine *E, PyObject *decision, Call *call)
{
    PyObject *job_id = PyObject_GetAttr(decision, S_JOB_ID);
    if (job_id == NULL)
        return -1;
    Job *job = known_job(E, decision, job_id);
    if (job == NULL)
        goto fail;
    if (job->state != J_SUBMITTED) {
        PyObject *state = PyUnicode_FromString(state_name(job->state));
        if (state != NULL) {
            PyObject *args[3] = {decision, job_id, state};
            explain(E, "not_waiting", args, 3);
            Py_DECREF(state);
        }
        goto fail;
    }
    PyObject *alloc = PyObject_GetAttr(decision, S_ALLOC);
    if (alloc == NULL)
        goto fail;
    int r = take_alloc(E, decision, job_id, job, alloc);
    Py_DECREF(alloc);
    if (r < 0)
        goto fail;
    Py_DECREF(job_id);
    E->running++;
    job->state = J_RUNNING;
    Actor *actor = new_actor(E, A_JOB);
    if (actor == NULL)
        return -1;
    actor->job = job - E->jobs;
    job->actor = actor;
    call->kind = K_CREATE;
    call->created = actor;
    return 1;
fail:
    Py_DECREF(job_id);
    return -1;
}

static int
on_reject(Engine *E, PyObject *decision)
{
    PyObject *job_id = PyObject_GetAttr(decision, S_JOB_ID);
    if (job_id == NULL)
        return -1;
    Job *job = known_job(E, decision, job_id);
    if (job != NULL && job->state != J_SUBMITTED) {
        PyObject *state = PyUnicode_FromString(state_name(job->state));
        if (state != NULL) {
            PyObject *args[3] = {decision, job_id, state};
            explain(E, "not_waiting", args, 3);
            Py_DECREF(state);
        }
        job = NULL;
    }
    Py_DECREF(job_id);
    if (job == NULL)
        return -1;
    job->state = J_REJECTED;
    Py_ssize_t j = job - E->jobs;
    if (vec_push(&E->to_delete, &j, sizeof j) < 0)
        return -1;
    return rejected_row(E, job);
}

static int
on_kill(Engine *E, PyObject *decision, Call *call)
{
    PyObject *ids = PyObject_GetAttr(decision, S_JOB_IDS);
    if (ids == NULL)
        return -1;
    PyObject *list = PySequence_List(ids);
    Py_DECREF(ids);
    if (list == NULL)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(list);
    KillReport *report = PyMem_Calloc(1, sizeof(KillReport));
    if (report == NULL || (report->jobs = PyMem_Malloc((n ? n : 1) * sizeof(Py_ssize_t))) == NULL ||
        (report->killed = PyMem_Malloc((n ? n : 1) * sizeof(Py_ssize_t))) == NULL) {
        free_report(report);
        Py_DECREF(list);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *job_id = PyList_GET_ITEM(list, i);
        Job *job = known_job(E, decision, job_id);
        if (job == NULL)
            goto fail;
        if (job->kill_requested)
            continue;
        if (job->state == J_SUBMITTED || job->state == J_REJECTED) {
            PyObject *args[2] = {decision, job_id};
            explain(E, "not_running", args, 2);
            goto fail;
        }
        job->kill_requested = 1;
        report->jobs[report->njobs++] = job - E->jobs;
    }
    Py_DECREF(list);
    if (report->njobs == 0) {
        free_report(report);
        return 0;
    }
    if ((report->progress = PyDict_New()) == NULL) {
        free_report(report);
        return -1;
    }
    E->killers++;
    Actor *killer = new_actor(E, A_KILLER);
    if (killer == NULL) {
        free_report(report);
        return -1;
    }
    killer->report = report;
    call->kind = K_CREATE;
    call->created = killer;
    return 1;
fail:
    free_report(report);
    Py_DECREF(list);
    return -1;
}

static int
on_call_me_later(Engine *E, PyObject *decision, Call *call)
{
    PyObject *when = PyObject_GetAttr(decision, S_WHEN);
    double target;
    if (when == NULL || number(when, &target) < 0) {
        Py_XDECREF(when);
        return -1;
    }
    Py_DECREF(when);
    if (!(target > E->now)) {
        PyObject *now = PyFloat_FromDouble(E->now);
        if (now != NULL) {
            PyObject *args[2] = {decision, now};
            explain(E, "call_not_later", args, 2);
            Py_DECREF(now);
        }
        return -1;
    }
    E->waiters++;
    Actor *waiter = new_actor(E, A_WAITER);
    if (waiter == NULL)
        return -1;
    waiter->target = target;
    call->kind = K_CREATE;
    call->created = waiter;
    return 1;
}

static int
on_metadata(Engine *E, PyObject *decision)
{
    PyObject *job_id = PyObject_GetAttr(decision, S_JOB_ID);
    if (job_id == NULL)
        return -1;
    Job *job = known_job(E, decision, job_id);
    Py_DECREF(job_id);
    if (job == NULL)
        return -1;
    PyObject *metadata = PyObject_GetAttr(decision, S_METADATA);
    if (metadata == NULL)
        return -1;
    Py_XSETREF(job->metadata, metadata);
    return 0;
}

static int
on_killing_done(Engine *E, KillReport *report)
{
    for (Py_ssize_t k = 0; k < report->nkilled; k++) {
        E->running--;
        if (finish(E, report->killed[k]) < 0)
            return -1;
    }
    PyObject *ids = PyList_New(report->njobs);
    if (ids == NULL)
        return -1;
    for (Py_ssize_t k = 0; k < report->njobs; k++)
        PyList_SET_ITEM(ids, k, Py_NewRef(E->jobs[report->jobs[k]].job_id));
    PyObject *stamp = PyFloat_FromDouble(json_time(E->now));
    PyObject *event = NULL;
    if (stamp != NULL) {
        PyObject *args[3] = {stamp, ids, report->progress};
        event = make(E, T_KILLED, args, 3);
        Py_DECREF(stamp);
    }
    Py_DECREF(ids);
    if (event == NULL)
        return -1;
    if (outbox_add(E, EV_KILLED, json_time(E->now), -1, event) < 0) {
        Py_DECREF(event);
        return -1;
    }
    E->killers--;
    return 0;
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
        return outbox_add(E, EV_NOTIFY, json_time(E->now), -1, NULL);
    case P_SUBMITTED:
        stamp = json_time(E->now);
        for (Py_ssize_t k = p.a; k < p.b; k++) {
            Py_ssize_t j = E->order[k];
            E->jobs[j].state = J_SUBMITTED;
            E->jobs[j].live_seq = E->live_seq++;
            E->live++;
            if (outbox_add(E, EV_SUBMITTED, stamp, j, NULL) < 0)
                return -1;
        }
        return 0;
    case P_COMPLETED:
        E->running--;
        return finish(E, p.a);
    case P_EXECUTE:
        return on_execute(E, p.ptr, call);
    case P_REJECT:
        return on_reject(E, p.ptr);
    case P_KILL:
        return on_kill(E, p.ptr, call);
    case P_CALL_ME_LATER:
        return on_call_me_later(E, p.ptr, call);
    case P_METADATA:
        return on_metadata(E, p.ptr);
    case P_READY:
        E->sched_ready = 1;
        if (E->end_sent)
            E->end_ack = 1;
        return 0;
    case P_WAITING_DONE:
        E->waiters--;
        return outbox_add(E, EV_CALL, json_time(E->now), -1, NULL);
    case P_KILLING_DONE: {
        int r = on_killing_done(E, p.ptr);
        free_report(p.ptr);
        return r;
    }
    case P_JOB_REGISTERED:
        if (E->acknowledge)
            return outbox_add(E, EV_SUBMITTED, json_time(E->now), p.a, NULL);
        return 0;
    case P_PROFILE_REGISTERED:
        return 0;
    case P_END_REGISTRATION:
        E->registration_finished = 1;
        return 0;
    case P_CONTINUE_REGISTRATION:
        E->registration_finished = 0;
        return 0;
    }
    PyErr_SetString(PyExc_RuntimeError, "unknown server message (a bug of _csim)");
    return -1;
}

static int
simulation_finished(Engine *E)
{
    return E->submitters_done == 1 && E->registration_finished &&
           E->live == (Py_ssize_t)E->to_delete.len && E->running == 0 && E->waiters == 0 &&
           E->killers == 0;
}

enum { SV_START, SV_SENT, SV_LOOP, SV_GOT, SV_CREATED, SV_END_SENT };

/* the REQ-REP actor's exchange: the message to the scheduler, its reply checked and kept */
static int
exchange(Engine *E, Actor *a)
{
    E->messages++;
    if (E->messages % 2048 == 0) {
        if (PyErr_CheckSignals() < 0)
            return -1;
        if (E->progress != Py_None) {
            PyObject *done = PyLong_FromSsize_t(PyList_GET_SIZE(E->rows) - E->killed_rows);
            if (done == NULL)
                return -1;
            PyObject *out = PyObject_CallOneArg(E->progress, done);
            Py_DECREF(done);
            if (out == NULL)
                return -1;
            Py_DECREF(out);
        }
    }
    PyObject *message = build_message(E, a);
    if (message == NULL)
        return -1;
    E->last_now = a->msg_now;
    E->events_sent += a->nevents;
    free_events(a->events, a->nevents);
    a->events = NULL;
    a->nevents = 0;
    PyObject *reply = PyObject_CallOneArg(E->handler, message);
    Py_DECREF(message);
    if (reply == NULL)
        return -1;
    int r = take_reply(E, a, reply);
    Py_DECREF(reply);
    return r;
}

/* Run an actor until its next simcall (stored in *call): 1, or 0 when its code is over. */
static int
step_actor(Engine *E, Actor *a, Call *call)
{
    Payload payload;
    if (a->dead)
        return 0; /* killed while it was ready to run */
    switch (a->type) {
    case A_SUBMITTER: /* static_job_submitter_process */
        switch (a->pc) {
        case 0:
            call->kind = K_PUT;
            call->payload = (Payload){P_HELLO, 0, 0, NULL};
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
            call->payload = (Payload){P_BYE, 0, 0, NULL};
            a->pc = 5;
            return 1;
        default:
            return 0;
        }
    submit_loop:
        while (a->pos < E->nstatic) {
            double subtime = E->jobs[E->order[a->pos]].subtime;
            if (subtime > a->current) {
                if (a->pos > a->batch_lo) {
                    call->kind = K_PUT;
                    call->payload = (Payload){P_SUBMITTED, a->batch_lo, a->pos, NULL};
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
            call->payload = (Payload){P_SUBMITTED, a->batch_lo, a->pos, NULL};
            a->batch_lo = a->pos;
            a->pc = 4;
            return 1;
        }
        call->kind = K_PUT;
        call->payload = (Payload){P_BYE, 0, 0, NULL};
        a->pc = 5;
        return 1;

    case A_SERVER: /* server_process */
        switch (a->pc) {
        case SV_START:
            if (outbox_add(E, EV_BEGINS, 0.0, -1, NULL) < 0)
                return -1;
            a->send_return = SV_LOOP;
            a->pc = SV_SENT;
            return send_message(E, call) < 0 ? -1 : 1;
        case SV_SENT: /* the REQ-REP actor is created: the message is sent */
            E->sched_ready = 0;
            for (Py_ssize_t k = 0; k < E->to_delete.len; k++) { /* jobs_to_be_deleted */
                Job *gone = &E->jobs[VEC_AT(E->to_delete, Py_ssize_t, k)];
                gone->state = J_FORGOTTEN;
                if (E->dynamic && release_profile(E, gone) < 0)
                    return -1;
                /* its row is written: only its id stays known (Batsim 4 forgets the rest) */
                Py_CLEAR(gone->name);
                gone->name_utf8 = NULL;
                Py_CLEAR(gone->metadata);
            }
            E->live -= E->to_delete.len;
            E->to_delete.len = 0;
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
                if (outbox_add(E, EV_ENDS, json_time(E->now), -1, NULL) < 0)
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
        case 0:
            if (exchange(E, a) < 0)
                return -1;
            a->di = 0;
            goto reqrep_loop;
        case 1: /* at the decision's timestamp: forward it */
            goto reqrep_put;
        case 2:
            a->di++;
            goto reqrep_loop;
        case 3:
            call->kind = K_PUT;
            call->payload = (Payload){P_READY, 0, 0, NULL};
            a->pc = 4;
            return 1;
        default:
            return 0;
        }
    reqrep_loop:
        if (a->di < a->ndecisions) {
            PyObject *decision = PyList_GET_ITEM(a->decisions, a->di);
            int kind = P_NONE;
            Py_ssize_t registered = -1;
            if (parse_decision(E, decision, &kind, &registered) < 0)
                return -1;
            a->forward_job = registered;
            PyObject *stamp = PyObject_GetAttr(decision, S_TIMESTAMP);
            double t;
            if (stamp == NULL || number(stamp, &t) < 0) {
                Py_XDECREF(stamp);
                return -1;
            }
            Py_DECREF(stamp);
            if (t > E->now) {
                call->kind = K_SLEEP;
                call->duration = t - E->now;
                a->pc = 1;
                a->forward = kind;
                return 1;
            }
            a->forward = kind;
            goto reqrep_put;
        }
        if (a->reply_now > E->now) {
            call->kind = K_SLEEP;
            call->duration = a->reply_now - E->now;
            a->pc = 3;
            return 1;
        }
        call->kind = K_PUT;
        call->payload = (Payload){P_READY, 0, 0, NULL};
        a->pc = 4;
        return 1;
    reqrep_put:
        call->kind = K_PUT;
        call->payload =
            (Payload){a->forward, a->forward_job, 0, PyList_GET_ITEM(a->decisions, a->di)};
        a->pc = 2;
        return 1;

    case A_JOB: { /* execute_job_process, do_delay_task */
        Job *job = &E->jobs[a->job];
        switch (a->pc) {
        case 0:
            job->start = E->now;
            call->kind = K_SLEEP;
            if (job->walltime < 0 || job->delay < job->walltime) {
                call->duration = job->delay;
                job->final = F_SUCCESS;
            }
            else {
                call->duration = job->walltime;
                job->final = F_WALLTIME;
            }
            a->pc = 1;
            return 1;
        case 1:
            job->end = E->now;
            job->state = J_DONE;
            call->kind = K_PUT;
            call->payload = (Payload){P_COMPLETED, a->job, 0, NULL};
            a->pc = 2;
            return 1;
        default:
            return 0;
        }
    }

    case A_KILLER: { /* killer_process */
        KillReport *report = a->report;
        if (a->pc == 1) { /* the job's actor is killed */
            Job *job = &E->jobs[report->jobs[a->pos]];
            job->state = J_DONE;
            job->final = F_KILLED;
            job->end = E->now;
            report->killed[report->nkilled++] = report->jobs[a->pos];
            a->pos++;
        }
        else if (a->pc == 2)
            return 0;
        while (a->pos < report->njobs) {
            Job *job = &E->jobs[report->jobs[a->pos]];
            if (job->state != J_RUNNING) {
                a->pos++; /* its sleep is over: it completes on its own */
                continue;
            }
            double elapsed = E->now - job->start;
            PyObject *progress = PyFloat_FromDouble(json_time(elapsed / job->delay));
            PyObject *entry = progress == NULL ? NULL : PyDict_New();
            int failed = entry == NULL || PyDict_SetItem(entry, S_PROFILE_NAME, job->profile) < 0 ||
                         PyDict_SetItem(entry, S_PROGRESS, progress) < 0 ||
                         PyDict_SetItem(report->progress, job->job_id, entry) < 0;
            Py_XDECREF(progress);
            Py_XDECREF(entry);
            if (failed)
                return -1;
            call->kind = K_KILL;
            call->created = job->actor;
            job->actor = NULL;
            a->pc = 1;
            return 1;
        }
        call->kind = K_PUT;
        call->payload = (Payload){P_KILLING_DONE, 0, 0, report};
        a->report = NULL; /* the server frees it */
        a->pc = 2;
        return 1;
    }

    case A_WAITER: /* waiter_process (at least 1e-5 s of sleep) */
        switch (a->pc) {
        case 0:
            if (E->now < a->target) {
                double duration = a->target - E->now;
                call->kind = K_SLEEP;
                call->duration = duration > 1e-5 ? duration : 1e-5;
                a->pc = 1;
                return 1;
            }
            /* fall through */
        case 1:
            if (!(E->end_sent || E->end_ack)) {
                call->kind = K_PUT;
                call->payload = (Payload){P_WAITING_DONE, 0, 0, NULL};
                a->pc = 2;
                return 1;
            }
            return 0;
        default:
            return 0;
        }
    }
    PyErr_SetString(PyExc_RuntimeError, "unknown actor (a bug of _csim)");
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

static int
compare_live(const void *pa, const void *pb)
{
    const Job *a = &sorting[*(const Py_ssize_t *)pa], *b = &sorting[*(const Py_ssize_t *)pb];
    return (a->live_seq > b->live_seq) - (a->live_seq < b->live_seq);
}

/* 1 when the workload is one this simulator takes, 0 when it is not (the Python simulator then
   runs, and says what is wrong with it if anything is), -1 on error. */
static int
load(Engine *E, PyObject *jobs, PyObject *profiles)
{
    Py_ssize_t n = PyList_GET_SIZE(jobs);
    /* every profile of the workload is a delay the reference takes (it checks them all) */
    Py_ssize_t pos = 0;
    PyObject *key, *prof;
    while (PyDict_Next(profiles, &pos, &key, &prof)) {
        PyObject *type = PyDict_Check(prof) ? PyDict_GetItemWithError(prof, KEY_TYPE) : NULL;
        PyObject *delay = PyDict_Check(prof) ? PyDict_GetItemWithError(prof, KEY_DELAY) : NULL;
        double value;
        if (PyErr_Occurred())
            return -1;
        if (type == NULL || delay == NULL || !PyUnicode_CheckExact(type) ||
            PyUnicode_CompareWithASCIIString(type, "delay") != 0 || !as_double(delay, &value) ||
            !(value > 0) || isinf(value))
            return 0;
    }
    E->jobs = PyMem_Calloc(n ? n : 1, sizeof(Job));
    E->jobs_cap = n ? n : 1;
    E->order = PyMem_Malloc((n ? n : 1) * sizeof(Py_ssize_t));
    E->ids = PyDict_New();
    if (E->jobs == NULL || E->order == NULL || E->ids == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    int verdict = 1;
    for (Py_ssize_t i = 0; i < n && verdict == 1; i++) {
        Job *job = &E->jobs[i];
        E->njobs = i + 1; /* what the clean-up releases */
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
            return -1;
        if (id == NULL || subtime == NULL || res == NULL || profile == NULL ||
            !PyUnicode_CheckExact(profile) || !PyLong_CheckExact(res) ||
            !(PyUnicode_CheckExact(id) || PyLong_CheckExact(id))) {
            verdict = 0;
            break;
        }
        job->obj = Py_NewRef(obj);
        job->workload = Py_NewRef(E->w0);
        job->workload_utf8 = "w0";
        job->workload_size = 2;
        job->name = PyObject_Str(id);
        if (job->name == NULL)
            return -1;
        job->job_id = PyUnicode_FromFormat("w0!%U", job->name);
        if (job->job_id == NULL)
            return -1;
        int seen = PyDict_Contains(E->ids, job->job_id);
        if (seen < 0)
            return -1;
        if (seen) {
            verdict = 0; /* a duplicate id: the Python simulator says so */
            break;
        }
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL || PyDict_SetItem(E->ids, job->job_id, index) < 0) {
            Py_XDECREF(index);
            return -1;
        }
        Py_DECREF(index);
        job->profile = Py_NewRef(profile);
        Py_ssize_t name_size, profile_size;
        job->name_utf8 = PyUnicode_AsUTF8AndSize(job->name, &name_size);
        job->profile_utf8 = PyUnicode_AsUTF8AndSize(profile, &profile_size);
        if (job->name_utf8 == NULL || job->profile_utf8 == NULL) {
            PyErr_Clear(); /* not UTF-8 (a lone surrogate): the Python simulator */
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
        /* the simulator's walltime: none for None or -1, else the value (> 0 here; anything
           else goes to the Python simulator) */
        job->walltime = -1.0;
        if (walltime != NULL && walltime != Py_None) {
            double value;
            if (!as_double(walltime, &value) || !(value == -1.0 || value > 0) || isinf(value)) {
                verdict = 0;
                break;
            }
            if (value > 0)
                job->walltime = value;
        }
        PyObject *prof = PyDict_GetItemWithError(profiles, profile);
        if (prof == NULL) {
            if (PyErr_Occurred())
                return -1;
            verdict = 0;
            break;
        }
        PyObject *type = PyDict_Check(prof) ? PyDict_GetItemWithError(prof, KEY_TYPE) : NULL;
        PyObject *delay = PyDict_Check(prof) ? PyDict_GetItemWithError(prof, KEY_DELAY) : NULL;
        if (PyErr_Occurred())
            return -1;
        if (type == NULL || delay == NULL || !PyUnicode_CheckExact(type) ||
            PyUnicode_CompareWithASCIIString(type, "delay") != 0 ||
            !as_double(delay, &job->delay) || !(job->delay > 0) || isinf(job->delay)) {
            verdict = 0;
            break;
        }
        E->order[i] = i;
    }
    if (verdict == 1 && n > 1) {
        sorting = E->jobs;
        qsort(E->order, (size_t)n, sizeof(Py_ssize_t), compare_order);
    }
    E->nstatic = E->njobs;
    if (verdict == 1 && E->dynamic) { /* the workload's profiles, and the jobs using each */
        PyObject *mine = PyDict_Copy(profiles), *counts = PyDict_New();
        int failed = mine == NULL || counts == NULL ||
                     PyDict_SetItem(E->profiles_of, E->w0, mine) < 0 ||
                     PyDict_SetItem(E->refcounts, E->w0, counts) < 0;
        for (Py_ssize_t i = 0; !failed && i < n; i++)
            failed = add_refcount(counts, E->jobs[i].profile, 0, 1) == LONG_MIN;
        Py_XDECREF(mine);
        Py_XDECREF(counts);
        if (failed)
            return -1;
    }
    return verdict;
}

static void
engine_free(Engine *E)
{
    for (Py_ssize_t i = 0; i < E->njobs; i++) {
        Job *job = &E->jobs[i];
        Py_XDECREF(job->name);
        Py_XDECREF(job->workload);
        Py_XDECREF(job->job_id);
        Py_XDECREF(job->obj);
        Py_XDECREF(job->profile);
        Py_XDECREF(job->alloc);
        Py_XDECREF(job->metadata);
        PyMem_Free(job->runs);
    }
    PyMem_Free(E->jobs);
    PyMem_Free(E->order);
    Py_XDECREF(E->ids);
    Py_XDECREF(E->profiles_of);
    Py_XDECREF(E->refcounts);
    while (E->living != NULL)
        free_actor(E, E->living);
    PyMem_Free(E->ran.items);
    PyMem_Free(E->to_run.items);
    PyMem_Free(E->calls.items);
    PyMem_Free(E->call_actors.items);
    while (E->box.len) {
        Comm *comm = mailbox_pop(&E->box);
        if (comm->payload.kind == P_KILLING_DONE)
            free_report(comm->payload.ptr);
        PyMem_Free(comm);
    }
    PyMem_Free(E->box.items);
    if (E->comm != NULL && E->comm->payload.kind == P_KILLING_DONE)
        free_report(E->comm->payload.ptr);
    PyMem_Free(E->comm);
    sleep_free(&E->sleeps);
    free_events(E->outbox.items, E->outbox.len);
    PyMem_Free(E->to_delete.items);
    PyMem_Free(E->busy);
    PyMem_Free(E->buf);
    Py_XDECREF(E->rows);
}

static PyObject *
simulate(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"jobs",     "profiles",     "nb_machines", "handler",
                             "types",    "begins",       "problems",    "progress",
                             "dynamic_jobs", "acknowledge_dynamic_jobs", "profile_reuse", NULL};
    PyObject *jobs, *profiles, *handler, *types, *begins, *problems, *progress = Py_None;
    long nb_machines;
    int dynamic = 0, acknowledge = 0, profile_reuse = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!lOO!OO|Oppp:simulate", kwlist,
                                     &PyList_Type, &jobs, &PyDict_Type, &profiles, &nb_machines,
                                     &handler, &PyTuple_Type, &types, &begins, &problems,
                                     &progress, &dynamic, &acknowledge, &profile_reuse))
        return NULL;
    if (PyTuple_GET_SIZE(types) != T_COUNT) {
        PyErr_Format(PyExc_ValueError, "types: %d classes expected", T_COUNT);
        return NULL;
    }
    for (int t = 0; t < T_COUNT; t++) {
        PyObject *cls = PyTuple_GET_ITEM(types, t);
        if (!PyType_Check(cls) || strcmp(((PyTypeObject *)cls)->tp_name, TYPE_NAMES[t]) != 0) {
            PyErr_Format(PyExc_TypeError, "types[%d] must be the class %s", t, TYPE_NAMES[t]);
            return NULL;
        }
    }
    if (nb_machines <= 0 || nb_machines > (1L << 30))
        Py_RETURN_NONE;
    Engine engine;
    memset(&engine, 0, sizeof engine);
    Engine *E = &engine;
    E->nb_machines = nb_machines;
    E->handler = handler;
    E->progress = progress;
    E->begins = begins;
    E->problems = problems;
    E->dynamic = dynamic;
    E->acknowledge = acknowledge;
    E->profile_reuse = profile_reuse;
    E->registration_finished = !dynamic;
    E->w0 = W0;
    for (int t = 0; t < T_COUNT; t++)
        E->types[t] = PyTuple_GET_ITEM(types, t);
    PyObject *out = NULL;
    E->profiles_of = PyDict_New();
    E->refcounts = PyDict_New();
    if (E->profiles_of == NULL || E->refcounts == NULL)
        goto done;
    int verdict = load(E, jobs, profiles);
    if (verdict <= 0) {
        if (verdict == 0)
            out = Py_NewRef(Py_None);
        goto done;
    }
    E->words = (nb_machines + 63) / 64;
    E->busy = PyMem_Calloc((size_t)E->words, sizeof(uint64_t));
    E->rows = PyList_New(0);
    if (E->busy == NULL || E->rows == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    /* the submitter, then the server, ready to run (BatsimSimulator.__init__) */
    Actor *submitter = new_actor(E, A_SUBMITTER);
    Actor *server = submitter == NULL ? NULL : new_actor(E, A_SERVER);
    if (server == NULL || vec_push(&E->to_run, &submitter, sizeof(Actor *)) < 0 ||
        vec_push(&E->to_run, &server, sizeof(Actor *)) < 0)
        goto done;
    if (run(E) < 0)
        goto done;
    if (!E->end_ack) {
        /* stuck: the jobs submitted and never executed nor rejected, in submission order */
        PyObject *waiting = PyList_New(0);
        if (waiting == NULL)
            goto done;
        Py_ssize_t *stuck_jobs = PyMem_Malloc((E->njobs ? E->njobs : 1) * sizeof(Py_ssize_t));
        Py_ssize_t nstuck = 0;
        if (stuck_jobs == NULL) {
            Py_DECREF(waiting);
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < E->njobs; k++)
            if (E->jobs[k].state == J_SUBMITTED)
                stuck_jobs[nstuck++] = k;
        sorting = E->jobs;
        qsort(stuck_jobs, (size_t)nstuck, sizeof(Py_ssize_t), compare_live); /* _live's order */
        for (Py_ssize_t k = 0; k < nstuck; k++) {
            if (PyList_Append(waiting, E->jobs[stuck_jobs[k]].job_id) < 0) {
                PyMem_Free(stuck_jobs);
                Py_DECREF(waiting);
                goto done;
            }
        }
        PyMem_Free(stuck_jobs);
        PyObject *stuck = PyObject_CallMethod(problems, "stuck", "dO", E->now, waiting);
        Py_DECREF(waiting);
        if (stuck != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(stuck), stuck);
            Py_DECREF(stuck);
        }
        goto done;
    }
    out = Py_BuildValue("OLL", E->rows, E->messages, E->events_sent);
done:
    engine_free(E);
    return out;
}

/* _fixed6(value): put_fixed6's text and json_time's double of a float, for the tests, which
   compare them with Python's '%.6f' and float() of it */
static PyObject *
fixed6(PyObject *self, PyObject *arg)
{
    double value = PyFloat_AsDouble(arg);
    if (value == -1.0 && PyErr_Occurred())
        return NULL;
    char text[400];
    char *end = put_fixed6(text, value);
    return Py_BuildValue("(s#d)", text, (Py_ssize_t)(end - text), json_time(value));
}

static PyObject *gc_freezer(PyObject *self, PyObject *freeze);

static PyMethodDef methods[] = {
    {"_gc_freezer", gc_freezer, METH_O,
     "_gc_freezer(gc.freeze) -> the gc callback freezing the survivors of this thread's full "
     "passes (batsched_ml.gc_control)"},
    {"_fixed6", fixed6, METH_O, "_fixed6(value) -> (its %.6f text, the time the scheduler reads)"},
    {"simulate", (PyCFunction)(void (*)(void))simulate, METH_VARARGS | METH_KEYWORDS,
     "simulate(jobs, profiles, nb_machines, handler, types, begins, problems, progress=None): "
     "one static workload through Batsim's actors, handler(message) -> reply deciding; "
     "(jobs.csv rows, messages, events sent), or None when the workload is not one this "
     "simulator takes."},
    {NULL}
};

/* The garbage collector's callback that freezes the survivors of one thread's full passes
   (batsched_ml.gc_control.alive_frozen). It is C so that no Python code runs inside the
   collector: a signal's Python handler runs at the next bytecode that checks for it, and a
   KeyboardInterrupt (Ctrl-C, or SIGTERM turned into one) raised inside a gc callback is only
   printed as unraisable, so the run went on. Called with (phase, info) by the collector. */
typedef struct {
    PyObject_HEAD
    unsigned long owner; /* the thread whose full passes freeze */
    PyObject *freeze;    /* gc.freeze */
} Freezer;

static void
freezer_dealloc(PyObject *self)
{
    Py_XDECREF(((Freezer *)self)->freeze);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *
freezer_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    Freezer *f = (Freezer *)self;
    PyObject *phase, *info;
    if (!PyArg_ParseTuple(args, "UO!", &phase, &PyDict_Type, &info))
        return NULL;
    if (PyThread_get_thread_ident() != f->owner || PyUnicode_CompareWithASCIIString(phase, "stop") != 0)
        Py_RETURN_NONE;
    PyObject *generation = PyDict_GetItemString(info, "generation"); /* borrowed */
    if (generation == NULL || !PyLong_Check(generation) || PyLong_AsLong(generation) != 2)
        Py_RETURN_NONE;
    return PyObject_CallNoArgs(f->freeze);
}

static PyTypeObject FreezerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "batsched_ml.sim._csim.Freezer",
    .tp_basicsize = sizeof(Freezer),
    .tp_dealloc = freezer_dealloc,
    .tp_call = freezer_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "gc callback: the owner thread's full passes freeze their survivors",
};

/* _gc_freezer(freeze): the callback for the calling thread, calling freeze (gc.freeze) */
static PyObject *
gc_freezer(PyObject *self, PyObject *freeze)
{
    if (!PyCallable_Check(freeze)) {
        PyErr_SetString(PyExc_TypeError, "_gc_freezer takes gc.freeze");
        return NULL;
    }
    Freezer *f = PyObject_New(Freezer, &FreezerType);
    if (f == NULL)
        return NULL;
    f->owner = PyThread_get_thread_ident();
    Py_INCREF(freeze);
    f->freeze = freeze;
    return (PyObject *)f;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "batsched_ml.sim._csim",
    .m_doc = "The compiled simulator (see batsched_ml.sim.compiled_simulator).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__csim(void)
{
    clock_constants();
    struct {
        PyObject **key;
        const char *text;
    } keys[] = {
        {&KEY_ID, "id"},
        {&KEY_SUBTIME, "subtime"},
        {&KEY_RES, "res"},
        {&KEY_WALLTIME, "walltime"},
        {&KEY_PROFILE, "profile"},
        {&KEY_TYPE, "type"},
        {&KEY_DELAY, "delay"},
        {&S_NOW, "now"},
        {&S_EVENTS, "events"},
        {&S_TIMESTAMP, "timestamp"},
        {&S_JOB_ID, "job_id"},
        {&S_JOB_IDS, "job_ids"},
        {&S_ALLOC, "alloc"},
        {&S_EXTRA, "extra"},
        {&S_WHEN, "when"},
        {&S_METADATA, "metadata"},
        {&S_INTERVALS, "intervals"},
        {&S_TYPE_ATTR, "TYPE"},
        {&S_PROFILE_NAME, "profile_name"},
        {&S_PROGRESS, "progress"},
        {&S_SUCCESS, "COMPLETED_SUCCESSFULLY"},
        {&S_WALLTIME_REACHED, "COMPLETED_WALLTIME_REACHED"},
        {&S_KILLED, "COMPLETED_KILLED"},
        {&S_NO_MORE_STATIC, "no_more_static_job_to_submit"},
        {&W0, "w0"},
    };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (*keys[k].key == NULL && (*keys[k].key = PyUnicode_InternFromString(keys[k].text)) == NULL)
            return NULL;
    }
    if (PyType_Ready(&FreezerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

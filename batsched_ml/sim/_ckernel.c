/* The kernel of batsched_ml.sim.simgrid, compiled: the same scheduling rounds, clock and
 * actions, without the interpreter's cost per step.
 *
 * batsched_ml/sim/simgrid.py's Kernel is the reference: its design note says which SimGrid
 * 3.32 rule each piece mirrors, and this file follows it line for line, with the same double
 * arithmetic (every step is `now += step`, `m - step` for every sleep, `remains - rate *
 * step` for the transfer, the same comparisons with the same precisions). Built with
 * -ffp-contract=off so that no multiply-add is fused into an FMA (its single rounding would
 * differ from SimGrid's two); doubles on x86-64 and arm64 are IEEE binary64 with round to
 * nearest, as in Python. The tests run every recording and the property tests with both
 * kernels; BATSCHED_ML_KERNEL=python forces the Python one.
 *
 * The clock, the sleeps, the step and the mailboxes are _simgrid_clock.h's, which the compiled
 * simulator (_csim.c) runs too.
 *
 * Differences of representation only:
 * - every sleep is updated at every step (SimGrid's own rule; the Python kernel skips the
 *   durations above 2**14 s on a step below 2**-39 s, which leaves them unchanged anyway);
 * - a communication is a C struct, a mailbox a ring of them; the kernel object is its own
 *   run iterator (run() returns it; next() and send() resume it as the generator would).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "" /* setup.py passes this file's SHA-256: a stale build is not used */
#endif

#include "_simgrid_clock.h" /* the clock, the sleeps and the step: shared with _csim.c */

enum { K_SLEEP = 0, K_PUT = 1, K_GET = 2, K_CREATE = 3, K_KILL = 4, K_EXCHANGE = 5 };

/* --- actors --------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *gen;    /* NULL once dead */
    PyObject *answer; /* NULL means None */
    char dead;
    char sleeping;
} ActorObject;

static PyTypeObject ActorType;

static int
actor_traverse(ActorObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->name);
    Py_VISIT(self->gen);
    Py_VISIT(self->answer);
    return 0;
}

static int
actor_clear(ActorObject *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->gen);
    Py_CLEAR(self->answer);
    return 0;
}

static void
actor_dealloc(ActorObject *self)
{
    PyObject_GC_UnTrack(self);
    actor_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static ActorObject *
actor_new(PyObject *name, PyObject *gen)
{
    ActorObject *self = PyObject_GC_New(ActorObject, &ActorType);
    if (self == NULL)
        return NULL;
    Py_INCREF(name);
    self->name = name;
    Py_INCREF(gen);
    self->gen = gen;
    self->answer = NULL;
    self->dead = 0;
    self->sleeping = 0;
    PyObject_GC_Track(self);
    return self;
}

static PyMemberDef actor_members[] = {
    {"name", T_OBJECT, offsetof(ActorObject, name), READONLY, "the actor's name"},
    {"dead", T_BOOL, offsetof(ActorObject, dead), READONLY, "whether its code is over"},
    {NULL}
};

static PyTypeObject ActorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "batsched_ml.sim._ckernel.Actor",
    .tp_basicsize = sizeof(ActorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A SimGrid actor of the compiled kernel.",
    .tp_traverse = (traverseproc)actor_traverse,
    .tp_clear = (inquiry)actor_clear,
    .tp_dealloc = (destructor)actor_dealloc,
    .tp_members = actor_members,
};

/* Set an actor's answer (steals nothing; value NULL means None). */
static inline void
set_answer(ActorObject *actor, PyObject *value)
{
    PyObject *old = actor->answer;
    Py_XINCREF(value);
    actor->answer = value;
    Py_XDECREF(old);
}

/* --- communications and mailboxes ----------------------------------------------------- */

typedef struct {
    int is_send;
    int nwaiting;
    PyObject *payload; /* NULL until the send is known */
    ActorObject *waiting[2];
    double remains;
    long long key;
} Comm;

static Comm *
comm_new(int is_send, PyObject *payload)
{
    Comm *comm = PyMem_Malloc(sizeof(Comm));
    if (comm == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    comm->is_send = is_send;
    comm->nwaiting = 0;
    Py_XINCREF(payload);
    comm->payload = payload;
    comm->remains = 1.0; /* the ptask's cost is 1: it ends when 1 byte has crossed */
    comm->key = -1;
    return comm;
}

static void
comm_free(Comm *comm)
{
    for (int i = 0; i < comm->nwaiting; i++)
        Py_DECREF(comm->waiting[i]);
    Py_XDECREF(comm->payload);
    PyMem_Free(comm);
}

/* --- the kernel ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    double now;
    long long steps;
    long long keys;
    PyObject *to_run;   /* list of actors */
    PyObject *boxnames; /* dict: mailbox name -> index in boxes */
    Mailbox *boxes;
    Py_ssize_t nboxes;
    SleepList sleeps; /* of ActorObject*, each holding a reference */
    Comm *comm; /* the transfer under way */
    /* the run iterator's state: the sub-round's actors, the next to run, their calls */
    PyObject *ran;
    Py_ssize_t pos;
    ActorObject **call_actors;
    PyObject **calls;
    Py_ssize_t ncalls, capcalls;
    int exchanging; /* ran[pos] handed out a message and waits for the reply */
    int finished;
    int running; /* inside resume: an actor's code may not resume the run again */
    PyObject *weakrefs;
} KernelObject;

static PyObject *
kernel_error(void)
{
    PyObject *module = PyImport_ImportModule("batsched_ml.sim.simgrid");
    if (module == NULL)
        return NULL;
    PyObject *error = PyObject_GetAttrString(module, "KernelError");
    Py_DECREF(module);
    return error;
}

static void
raise_kernel_error(const char *message)
{
    PyObject *error = kernel_error();
    if (error == NULL)
        return;
    PyErr_SetString(error, message);
    Py_DECREF(error);
}

static int
kernel_traverse(KernelObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->to_run);
    Py_VISIT(self->boxnames);
    Py_VISIT(self->ran);
    for (Py_ssize_t b = 0; b < self->nboxes; b++) {
        Mailbox *box = &self->boxes[b];
        for (Py_ssize_t i = 0; i < box->len; i++) {
            Comm *comm = mailbox_at(box, i);
            Py_VISIT(comm->payload);
            for (int w = 0; w < comm->nwaiting; w++)
                Py_VISIT(comm->waiting[w]);
        }
    }
    if (self->comm != NULL) {
        Py_VISIT(self->comm->payload);
        for (int w = 0; w < self->comm->nwaiting; w++)
            Py_VISIT(self->comm->waiting[w]);
    }
    for (Py_ssize_t i = 0; i < self->sleeps.n; i++)
        Py_VISIT((PyObject *)self->sleeps.sleepers[i]);
    for (Py_ssize_t i = 0; i < self->ncalls; i++) {
        Py_VISIT(self->call_actors[i]);
        Py_VISIT(self->calls[i]);
    }
    return 0;
}

static void
clear_calls(KernelObject *self)
{
    Py_ssize_t n = self->ncalls;
    self->ncalls = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(self->call_actors[i]);
        Py_DECREF(self->calls[i]);
    }
}

static int
kernel_clear(KernelObject *self)
{
    Py_CLEAR(self->to_run);
    Py_CLEAR(self->boxnames);
    Py_CLEAR(self->ran);
    for (Py_ssize_t b = 0; b < self->nboxes; b++) {
        Mailbox *box = &self->boxes[b];
        while (box->len)
            comm_free(mailbox_pop(box));
    }
    if (self->comm != NULL) {
        Comm *comm = self->comm;
        self->comm = NULL;
        comm_free(comm);
    }
    Py_ssize_t n = self->sleeps.n;
    self->sleeps.n = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        Py_DECREF((PyObject *)self->sleeps.sleepers[i]);
    clear_calls(self);
    return 0;
}

static void
kernel_dealloc(KernelObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    kernel_clear(self);
    for (Py_ssize_t b = 0; b < self->nboxes; b++)
        PyMem_Free(self->boxes[b].items);
    PyMem_Free(self->boxes);
    sleep_free(&self->sleeps);
    PyMem_Free(self->call_actors);
    PyMem_Free(self->calls);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
kernel_init(KernelObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist))
        return -1;
    if (self->to_run != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a kernel is initialised once");
        return -1;
    }
    self->to_run = PyList_New(0);
    self->boxnames = PyDict_New();
    self->ran = PyList_New(0);
    if (self->to_run == NULL || self->boxnames == NULL || self->ran == NULL)
        return -1;
    return 0;
}

/* The mailbox of that name, created if need be; NULL with an exception on failure. */
static Mailbox *
get_box(KernelObject *self, PyObject *name)
{
    PyObject *index = PyDict_GetItemWithError(self->boxnames, name);
    if (index != NULL)
        return &self->boxes[PyLong_AsSsize_t(index)];
    if (PyErr_Occurred())
        return NULL;
    Mailbox *boxes = PyMem_Realloc(self->boxes, (self->nboxes + 1) * sizeof(Mailbox));
    if (boxes == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    self->boxes = boxes;
    index = PyLong_FromSsize_t(self->nboxes);
    if (index == NULL || PyDict_SetItem(self->boxnames, name, index) < 0) {
        Py_XDECREF(index);
        return NULL;
    }
    Py_DECREF(index);
    Mailbox *box = &self->boxes[self->nboxes++];
    box->items = NULL;
    box->head = box->len = box->cap = 0;
    return box;
}

static int
start_comm(KernelObject *self, Comm *comm)
{
    if (self->comm != NULL) {
        raise_kernel_error("two transfers at once: bandwidth sharing is not modelled");
        return -1;
    }
    comm->key = self->keys++;
    self->comm = comm;
    return 0;
}

static int
add_sleep(KernelObject *self, ActorObject *actor, double duration)
{
    if (sleep_add(&self->sleeps, actor, duration, self->keys) < 0)
        return -1;
    self->keys++;
    Py_INCREF(actor);
    actor->sleeping = 1;
    return 0;
}

static void
cancel_sleep(KernelObject *self, ActorObject *actor)
{
    for (Py_ssize_t i = 0; i < self->sleeps.n; i++) {
        if (self->sleeps.sleepers[i] == actor) {
            sleep_remove(&self->sleeps, i, 1);
            actor->sleeping = 0;
            Py_DECREF(actor);
            return;
        }
    }
}

/* Wake the actors waiting on an ended communication, then free it. */
static int
end_comm(KernelObject *self, Comm *comm)
{
    for (int i = 0; i < comm->nwaiting; i++) {
        set_answer(comm->waiting[i], comm->payload);
        if (PyList_Append(self->to_run, (PyObject *)comm->waiting[i]) < 0)
            return -1;
    }
    comm_free(comm);
    return 0;
}

/* An ended sleep: its actor runs in the next sub-round (the list's reference moves to to_run). */
static int
wake_sleeper(void *kernel, void *sleeper, int failed)
{
    KernelObject *self = kernel;
    ActorObject *actor = sleeper;
    actor->sleeping = 0;
    set_answer(actor, NULL);
    int error = !failed && PyList_Append(self->to_run, (PyObject *)actor) < 0;
    Py_DECREF(actor);
    return error ? -1 : 0;
}

static int
end_transfer(void *kernel, int failed)
{
    KernelObject *self = kernel;
    Comm *comm = self->comm;
    self->comm = NULL;
    (void)failed; /* its waiting actors are woken, or released with it */
    return end_comm(self, comm);
}

/* One step of the clock (_simgrid_clock.h): 1 if it moved, 0 if nothing can happen any more,
   -1 on error. */
static int
solve(KernelObject *self)
{
    Comm *comm = self->comm;
    int moved = clock_solve(&self->now, &self->sleeps, comm != NULL ? &comm->remains : NULL,
                            comm != NULL ? comm->key : 0, self, wake_sleeper, end_transfer);
    if (moved == 1)
        self->steps++;
    return moved;
}

static int
push_call(KernelObject *self, ActorObject *actor, PyObject *call)
{
    if (self->ncalls == self->capcalls) {
        Py_ssize_t cap = self->capcalls ? 2 * self->capcalls : 16;
        ActorObject **actors = PyMem_Realloc(self->call_actors, cap * sizeof(ActorObject *));
        if (actors == NULL)
            goto nomem;
        self->call_actors = actors;
        PyObject **calls = PyMem_Realloc(self->calls, cap * sizeof(PyObject *));
        if (calls == NULL)
            goto nomem;
        self->calls = calls;
        self->capcalls = cap;
    }
    Py_INCREF(actor);
    self->call_actors[self->ncalls] = actor;
    self->calls[self->ncalls] = call; /* steals */
    self->ncalls++;
    return 0;
nomem:
    Py_DECREF(call);
    PyErr_NoMemory();
    return -1;
}

static int
bad_call(ActorObject *actor, PyObject *call)
{
    PyObject *error = kernel_error();
    if (error != NULL) {
        PyErr_Format(error, "unknown simcall %R from %S", call, actor->name);
        Py_DECREF(error);
    }
    return -1;
}

/* Register a put or a get, and the actor on its communication. */
static int
handle_comm(KernelObject *self, ActorObject *actor, PyObject *call, int is_send)
{
    if (PyTuple_GET_SIZE(call) < (is_send ? 3 : 2))
        return bad_call(actor, call);
    Mailbox *box = get_box(self, PyTuple_GET_ITEM(call, 1));
    if (box == NULL)
        return -1;
    Comm *comm;
    if (box->len && ((Comm *)mailbox_at(box, 0))->is_send != is_send) {
        comm = mailbox_pop(box);
        if (is_send) {
            PyObject *payload = PyTuple_GET_ITEM(call, 2);
            Py_INCREF(payload);
            Py_XSETREF(comm->payload, payload);
        }
        if (start_comm(self, comm) < 0) {
            comm_free(comm);
            return -1;
        }
    }
    else {
        comm = comm_new(is_send, is_send ? PyTuple_GET_ITEM(call, 2) : NULL);
        if (comm == NULL)
            return -1;
        if (mailbox_push(box, comm) < 0) {
            comm_free(comm);
            return -1;
        }
    }
    Py_INCREF(actor);
    comm->waiting[comm->nwaiting++] = actor;
    return 0;
}

static void
mark_dead(ActorObject *actor)
{
    actor->dead = 1;
    Py_CLEAR(actor->gen);
    Py_CLEAR(actor->answer);
}

static int
handle_calls(KernelObject *self)
{
    for (Py_ssize_t i = 0; i < self->ncalls; i++) {
        ActorObject *actor = self->call_actors[i];
        PyObject *call = self->calls[i];
        if (!PyLong_Check(PyTuple_GET_ITEM(call, 0)))
            return bad_call(actor, call);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(call, 0));
        if (kind == -1 && PyErr_Occurred())
            return -1;
        switch (kind) {
        case K_PUT:
        case K_GET:
            if (handle_comm(self, actor, call, kind == K_PUT) < 0)
                return -1;
            break;
        case K_SLEEP: {
            /* s4u::this_actor::sleep_for: a no-op for durations <= 0 (the caller checks) */
            if (PyTuple_GET_SIZE(call) < 2)
                return bad_call(actor, call);
            double duration = PyFloat_AsDouble(PyTuple_GET_ITEM(call, 1));
            if (duration == -1.0 && PyErr_Occurred())
                return -1;
            if (add_sleep(self, actor, duration) < 0)
                return -1;
            break;
        }
        case K_CREATE: {
            if (PyTuple_GET_SIZE(call) < 3)
                return bad_call(actor, call);
            ActorObject *created =
                actor_new(PyTuple_GET_ITEM(call, 1), PyTuple_GET_ITEM(call, 2));
            if (created == NULL)
                return -1;
            /* ActorImpl::start: appended to the run list */
            int failed = PyList_Append(self->to_run, (PyObject *)created) < 0;
            set_answer(actor, (PyObject *)created);
            Py_DECREF(created);
            if (failed || PyList_Append(self->to_run, (PyObject *)actor) < 0)
                return -1;
            break;
        }
        case K_KILL: {
            if (PyTuple_GET_SIZE(call) < 2 || !PyObject_TypeCheck(PyTuple_GET_ITEM(call, 1), &ActorType))
                return bad_call(actor, call);
            ActorObject *victim = (ActorObject *)PyTuple_GET_ITEM(call, 1);
            if (!victim->dead) {
                Py_INCREF(victim);
                victim->dead = 1;
                if (victim->sleeping)
                    cancel_sleep(self, victim);
                PyObject *gen = victim->gen;
                victim->gen = NULL;
                Py_CLEAR(victim->answer);
                PyObject *closed = PyObject_CallMethod(gen, "close", NULL);
                Py_DECREF(gen);
                Py_DECREF(victim);
                if (closed == NULL)
                    return -1;
                Py_DECREF(closed);
            }
            set_answer(actor, NULL);
            if (PyList_Append(self->to_run, (PyObject *)actor) < 0)
                return -1;
            break;
        }
        default:
            return bad_call(actor, call);
        }
    }
    clear_calls(self);
    return 0;
}

/* Handle what an actor's code gave: 1 to go on, 0 when it handed out a message (stored in
   *out), -1 on error. */
static int
took(KernelObject *self, ActorObject *actor, PySendResult result, PyObject *call, PyObject **out)
{
    if (result == PYGEN_ERROR)
        return -1;
    if (result == PYGEN_RETURN) {
        Py_DECREF(call);
        mark_dead(actor);
        self->pos++;
        return 1;
    }
    if (!PyTuple_Check(call) || PyTuple_GET_SIZE(call) < 1) {
        bad_call(actor, call);
        Py_DECREF(call);
        return -1;
    }
    PyObject *first = PyTuple_GET_ITEM(call, 0);
    if (PyLong_CheckExact(first) && PyLong_AsLong(first) == K_EXCHANGE) {
        if (PyTuple_GET_SIZE(call) < 2) {
            bad_call(actor, call);
            Py_DECREF(call);
            return -1;
        }
        *out = PyTuple_GET_ITEM(call, 1);
        Py_INCREF(*out);
        Py_DECREF(call);
        self->exchanging = 1;
        return 0;
    }
    if (push_call(self, actor, call) < 0)
        return -1;
    self->pos++;
    return 1;
}

/* Run to the next message an actor hands out (returned), or to the end (NULL, no error).
   EngineImpl::run: the actors of a sub-round (``ran``) run one after the other, each until its
   next simcall; then their simcalls are handled in that order; the actors they answer run in
   the next sub-round; when none is ready, the clock steps. */
static PyObject *
resume(KernelObject *self, PyObject *reply)
{
    PyObject *out = NULL;
    PyObject *call;
    int r;
    if (self->finished)
        return NULL;
    if (self->exchanging) {
        ActorObject *actor = (ActorObject *)PyList_GET_ITEM(self->ran, self->pos);
        self->exchanging = 0;
        PySendResult result = PyIter_Send(actor->gen, reply, &call);
        r = took(self, actor, result, call, &out);
        if (r < 0)
            goto fail;
        if (r == 0)
            return out;
    }
    else if (reply != Py_None) {
        PyErr_SetString(PyExc_TypeError, "can't send non-None value to a just-started kernel run");
        return NULL;
    }
    for (;;) {
        if (self->pos >= PyList_GET_SIZE(self->ran)) {
            /* the sub-round's actors all ran: their simcalls, in order */
            if (self->ncalls && handle_calls(self) < 0)
                goto fail;
            if (PyList_GET_SIZE(self->to_run) == 0) {
                r = solve(self);
                if (r < 0)
                    goto fail;
                if (r == 0) {
                    self->finished = 1;
                    return NULL;
                }
            }
            /* the next sub-round: to_run becomes ran, the old ran (emptied) to_run */
            PyObject *old = self->ran;
            self->ran = self->to_run;
            self->to_run = old;
            self->pos = 0;
            if (PyList_SetSlice(old, 0, PY_SSIZE_T_MAX, NULL) < 0)
                goto fail;
            continue;
        }
        ActorObject *actor = (ActorObject *)PyList_GET_ITEM(self->ran, self->pos);
        if (actor->dead) { /* a killed actor whose communication ended: its code is over */
            self->pos++;
            continue;
        }
        PySendResult result =
            PyIter_Send(actor->gen, actor->answer != NULL ? actor->answer : Py_None, &call);
        r = took(self, actor, result, call, &out);
        if (r < 0)
            goto fail;
        if (r == 0)
            return out;
    }
fail:
    self->finished = 1;
    return NULL;
}

static PyObject *
guarded_resume(KernelObject *self, PyObject *reply)
{
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "kernel run already executing");
        return NULL;
    }
    self->running = 1;
    PyObject *out = resume(self, reply);
    self->running = 0;
    return out;
}

static PyObject *
kernel_iternext(KernelObject *self)
{
    return guarded_resume(self, Py_None);
}

static PyObject *
kernel_send(KernelObject *self, PyObject *reply)
{
    PyObject *out = guarded_resume(self, reply);
    if (out == NULL && !PyErr_Occurred())
        PyErr_SetNone(PyExc_StopIteration);
    return out;
}

static PyObject *
kernel_run(KernelObject *self, PyObject *Py_UNUSED(ignored))
{
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *
kernel_spawn(KernelObject *self, PyObject *args)
{
    PyObject *name, *gen;
    if (!PyArg_ParseTuple(args, "OO:spawn", &name, &gen))
        return NULL;
    ActorObject *actor = actor_new(name, gen);
    if (actor == NULL)
        return NULL;
    if (PyList_Append(self->to_run, (PyObject *)actor) < 0) {
        Py_DECREF(actor);
        return NULL;
    }
    return (PyObject *)actor;
}

static PyObject *
kernel_has_pending(KernelObject *self, PyObject *name)
{
    PyObject *index = PyDict_GetItemWithError(self->boxnames, name);
    if (index == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    return PyBool_FromLong(self->boxes[PyLong_AsSsize_t(index)].len > 0);
}

static PyMethodDef kernel_methods[] = {
    {"run", (PyCFunction)kernel_run, METH_NOARGS,
     "Run to the end: the kernel itself, an iterator that yields each message an actor hands "
     "out; send() resumes it with the reply."},
    {"send", (PyCFunction)kernel_send, METH_O, "Resume the run with the reply."},
    {"spawn", (PyCFunction)kernel_spawn, METH_VARARGS,
     "Create an actor ready to run (ActorImpl::start: appended to the run list)."},
    {"has_pending", (PyCFunction)kernel_has_pending, METH_O,
     "Whether the mailbox of that name holds requests not yet matched."},
    {NULL}
};

static PyMemberDef kernel_members[] = {
    {"now", T_DOUBLE, offsetof(KernelObject, now), 0, "SimGrid's clock"},
    {"steps", T_LONGLONG, offsetof(KernelObject, steps), READONLY,
     "how many times the clock moved"},
    {NULL}
};

static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "batsched_ml.sim._ckernel.Kernel",
    .tp_basicsize = sizeof(KernelObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "batsched_ml.sim.simgrid.Kernel, compiled (see that class).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)kernel_init,
    .tp_traverse = (traverseproc)kernel_traverse,
    .tp_clear = (inquiry)kernel_clear,
    .tp_dealloc = (destructor)kernel_dealloc,
    .tp_weaklistoffset = offsetof(KernelObject, weakrefs),
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)kernel_iternext,
    .tp_methods = kernel_methods,
    .tp_members = kernel_members,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "batsched_ml.sim._ckernel",
    .m_doc = "The compiled SimGrid kernel (see batsched_ml.sim.simgrid).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__ckernel(void)
{
    clock_constants();
    if (PyType_Ready(&ActorType) < 0 || PyType_Ready(&KernelType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&ActorType);
    if (PyModule_AddObject(m, "Actor", (PyObject *)&ActorType) < 0) {
        Py_DECREF(&ActorType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&KernelType);
    if (PyModule_AddObject(m, "Kernel", (PyObject *)&KernelType) < 0) {
        Py_DECREF(&KernelType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

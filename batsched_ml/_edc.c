/* Batsim 5's external decision component (EDC) library interface, in front of batsched-ml.
 *
 * Batsim 5 loads an EDC library (batsim -l LIBRARY INIT_STRING) with dlopen and calls three
 * functions: batsim_edc_init once, batsim_edc_take_decisions with each of its messages,
 * batsim_edc_deinit at the end. This library embeds CPython and hands each call to the Python
 * module batsched_ml.serving.edc, which runs the same scheduler and Batsim 5 codec as
 * `batsched-ml serve`: all the protocol is in Python; this file only moves bytes.
 *
 * Serialisation: batsim_edc_init sets the flags to BATSIM_EDC_FORMAT_JSON (the EDC chooses, in
 * Batsim 5); messages are NUL-terminated JSON texts both ways, and the sizes count the NUL.
 *
 * Which Python: the interpreter this file was built with (libpython, linked with its rpath).
 * Its packages are found through a virtual environment: the first folder above this library
 * that holds a pyvenv.cfg (an installed package), else the interpreter that built it
 * (BATSCHED_ML_PYTHON, an editable install); PYTHONHOME and PYTHONPATH are honoured as by
 * python itself. The folder above this library's package goes first on sys.path, so the
 * batsched_ml imported is the one this library belongs to. If the process already runs Python,
 * that interpreter is used as it is.
 *
 * Loaded with dlmopen (a link-map namespace of its own) CPython crashes: that load is refused.
 *
 * The GIL: taken for each call (PyGILState_Ensure), released between calls, so that Batsim may
 * call from any thread. Python's own signal handlers are not installed (Ctrl-C stays Batsim's).
 * deinit forgets the run but leaves the interpreter up until the process ends: extension
 * modules (numpy) cannot be initialised twice in one process.
 *
 * Built by setup.py as the extension batsched_ml._edc (optional, like the other compiled
 * parts); importing it from Python only gives SOURCE_SHA256, which `batsched-ml edc-library`
 * checks against this file before printing the library's path.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 ""
#endif
#ifndef BATSCHED_ML_PYTHON
#define BATSCHED_ML_PYTHON ""
#endif

#define BATSIM_EDC_FORMAT_BINARY 0x1
#define BATSIM_EDC_FORMAT_JSON 0x2

#define EXPORT __attribute__((visibility("default")))

static PyObject *edc_module = NULL; /* batsched_ml.serving.edc */
static uint8_t *reply = NULL;       /* the last reply, ours until the next call */
static uint32_t reply_size = 0;

static void fail(const char *what) {
    fprintf(stderr, "batsched-ml: error: %s\n", what);
    fflush(stderr);
}

/* The path of this library (dladdr on one of its own functions), in out[PATH_MAX]. */
static int own_path(char *out) {
    Dl_info info;
    if (dladdr((void *)&own_path, &info) == 0 || info.dli_fname == NULL) return -1;
    if (realpath(info.dli_fname, out) == NULL) return -1;
    return 0;
}

static void cut_last(char *path) {
    char *slash = strrchr(path, '/');
    if (slash == NULL) path[0] = '\0';
    else if (slash == path) path[1] = '\0';
    else *slash = '\0';
}

/* The Python executable whose packages to use: <venv>/bin/python3 of the first folder above
 * the library holding pyvenv.cfg, else the one that built it; "" for none. */
static void find_executable(const char *library, char *out) {
    char dir[PATH_MAX], probe[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", library);
    out[0] = '\0';
    while (1) {
        cut_last(dir);
        if (dir[0] == '\0') break;
        if (snprintf(probe, sizeof probe, "%s/pyvenv.cfg", dir) < (int)sizeof probe &&
            access(probe, R_OK) == 0 &&
            snprintf(probe, sizeof probe, "%s/bin/python3", strcmp(dir, "/") ? dir : "") <
                (int)sizeof probe &&
            access(probe, X_OK) == 0) {
            memcpy(out, probe, sizeof probe);
            return;
        }
        if (strcmp(dir, "/") == 0) break;
    }
    if (BATSCHED_ML_PYTHON[0] != '\0' && access(BATSCHED_ML_PYTHON, X_OK) == 0)
        snprintf(out, PATH_MAX, "%s", BATSCHED_ML_PYTHON);
}

/* Whether this library was loaded into Batsim's own namespace (dlopen), not a namespace of its
 * own (batsim --edc-library-load-method dlmopen): CPython and its extension modules crash
 * there (a second C library and thread-local storage of their own), so that load is refused. */
static int in_base_namespace(const char *library) {
    Lmid_t namespace_id = LM_ID_BASE;
    void *self = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
    if (self == NULL) return 0;
    int found = dlinfo(self, RTLD_DI_LMID, &namespace_id) == 0;
    dlclose(self);
    return found && namespace_id == LM_ID_BASE;
}

/* libpython's symbols made global: extension modules (numpy, ...) are not linked with
 * libpython and find its symbols in the global scope, which Batsim's RTLD_LOCAL load of this
 * library does not give them. */
static int promote_libpython(void) {
    Dl_info info;
    if (dladdr((void *)&Py_InitializeFromConfig, &info) == 0 || info.dli_fname == NULL) return -1;
    return dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) == NULL ? -1 : 0;
}

/* Start the interpreter (the GIL released at the end); 0 on success. */
static int start_python(const char *library) {
    char executable[PATH_MAX];
    PyConfig config;
    PyStatus status;

    if (promote_libpython() != 0) {
        fail("cannot make libpython's symbols global (dlopen RTLD_GLOBAL)");
        return -1;
    }
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.parse_argv = 0;
    find_executable(library, executable);
    if (executable[0] != '\0') {
        status = PyConfig_SetBytesString(&config, &config.executable, executable);
        if (PyStatus_Exception(status)) goto failed;
    }
    status = Py_InitializeFromConfig(&config);
    if (PyStatus_Exception(status)) goto failed;
    PyConfig_Clear(&config);
    PyEval_SaveThread();
    return 0;
failed:
    PyConfig_Clear(&config);
    fprintf(stderr, "batsched-ml: error: cannot start Python: %s\n",
            status.err_msg ? status.err_msg : "unknown reason");
    fflush(stderr);
    return -1;
}

/* Print the pending Python exception (a SystemExit too, without exiting). */
static void print_exception(const char *what) {
    if (PyErr_ExceptionMatches(PyExc_SystemExit)) {
        PyErr_Clear();
        fail(what);
        return;
    }
    fprintf(stderr, "batsched-ml: error: %s:\n", what);
    PyErr_Print();
    fflush(stderr);
}

/* Import batsched_ml.serving.edc, this library's package first on sys.path; GIL held. */
static int import_module(const char *library) {
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s", library);
    cut_last(root); /* .../batsched_ml */
    cut_last(root); /* the folder holding the package */
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    PyObject *entry = PyUnicode_DecodeFSDefault(root);
    if (path == NULL || entry == NULL || PyList_Insert(path, 0, entry) != 0) {
        Py_XDECREF(entry);
        print_exception("cannot set sys.path");
        return -1;
    }
    Py_DECREF(entry);
    edc_module = PyImport_ImportModule("batsched_ml.serving.edc");
    if (edc_module == NULL) {
        print_exception("cannot import batsched_ml.serving.edc");
        return -1;
    }
    return 0;
}

/* Keep a NUL-terminated copy of `result` (bytes) as the reply; 0 on success, 1 for None (the
 * Python side printed the error). Steals the reference; GIL held. */
static uint8_t keep_reply(PyObject *result, uint8_t **data, uint32_t *size) {
    char *bytes;
    Py_ssize_t length;
    if (result == NULL) {
        print_exception("batsched_ml.serving.edc failed");
        return 1;
    }
    if (result == Py_None) {
        Py_DECREF(result);
        return 1;
    }
    if (PyBytes_AsStringAndSize(result, &bytes, &length) != 0 || length >= UINT32_MAX) {
        Py_DECREF(result);
        print_exception("batsched_ml.serving.edc returned no bytes");
        return 1;
    }
    uint8_t *copy = realloc(reply, (size_t)length + 1);
    if (copy == NULL) {
        Py_DECREF(result);
        fail("out of memory");
        return 1;
    }
    memcpy(copy, bytes, (size_t)length);
    copy[length] = '\0';
    reply = copy;
    reply_size = (uint32_t)length + 1;
    Py_DECREF(result);
    *data = reply;
    *size = reply_size;
    return 0;
}

EXPORT uint8_t batsim_edc_init(const uint8_t *init_data, uint32_t init_size, uint32_t *flags,
                               uint8_t **reply_data, uint32_t *reply_data_size) {
    char library[PATH_MAX];
    if (own_path(library) != 0) {
        fail("cannot find the path of the batsched-ml library (dladdr)");
        return 1;
    }
    if (!in_base_namespace(library)) {
        fail("the batsched-ml library runs Python and must be loaded into Batsim's own namespace: "
             "use batsim's default --edc-library-load-method dlopen, not dlmopen");
        return 1;
    }
    if (!Py_IsInitialized() && start_python(library) != 0) return 1;
    PyGILState_STATE gil = PyGILState_Ensure();
    uint8_t code = 1;
    if (edc_module == NULL && import_module(library) != 0) goto done;
    /* y# of a NULL pointer would be None: an absent init string is an empty one */
    const char *text = init_data == NULL ? "" : (const char *)init_data;
    PyObject *result = PyObject_CallMethod(edc_module, "init", "y#", text,
                                           (Py_ssize_t)(init_data == NULL ? 0 : init_size));
    code = keep_reply(result, reply_data, reply_data_size);
    if (code == 0) *flags = BATSIM_EDC_FORMAT_JSON;
done:
    PyGILState_Release(gil);
    return code;
}

EXPORT uint8_t batsim_edc_take_decisions(const uint8_t *what_happened, uint32_t what_happened_size,
                                         uint8_t **decisions, uint32_t *decisions_size) {
    if (edc_module == NULL) {
        fail("batsim_edc_take_decisions called before batsim_edc_init succeeded");
        return 1;
    }
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *result = PyObject_CallMethod(edc_module, "take_decisions", "y#",
                                           (const char *)what_happened,
                                           (Py_ssize_t)what_happened_size);
    uint8_t code = keep_reply(result, decisions, decisions_size);
    PyGILState_Release(gil);
    return code;
}

EXPORT uint8_t batsim_edc_deinit(void) {
    uint8_t code = 0;
    if (edc_module != NULL) {
        PyGILState_STATE gil = PyGILState_Ensure();
        PyObject *result = PyObject_CallMethod(edc_module, "deinit", NULL);
        if (result == NULL) {
            print_exception("batsched_ml.serving.edc.deinit failed");
            code = 1;
        } else {
            code = result == Py_True ? 0 : 1;
            Py_DECREF(result);
        }
        PyGILState_Release(gil);
    }
    free(reply);
    reply = NULL;
    reply_size = 0;
    return code;
}

/* Imported as a Python module (batsched_ml._edc): the source digest, nothing else. */
static struct PyModuleDef edc_definition = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_edc",
    .m_doc = "Batsim 5's EDC library of batsched-ml (load it with batsim -l; see batsched_ml.serving.edc).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__edc(void) {
    PyObject *module = PyModule_Create(&edc_definition);
    if (module == NULL) return NULL;
    if (PyModule_AddStringConstant(module, "SOURCE_SHA256", SOURCE_SHA256) != 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

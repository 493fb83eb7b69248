/* The numbers of an SWF trace's job lines, parsed in one pass: the compiled part of
 * batsched_ml.workload.swf._parse_numbers, whose reference is pandas' C parser (read_csv).
 *
 * parse(data, fields) takes the job lines joined by "\n" (stripped, no comment or empty line)
 * and returns the float64 values, line by line, as bytes (numpy.frombuffer reads them), or
 * None when a line has another number of fields than `fields` or a field is not a plain
 * decimal number this parser is sure to read as the reference does: then the reference
 * parses the lines (and finds the culprit), so what this accepts it reads exactly as pandas
 * does, and what it refuses costs only the reference's time.
 *
 * Sure means: an optional sign, digits with an optional fraction, an optional exponent (at
 * most three digits), at most 15 significant digits in all, and a power of ten of at most 22
 * in magnitude. Then the value is its digits, an integer below 2**53 (exact as a double),
 * multiplied or divided by an exact power of ten: one correctly rounded operation, which is
 * what Clinger's fast path, strtod and pandas' precise parser all compute. Fields are
 * separated by spaces and tabs (pandas' whitespace separator); any other byte makes the
 * field not a number. No locale is involved (strtod's decimal point would be). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "" /* setup.py passes this file's SHA-256: a stale build is not used */
#endif

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The field [s, end) as a double into *out: 1, or 0 if it is not a number this parser reads
   (see above). */
static int
number(const char *s, const char *end, double *out)
{
    int negative = 0;
    if (s < end && (*s == '+' || *s == '-')) {
        negative = *s == '-';
        s++;
    }
    uint64_t digits = 0;
    int significant = 0, scale = 0, any = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (digits || *s != '0') {
            if (++significant > 15)
                return 0;
        }
        digits = digits * 10 + (uint64_t)(*s - '0');
        any = 1;
        s++;
    }
    if (s < end && *s == '.') {
        s++;
        while (s < end && *s >= '0' && *s <= '9') {
            if (digits || *s != '0') {
                if (++significant > 15)
                    return 0;
            }
            digits = digits * 10 + (uint64_t)(*s - '0');
            scale--;
            any = 1;
            s++;
        }
    }
    if (!any)
        return 0;
    if (s < end && (*s == 'e' || *s == 'E')) {
        s++;
        int exponent_negative = 0, exponent = 0, exponent_digits = 0;
        if (s < end && (*s == '+' || *s == '-')) {
            exponent_negative = *s == '-';
            s++;
        }
        while (s < end && *s >= '0' && *s <= '9') {
            if (++exponent_digits > 3)
                return 0;
            exponent = exponent * 10 + (*s - '0');
            s++;
        }
        if (!exponent_digits)
            return 0;
        scale += exponent_negative ? -exponent : exponent;
    }
    if (s != end || scale > 22 || scale < -22)
        return 0;
    double value = (double)digits; /* below 10**15: exact */
    value = scale >= 0 ? value * POW10[scale] : value / POW10[-scale];
    *out = negative ? -value : value;
    return 1;
}

static PyObject *
parse(PyObject *self, PyObject *args)
{
    const char *data;
    Py_ssize_t size, fields;
    if (!PyArg_ParseTuple(args, "y#n", &data, &size, &fields))
        return NULL;
    if (fields <= 0) {
        PyErr_SetString(PyExc_ValueError, "fields must be positive");
        return NULL;
    }
    Py_ssize_t lines = 1;
    for (Py_ssize_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    if (size == 0)
        Py_RETURN_NONE;
    if (lines > PY_SSIZE_T_MAX / fields / (Py_ssize_t)sizeof(double))
        return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, lines * fields * (Py_ssize_t)sizeof(double));
    if (out == NULL)
        return NULL;
    double *values = (double *)PyBytes_AS_STRING(out);
    const char *at = data, *end = data + size;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t line = 0; ok && line < lines; line++) {
        const char *stop = memchr(at, '\n', (size_t)(end - at));
        if (stop == NULL)
            stop = end;
        Py_ssize_t field = 0;
        while (ok) {
            while (at < stop && (*at == ' ' || *at == '\t'))
                at++;
            if (at == stop)
                break;
            const char *start = at;
            while (at < stop && *at != ' ' && *at != '\t')
                at++;
            if (field == fields || !number(start, at, &values[line * fields + field]))
                ok = 0;
            field++;
        }
        if (field != fields)
            ok = 0;
        at = stop + 1;
    }
    Py_END_ALLOW_THREADS
    if (!ok) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"parse", parse, METH_VARARGS,
     "parse(data, fields): the float64 values of the lines as bytes, or None (see the module)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cswf", "SWF job lines' numbers, parsed in one pass.", -1, methods,
};

PyMODINIT_FUNC
PyInit__cswf(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

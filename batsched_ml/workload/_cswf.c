/* The numbers of an SWF trace's job lines, parsed in one pass: the compiled part of
 * batsched_ml.workload.swf._parse_numbers, whose reference is numpy's parser (loadtxt).
 *
 * parse(data, fields) takes the job lines joined by "\n" (stripped, no comment or empty line)
 * and returns the float64 values, line by line, as bytes (numpy.frombuffer reads them), or
 * None when a line has another number of fields than `fields` or a field is not a plain
 * decimal number this parser is sure to read as the reference does: then the reference
 * parses the lines (and finds the culprit), so what this accepts it reads exactly as numpy
 * does, and what it refuses costs only the reference's time.
 *
 * read(text, fields) takes a whole file's bytes (decompressed) and does what the reader does
 * with its lines before the numbers (batsched_ml.workload.swf.read_swf: split into lines,
 * each stripped, empty ones skipped, those that begin with ';' kept as the header's) and the
 * numbers of the others, in one pass: it returns (values, line numbers, comment lines), the
 * values as parse's, the 1-based line number of each job line as int64 bytes, the comment
 * lines as str, or None when it is not sure to split the lines as Python's str.splitlines and
 * str.strip do, or to read a job line as parse does. It is sure of a file of printable ASCII
 * bytes, spaces, tabs and line ends ("\n", "\r\n" or "\r"): any other byte (a control
 * character, which Python may take for a line end or strip, a byte beyond ASCII, which the
 * reader decodes) leaves the whole file to the reader's own steps.
 *
 * Sure means: an optional sign, digits with an optional fraction, an optional exponent (at
 * most three digits), at most 15 significant digits in all, and a power of ten of at most 22
 * in magnitude. Then the value is its digits, an integer below 2**53 (exact as a double),
 * multiplied or divided by an exact power of ten: one correctly rounded operation, which is
 * what Clinger's fast path, strtod and pandas' precise parser all compute. Fields are
 * separated by spaces and tabs (as numpy's and pandas' parsers separate them); any other
 * byte makes the field not a number. No locale is involved (strtod's decimal point would be).
 *
 * csv_fields(rows, texts, numbers) reads a table of comma-separated rows as the figures of a
 * replay read its job table (batsched_ml.results.metrics.figure_columns, its reference, which
 * splits each row on its commas): rows is a list of str, texts and numbers the places of the
 * fields wanted as text and as numbers (at most 16 each, below 64). It returns (the text
 * fields, a list of str per place; the numbers, float64 bytes place after place, NaN for an
 * empty field), or None when a row has too few fields or a number field is not one this
 * parser is sure of (see above): then the reference reads the whole table. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
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

/* The fields of the job line [at, stop) into values[0..fields): 1, or 0 if it has another
   number of fields or a field parse would refuse. */
static int
job_line(const char *at, const char *stop, Py_ssize_t fields, double *values)
{
    Py_ssize_t field = 0;
    for (;;) {
        while (at < stop && (*at == ' ' || *at == '\t'))
            at++;
        if (at == stop)
            break;
        const char *start = at;
        while (at < stop && *at != ' ' && *at != '\t')
            at++;
        if (field == fields || !number(start, at, &values[field]))
            return 0;
        field++;
    }
    return field == fields;
}

/* The arguments (data, fields) of parse and read: 0, with an exception set, if they are not
   bytes and a positive count. */
static int
arguments(PyObject *args, const char **data, Py_ssize_t *size, Py_ssize_t *fields)
{
    if (!PyArg_ParseTuple(args, "y#n", data, size, fields))
        return 0;
    if (*fields <= 0) {
        PyErr_SetString(PyExc_ValueError, "fields must be positive");
        return 0;
    }
    return 1;
}

static PyObject *
parse(PyObject *self, PyObject *args)
{
    const char *data;
    Py_ssize_t size, fields;
    if (!arguments(args, &data, &size, &fields))
        return NULL;
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
        ok = job_line(at, stop, fields, &values[line * fields]);
        at = stop + 1;
    }
    Py_END_ALLOW_THREADS
    if (!ok) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyObject *
read_file(PyObject *self, PyObject *args)
{
    const char *data;
    Py_ssize_t size, fields;
    if (!arguments(args, &data, &size, &fields))
        return NULL;
    Py_ssize_t lines = 1; /* at most: one more than the line ends */
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c == '\n' || c == '\r')
            lines++;
        else if ((c < 0x20 && c != '\t') || c > 0x7e)
            Py_RETURN_NONE; /* not sure: the reader's own steps */
    }
    if (lines > PY_SSIZE_T_MAX / fields / (Py_ssize_t)sizeof(double))
        return PyErr_NoMemory();
    PyObject *values = PyBytes_FromStringAndSize(NULL, lines * fields * (Py_ssize_t)sizeof(double));
    PyObject *numbers = PyBytes_FromStringAndSize(NULL, lines * (Py_ssize_t)sizeof(int64_t));
    PyObject *comments = PyList_New(0);
    if (values == NULL || numbers == NULL || comments == NULL)
        goto fail;
    double *value = (double *)PyBytes_AS_STRING(values);
    int64_t *number_of = (int64_t *)PyBytes_AS_STRING(numbers);
    Py_ssize_t jobs = 0;
    int64_t line = 0;
    const char *at = data, *end = data + size;
    while (at < end || line == 0) {
        const char *stop = at;
        while (stop < end && *stop != '\n' && *stop != '\r')
            stop++;
        line++;
        const char *first = at, *last = stop; /* the line, stripped */
        while (first < last && (*first == ' ' || *first == '\t'))
            first++;
        while (last > first && (last[-1] == ' ' || last[-1] == '\t'))
            last--;
        if (first < last && *first == ';') {
            PyObject *text = PyUnicode_DecodeASCII(first, last - first, NULL);
            if (text == NULL || PyList_Append(comments, text) < 0) {
                Py_XDECREF(text);
                goto fail;
            }
            Py_DECREF(text);
        }
        else if (first < last) {
            if (!job_line(first, last, fields, value + jobs * fields)) {
                Py_DECREF(values);
                Py_DECREF(numbers);
                Py_DECREF(comments);
                Py_RETURN_NONE; /* the reader finds what is wrong, or reads it */
            }
            number_of[jobs++] = line;
        }
        if (stop == end)
            break;
        at = stop + (*stop == '\r' && stop + 1 < end && stop[1] == '\n' ? 2 : 1);
    }
    /* a last line end starts no line (as str.splitlines) */
    if (_PyBytes_Resize(&values, jobs * fields * (Py_ssize_t)sizeof(double)) < 0)
        goto fail; /* values freed and NULL */
    if (_PyBytes_Resize(&numbers, jobs * (Py_ssize_t)sizeof(int64_t)) < 0)
        goto fail; /* numbers freed and NULL */
    return Py_BuildValue("NNN", values, numbers, comments);
fail:
    Py_XDECREF(values);
    Py_XDECREF(numbers);
    Py_XDECREF(comments);
    return NULL;
}

#define MAX_PLACES 16
#define MAX_PLACE 64

/* The places of a tuple of ints into places[]: their count, or -1 with an exception set. */
static Py_ssize_t
places_of(PyObject *tuple, Py_ssize_t *places, Py_ssize_t *last)
{
    Py_ssize_t count = PyTuple_GET_SIZE(tuple);
    if (count > MAX_PLACES) {
        PyErr_SetString(PyExc_ValueError, "too many places");
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t place = PyLong_AsSsize_t(PyTuple_GET_ITEM(tuple, i));
        if (place == -1 && PyErr_Occurred())
            return -1;
        if (place < 0 || place >= MAX_PLACE) {
            PyErr_SetString(PyExc_ValueError, "a place out of range");
            return -1;
        }
        places[i] = place;
        if (place > *last)
            *last = place;
    }
    return count;
}

static PyObject *
csv_fields(PyObject *self, PyObject *args)
{
    PyObject *rows, *text_places, *number_places;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &rows, &PyTuple_Type, &text_places,
                          &PyTuple_Type, &number_places))
        return NULL;
    Py_ssize_t texts[MAX_PLACES], numbers[MAX_PLACES], last = -1;
    Py_ssize_t n_texts = places_of(text_places, texts, &last);
    if (n_texts < 0)
        return NULL;
    Py_ssize_t n_numbers = places_of(number_places, numbers, &last);
    if (n_numbers < 0)
        return NULL;
    int slot_of[MAX_PLACE]; /* a place's text slot (>= 0), number slot (< -1), or -1 */
    for (Py_ssize_t i = 0; i < MAX_PLACE; i++)
        slot_of[i] = -1;
    for (Py_ssize_t i = 0; i < n_texts; i++)
        slot_of[texts[i]] = (int)i;
    for (Py_ssize_t i = 0; i < n_numbers; i++)
        slot_of[numbers[i]] = -2 - (int)i;
    Py_ssize_t n = PyList_GET_SIZE(rows);
    if (n_numbers && n > PY_SSIZE_T_MAX / n_numbers / (Py_ssize_t)sizeof(double))
        return PyErr_NoMemory();
    PyObject *lists = PyTuple_New(n_texts);
    PyObject *values = PyBytes_FromStringAndSize(NULL, n * n_numbers * (Py_ssize_t)sizeof(double));
    if (lists == NULL || values == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n_texts; i++) {
        PyObject *list = PyList_New(n);
        if (list == NULL)
            goto fail;
        PyTuple_SET_ITEM(lists, i, list);
    }
    double *value = (double *)PyBytes_AS_STRING(values);
    for (Py_ssize_t row = 0; row < n; row++) {
        PyObject *text = PyList_GET_ITEM(rows, row);
        if (!PyUnicode_Check(text))
            goto not_sure;
        Py_ssize_t size;
        const char *at = PyUnicode_AsUTF8AndSize(text, &size);
        if (at == NULL) {
            PyErr_Clear(); /* (a lone surrogate): the reference's */
            goto not_sure;
        }
        const char *end = at + size;
        for (Py_ssize_t place = 0; place <= last; place++) {
            const char *stop = memchr(at, ',', (size_t)(end - at));
            if (stop == NULL) {
                if (place < last)
                    goto not_sure; /* too few fields */
                stop = end;
            }
            int slot = slot_of[place];
            if (slot >= 0) {
                PyObject *field = PyUnicode_DecodeUTF8(at, stop - at, NULL);
                if (field == NULL)
                    goto fail;
                PyList_SET_ITEM(PyTuple_GET_ITEM(lists, slot), row, field);
            }
            else if (slot < -1) {
                double *out = &value[(Py_ssize_t)(-2 - slot) * n + row];
                if (stop == at)
                    *out = NAN;
                else if (!number(at, stop, out))
                    goto not_sure;
            }
            at = stop + 1;
        }
    }
    return Py_BuildValue("NN", lists, values);
not_sure:
    Py_DECREF(lists); /* (its lists' unset items are NULL: freed as such) */
    Py_DECREF(values);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(lists);
    Py_XDECREF(values);
    return NULL;
}

static PyMethodDef methods[] = {
    {"parse", parse, METH_VARARGS,
     "parse(data, fields): the float64 values of the lines as bytes, or None (see the module)"},
    {"read", read_file, METH_VARARGS,
     "read(text, fields): (values, line numbers, comment lines) of a file, or None (see the "
     "module)"},
    {"csv_fields", csv_fields, METH_VARARGS,
     "csv_fields(rows, texts, numbers): (text lists, float64 bytes) of a table's rows, or None "
     "(see the module)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cswf", "SWF job lines' numbers, and a table's fields, parsed in one pass.", -1, methods,
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

/* The report line's hot path in C: one epoll wait, the reads of lone packed reports, and their replies' sends.
 *
 * `ReportLineServer` (report_line_server.py) keeps every decision in Python: which connections are past their hello
 * and report packed, what a frame that is not a lone report means, the book's counting, errors, buffering. This
 * module only does, for the connections Python marks, what its loop did per report in the interpreter: wait,
 * receive, unpack `PACKED_REPORT` into the tuple `unpack_report` makes, and later pack and send
 * `PACKED_REPLY`. Anything else it hands back to Python untouched (or with the bytes it already read).
 *
 * Linux only (epoll); built where a compiler is (setup.py, optional), else the line runs its Python loop.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define MAX_EVENTS 1024
#define CHUNK_BYTES 65536
#define LENGTH_BYTES 4
#define REPORT_BYTES 33 /* b"R", then four big-endian int64: shard id, records, lease, first record */
#define REPLY_BYTES 10  /* b"A", a bool (whether a seal holds the report), a big-endian int64 (the lease floor) */

static uint32_t read_u32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static int64_t read_i64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}

static void write_u32(unsigned char *p, uint32_t v) {
    for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}

static void write_i64(unsigned char *p, int64_t value) {
    uint64_t v = (uint64_t)value;
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}

/* The report tuple a chunk holds if it is exactly one packed report frame: (worker, data set, shard id,
 * records, lease, first record). NULL without an exception set when it is anything else (Python reads it). */
static PyObject *lone_report(const unsigned char *chunk, Py_ssize_t size, PyObject *worker) {
    if (size < LENGTH_BYTES + REPORT_BYTES || chunk[LENGTH_BYTES] != 'R'
            || (Py_ssize_t)read_u32(chunk) != size - LENGTH_BYTES)
        return NULL;
    const unsigned char *body = chunk + LENGTH_BYTES;
    PyObject *dataset = PyUnicode_DecodeUTF8((const char *)body + REPORT_BYTES,
                                             size - LENGTH_BYTES - REPORT_BYTES, "strict");
    if (dataset == NULL) { /* not UTF-8: Python's path says so to the worker */
        PyErr_Clear();
        return NULL;
    }
    PyObject *report = Py_BuildValue("(ONLLLL)", worker, dataset, (long long)read_i64(body + 1),
                                     (long long)read_i64(body + 9), (long long)read_i64(body + 17),
                                     (long long)read_i64(body + 25));
    if (report == NULL) PyErr_Clear();
    return report;
}

/* Appends (fd, epoll events, chunk) to `others`; chunk may be NULL (None: Python receives itself). */
static int hand_back(PyObject *others, int fd, uint32_t events, const unsigned char *chunk, Py_ssize_t size) {
    PyObject *item = chunk == NULL ? Py_BuildValue("(iIO)", fd, events, Py_None)
                                   : Py_BuildValue("(iIy#)", fd, events, (const char *)chunk, size);
    if (item == NULL) return -1;
    int failed = PyList_Append(others, item);
    Py_DECREF(item);
    return failed;
}

PyDoc_STRVAR(poll_doc,
"poll(epoll_fd, timeout_ms, workers) -> (reports, report_fds, others)\n\n"
"Waits on the epoll instance `epoll_fd` (at most `timeout_ms`; -1 waits until an event) and reads each ready\n"
"connection whose `workers[fd]` is a str: a chunk that is exactly one packed report frame becomes a report\n"
"tuple (in `reports`, its fd at the same index of `report_fds`). Every other event is in `others` as\n"
"(fd, epoll events, chunk): the bytes read from a marked connection (b\"\" where it closed), or None where\n"
"nothing was read.");

static PyObject *line_poll(PyObject *Py_UNUSED(self), PyObject *args) {
    int epoll_fd, timeout_ms;
    PyObject *workers;
    if (!PyArg_ParseTuple(args, "iiO!:poll", &epoll_fd, &timeout_ms, &PyList_Type, &workers)) return NULL;

    struct epoll_event events[MAX_EVENTS];
    int ready;
    Py_BEGIN_ALLOW_THREADS
    ready = epoll_wait(epoll_fd, events, MAX_EVENTS, timeout_ms);
    Py_END_ALLOW_THREADS
    if (ready < 0) {
        if (errno != EINTR) return PyErr_SetFromErrno(PyExc_OSError);
        ready = 0;
    }

    PyObject *reports = PyList_New(0), *report_fds = PyList_New(0), *others = PyList_New(0);
    if (reports == NULL || report_fds == NULL || others == NULL) goto failed;
    static unsigned char chunk[CHUNK_BYTES]; /* one thread serves the line; the GIL is held while it is used */
    for (int i = 0; i < ready; i++) {
        int fd = events[i].data.fd;
        uint32_t mask = events[i].events;
        PyObject *worker = fd < PyList_GET_SIZE(workers) ? PyList_GET_ITEM(workers, fd) : Py_None;
        if (mask != EPOLLIN || !PyUnicode_Check(worker)) {
            if (hand_back(others, fd, mask, NULL, 0) < 0) goto failed;
            continue;
        }
        ssize_t size = recv(fd, chunk, CHUNK_BYTES, MSG_DONTWAIT);
        if (size < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue; /* nothing after all */
            if (hand_back(others, fd, mask, NULL, 0) < 0) goto failed;  /* Python's receive meets the error */
            continue;
        }
        PyObject *report = lone_report(chunk, size, worker);
        if (report == NULL) {
            if (hand_back(others, fd, mask, chunk, size) < 0) goto failed;
            continue;
        }
        int failed = PyList_Append(reports, report);
        Py_DECREF(report);
        PyObject *number = PyLong_FromLong(fd);
        if (failed || number == NULL || PyList_Append(report_fds, number) < 0) {
            Py_XDECREF(number);
            goto failed;
        }
        Py_DECREF(number);
    }
    return Py_BuildValue("(NNN)", reports, report_fds, others);

failed:
    Py_XDECREF(reports);
    Py_XDECREF(report_fds);
    Py_XDECREF(others);
    return NULL;
}

PyDoc_STRVAR(answer_doc,
"answer(fds, replies) -> unsent\n\n"
"Sends each reply that is a (sealing, lease floor) tuple, framed as `PACKED_REPLY`, on the connection\n"
"`fds[i]`. Returns the replies not sent whole, as (i, bytes sent): 0 where the socket took nothing or the\n"
"reply is not such a tuple, minus the errno where the send failed.");

static PyObject *line_answer(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *fds, *replies;
    if (!PyArg_ParseTuple(args, "O!O!:answer", &PyList_Type, &fds, &PyList_Type, &replies)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(replies);
    if (PyList_GET_SIZE(fds) != count) {
        PyErr_Format(PyExc_ValueError, "answer takes as many fds as replies; got %zd fds and %zd replies",
                     PyList_GET_SIZE(fds), count);
        return NULL;
    }
    PyObject *unsent = PyList_New(0);
    if (unsent == NULL) return NULL;
    unsigned char data[LENGTH_BYTES + REPLY_BYTES];
    write_u32(data, REPLY_BYTES);
    data[LENGTH_BYTES] = 'A';
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *reply = PyList_GET_ITEM(replies, i);
        long long sent = 0;
        int fd = (int)PyLong_AsLong(PyList_GET_ITEM(fds, i));
        if (fd == -1 && PyErr_Occurred()) goto failed;
        if (PyTuple_CheckExact(reply) && PyTuple_GET_SIZE(reply) == 2) {
            int sealing = PyObject_IsTrue(PyTuple_GET_ITEM(reply, 0));
            long long floor = PyLong_AsLongLong(PyTuple_GET_ITEM(reply, 1));
            if (sealing < 0 || (floor == -1 && PyErr_Occurred())) goto failed;
            data[LENGTH_BYTES + 1] = (unsigned char)sealing;
            write_i64(data + LENGTH_BYTES + 2, floor);
            ssize_t result = send(fd, data, sizeof data, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (result == (ssize_t)sizeof data) continue;
            sent = result >= 0 ? result : (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno);
        }
        PyObject *item = Py_BuildValue("(nL)", i, sent);
        if (item == NULL || PyList_Append(unsent, item) < 0) {
            Py_XDECREF(item);
            goto failed;
        }
        Py_DECREF(item);
    }
    return unsent;

failed:
    Py_DECREF(unsent);
    return NULL;
}

static PyMethodDef methods[] = {
    {"poll", line_poll, METH_VARARGS, poll_doc},
    {"answer", line_answer, METH_VARARGS, answer_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_line_native",
    "The report line's epoll wait, packed-report reads and reply sends in C (see report_line_server.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__line_native(void) {
    return PyModule_Create(&module);
}

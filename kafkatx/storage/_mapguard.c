/*
 * kafkatx.storage._mapguard: a SIGBUS guard for kafkatx's own file mappings.
 *
 * A segment mapped read-only (kafkatx.storage.segment.map_file) kills the process with SIGBUS when
 * another process truncates the file under the mapping and a page past the new end is touched.
 * Python cannot catch that signal. This module keeps a fixed-size registry of the address ranges
 * kafkatx mapped and installs a SIGBUS handler (sigaction, SA_SIGINFO):
 *
 *   - a fault inside a registered range: an anonymous zero page is mapped MAP_FIXED over the
 *     faulting page, the range's "cut" flag is set, and the handler returns, so the faulting read
 *     is restarted and reads zeros. Python checks the flag (was_cut/unregister) after the read and
 *     reports "changed size while being read" (kafkatx.storage.segment.map_file), never the zeros;
 *   - any other SIGBUS (not ours, or not from the kernel): chained to the handler that was there
 *     before (faulthandler's under pytest) or, for SIG_DFL/SIG_IGN, to the default action.
 *
 * Only async-signal-safe calls in the handler (mmap, sigaction, raise); the registry is written
 * under the GIL and read by the handler with atomic loads. The registry has GUARD_SLOTS slots; when
 * it is full register() returns -1 and the caller reads with pread instead of mapping.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD_SLOTS 1024

typedef struct {
    uintptr_t start;  /* 0: free slot */
    size_t len;       /* 0 while (un)registering: the handler skips the slot */
    int cut;          /* set by the handler: a page of the range was replaced by zeros */
} guard_slot;

static guard_slot slots[GUARD_SLOTS];
static struct sigaction previous;
static int installed = 0;
static uintptr_t page_size = 4096;

static void
on_sigbus(int sig, siginfo_t *info, void *ucontext)
{
    int saved_errno = errno;
    if (info != NULL && info->si_code > 0) {  /* sent by the kernel for a fault, not by kill() */
        uintptr_t addr = (uintptr_t)info->si_addr;
        for (int i = 0; i < GUARD_SLOTS; i++) {
            size_t len = __atomic_load_n(&slots[i].len, __ATOMIC_ACQUIRE);
            uintptr_t start = __atomic_load_n(&slots[i].start, __ATOMIC_ACQUIRE);
            if (len == 0 || addr < start || addr - start >= len) {
                continue;
            }
            void *page = (void *)(addr & ~(page_size - 1));
            if (mmap(page, (size_t)page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                    != MAP_FAILED) {
                __atomic_store_n(&slots[i].cut, 1, __ATOMIC_RELEASE);
                errno = saved_errno;
                return;  /* the read restarts on the zero page */
            }
            break;  /* cannot patch the page: the previous handler's fate */
        }
    }
    errno = saved_errno;
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, ucontext);
        return;
    }
    if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
        /* the default action: restore it; a fault repeats on return and kills, a kill() is re-raised */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGBUS, &dfl, NULL);
        if (info == NULL || info->si_code <= 0) {
            raise(sig);
        }
        return;
    }
    previous.sa_handler(sig);
}

static int
install(void)
{
    if (installed) {
        return 0;
    }
    long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0) {
        page_size = (uintptr_t)ps;
    }
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = on_sigbus;
    act.sa_flags = SA_SIGINFO;
    sigemptyset(&act.sa_mask);
    if (sigaction(SIGBUS, &act, &previous) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    installed = 1;
    return 0;
}

PyDoc_STRVAR(register_doc,
"register(buffer) -> slot: guard the memory of ``buffer`` (a file mapping) against SIGBUS.\n\n"
"Installs the handler on first use. Returns -1 when the registry is full (the caller must not\n"
"map then). The buffer's address is taken and its view released at once: unregister the slot\n"
"before the mapping is closed.");

static PyObject *
guard_register(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) != 0) {
        return NULL;
    }
    uintptr_t start = (uintptr_t)view.buf;
    size_t len = (size_t)view.len;
    PyBuffer_Release(&view);
    if (len == 0) {
        PyErr_SetString(PyExc_ValueError, "cannot guard an empty buffer");
        return NULL;
    }
    if (install() != 0) {
        return NULL;
    }
    for (int i = 0; i < GUARD_SLOTS; i++) {
        if (slots[i].start == 0) {
            __atomic_store_n(&slots[i].cut, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&slots[i].start, start, __ATOMIC_RELEASE);
            __atomic_store_n(&slots[i].len, len, __ATOMIC_RELEASE);
            return PyLong_FromLong(i);
        }
    }
    return PyLong_FromLong(-1);
}

static int
slot_arg(PyObject *arg, int *out)
{
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (i < 0 || i >= GUARD_SLOTS || slots[i].start == 0) {
        PyErr_Format(PyExc_ValueError, "no guarded mapping in slot %ld", i);
        return -1;
    }
    *out = (int)i;
    return 0;
}

PyDoc_STRVAR(was_cut_doc, "was_cut(slot) -> bool: whether a read of the range faulted past the file's end.");

static PyObject *
guard_was_cut(PyObject *self, PyObject *arg)
{
    int i;
    if (slot_arg(arg, &i) != 0) {
        return NULL;
    }
    return PyBool_FromLong(__atomic_load_n(&slots[i].cut, __ATOMIC_ACQUIRE));
}

PyDoc_STRVAR(unregister_doc, "unregister(slot) -> bool: free the slot; returns was_cut(slot).");

static PyObject *
guard_unregister(PyObject *self, PyObject *arg)
{
    int i;
    if (slot_arg(arg, &i) != 0) {
        return NULL;
    }
    int cut = __atomic_load_n(&slots[i].cut, __ATOMIC_ACQUIRE);
    __atomic_store_n(&slots[i].len, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&slots[i].start, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&slots[i].cut, 0, __ATOMIC_RELEASE);
    return PyBool_FromLong(cut);
}

PyDoc_STRVAR(in_use_doc, "in_use() -> int: how many slots hold a guarded mapping (for tests).");

static PyObject *
guard_in_use(PyObject *self, PyObject *noargs)
{
    long n = 0;
    for (int i = 0; i < GUARD_SLOTS; i++) {
        n += slots[i].start != 0;
    }
    return PyLong_FromLong(n);
}

static PyMethodDef methods[] = {
    {"register", guard_register, METH_O, register_doc},
    {"was_cut", guard_was_cut, METH_O, was_cut_doc},
    {"unregister", guard_unregister, METH_O, unregister_doc},
    {"in_use", guard_in_use, METH_NOARGS, in_use_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kafkatx.storage._mapguard",
    "SIGBUS guard for kafkatx's file mappings (see the C source's header comment).", -1, methods,
};

PyMODINIT_FUNC
PyInit__mapguard(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "SLOTS", GUARD_SLOTS) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/*
 * kafkatx.storage._partition: a partition folder's listing and its small files, each in one call.
 *
 * The compiled twin of three functions of kafkatx/storage/partition.py, function by function:
 *
 *   list_folder(path)               -> (names of the regular files, whether the folder has any entry)
 *   classify_listing(names)         -> (segments, snapshots) named in a folder's listing
 *   read_small_files(paths, limit, stat_first) -> per path (bytes, size after the read) or None
 *
 * At 10,000 partitions each folder is listed and its names read once (Partition) and its loader reads
 * three small files (storage/loading.py: the last segment's .log and .index, the newest .snapshot; verify
 * four); in Python each of those is a dozen interpreter calls around a few system calls. The answers are those of the Python twins:
 *
 *   - list_folder is os.scandir with DirEntry.is_file(): readdir's d_type says DT_REG; a symlink or an
 *     unknown type is stat()ed (the link followed); a name that is gone by then is no file (is_file's
 *     FileNotFoundError), any other stat error is the OSError is_file raises, naming the entry's path.
 *     A folder that cannot be opened or read raises the OSError os.scandir raises, naming ``path``.
 *     On Linux the folder is read with getdents64 on a descriptor opened as opendir opens it, without
 *     the fstat opendir adds (one system call less per partition folder).
 *   - classify_listing is Partition's reading of the names (LogLoader.loadSegmentFiles: a segment is
 *     a ``<20 digits>.log``, its index files the names with its prefix; ProducerStateManager's
 *     listSnapshotFiles: ``<20 digits>.snapshot``), by storage/segment.py's SEGMENT_NAME and SNAPSHOT_NAME
 *     (``re.match(r"^(\d{20})\.log$")``: \d any Unicode decimal digit, $ the end or a final newline):
 *     segments as (base offset, the 20-digit prefix, has .index, has .timeindex, has .txnindex),
 *     snapshots as (offset, name), each list sorted.
 *   - read_small_files is, per path, segment.read_small_file's reads (open, one pread of limit + 1
 *     bytes, fstat after a read that got bytes, close) without its judgements: a file that reads whole
 *     (at most ``limit`` bytes) is (bytes, st_size after the read; 0 when empty); anything else (it does
 *     not open, the read fails, it is larger) is None, and the caller reads that file again its own way
 *     when it needs it (the errors stay read_small_file's, raised where they were). A path whose
 *     ``stat_first`` item is true is stat()ed first: an empty regular file is (b"", 0) without being
 *     opened (what reading it gives; an open costs ~4 us on the VMs measured, a stat ~1.5: the
 *     loader's .index, empty for a segment under index.interval.bytes), a failed stat None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

#define MAX_LIMIT (1 << 26)  /* a small-file limit above this is a caller's mistake */

/* The entry's path as DirEntry.path spells it: the folder, a separator unless it ends with one, the name. */
static PyObject *
entry_path(const char *folder, const char *name)
{
    size_t n = strlen(folder);
    int sep = n > 0 && folder[n - 1] != '/';
    PyObject *joined = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n + sep + strlen(name)));
    if (joined == NULL) {
        return NULL;
    }
    char *out = PyBytes_AS_STRING(joined);
    memcpy(out, folder, n);
    if (sep) {
        out[n] = '/';
    }
    memcpy(out + n + sep, name, strlen(name));
    PyObject *text = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(joined), PyBytes_GET_SIZE(joined));
    Py_DECREF(joined);
    return text;
}

/* DirEntry.is_file(): 1 a regular file (a symlink followed), 0 not one (or gone), -1 error set. */
static int
is_regular_entry(int dir_fd, const char *folder, unsigned char d_type, const char *d_name)
{
    if (d_type == DT_REG) {
        return 1;
    }
    if (d_type != DT_LNK && d_type != DT_UNKNOWN) {
        return 0;
    }
    struct stat st;
    if (fstatat(dir_fd, d_name, &st, 0) == 0) {
        return S_ISREG(st.st_mode) ? 1 : 0;
    }
    if (errno == ENOENT) {
        return 0;
    }
    int saved = errno;
    PyObject *where = entry_path(folder, d_name);
    if (where != NULL) {
        errno = saved;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, where);
        Py_DECREF(where);
    }
    return -1;
}

/* One entry of a listing: skip "." and "..", note that the folder has an entry, append a regular file's
 * name to ``names``. 0, or -1 with an error set. */
static int
take_entry(int dir_fd, const char *folder, unsigned char d_type, const char *d_name, PyObject *names, int *any)
{
    if (d_name[0] == '.' && (d_name[1] == '\0' || (d_name[1] == '.' && d_name[2] == '\0'))) {
        return 0;
    }
    *any = 1;
    int regular = is_regular_entry(dir_fd, folder, d_type, d_name);
    if (regular <= 0) {
        return regular;
    }
    PyObject *name = PyUnicode_DecodeFSDefault(d_name);
    if (name == NULL || PyList_Append(names, name) < 0) {
        Py_XDECREF(name);
        return -1;
    }
    Py_DECREF(name);
    return 0;
}

#ifdef __linux__
struct kx_dirent64 {  /* struct linux_dirent64 (getdents64(2)) */
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};
#endif

/* The entries of the folder ``folder`` into ``names`` (``where``: the path its errors name). 0, or -1 with
 * the error os.scandir (opendir/readdir) or DirEntry.is_file raises. */
static int
read_entries(const char *folder, PyObject *where, PyObject *names, int *any)
{
#ifdef __linux__
    /* opendir's open, then getdents64 until it returns 0: readdir's system calls without opendir's fstat */
    int fd;
    do {
        fd = open(folder, O_RDONLY | O_NONBLOCK | O_DIRECTORY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, where);
        return -1;
    }
    _Alignas(8) char buf[32768];
    for (;;) {
        long got;
        do {
            got = syscall(SYS_getdents64, fd, buf, sizeof(buf));
        } while (got < 0 && errno == EINTR);
        if (got < 0) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, where);
            close(fd);
            return -1;
        }
        if (got == 0) {
            break;
        }
        for (long at = 0; at < got;) {
            const struct kx_dirent64 *e = (const struct kx_dirent64 *)(buf + at);
            if (take_entry(fd, folder, e->d_type, e->d_name, names, any) < 0) {
                close(fd);
                return -1;
            }
            at += e->d_reclen;
        }
    }
    close(fd);
    return 0;
#else
    DIR *dir = opendir(folder);
    if (dir == NULL) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, where);
        return -1;
    }
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(dir);
        if (e == NULL) {
            if (errno != 0) {
                PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, where);
                closedir(dir);
                return -1;
            }
            break;
        }
        if (take_entry(dirfd(dir), folder, e->d_type, e->d_name, names, any) < 0) {
            closedir(dir);
            return -1;
        }
    }
    closedir(dir);
    return 0;
#endif
}

PyDoc_STRVAR(list_folder_doc,
"list_folder(path, /) -> (names, any_entry)\n\n"
"The names of the regular files in the folder ``path`` (symlinks followed, os.DirEntry.is_file) in\n"
"the order the folder lists them, and whether it holds any entry at all. kafkatx.storage.partition.list_folder.");

static PyObject *
list_folder(PyObject *self, PyObject *arg)
{
    PyObject *where = PyOS_FSPath(arg);  /* what os.scandir names in its errors: the path as a str */
    if (where == NULL) {
        return NULL;
    }
    if (!PyUnicode_Check(where)) {
        Py_DECREF(where);
        PyErr_SetString(PyExc_TypeError, "list_folder(): path must be a str or os.PathLike of a str");
        return NULL;
    }
    PyObject *encoded = NULL;
    if (!PyUnicode_FSConverter(where, &encoded)) {
        Py_DECREF(where);
        return NULL;
    }
    const char *folder = PyBytes_AS_STRING(encoded);
    PyObject *names = PyList_New(0);
    int any = 0;
    if (names == NULL) {
        Py_DECREF(encoded);
        Py_DECREF(where);
        return NULL;
    }
    if (read_entries(folder, where, names, &any) < 0) {
        Py_DECREF(names);
        Py_DECREF(encoded);
        Py_DECREF(where);
        return NULL;
    }
    Py_DECREF(encoded);
    Py_DECREF(where);
    return Py_BuildValue("(NO)", names, any ? Py_True : Py_False);
}

/* Does ``name`` match re.match(r"^(\d{20})" + re.escape(suffix) + "$")? \d: a Unicode decimal digit
 * (Py_UNICODE_ISDECIMAL, what re's \d is for str); $: the end, or a newline that ends the name. */
static int
offset_named(PyObject *name, const char *suffix)
{
    Py_ssize_t len = (Py_ssize_t)strlen(suffix);
    Py_ssize_t n = PyUnicode_GET_LENGTH(name);
    int kind = PyUnicode_KIND(name);
    const void *data = PyUnicode_DATA(name);
    if (n != 20 + len && !(n == 21 + len && PyUnicode_READ(kind, data, n - 1) == '\n')) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        if (PyUnicode_READ(kind, data, 20 + i) != (Py_UCS4)(unsigned char)suffix[i]) {
            return 0;
        }
    }
    for (Py_ssize_t i = 0; i < 20; i++) {
        if (!Py_UNICODE_ISDECIMAL(PyUnicode_READ(kind, data, i))) {
            return 0;
        }
    }
    return 1;
}

/* Whether ``stem + suffix`` is in the set ``files``: 1, 0, or -1 with an error set. */
static int
has_sibling(PyObject *files, PyObject *stem, const char *suffix)
{
    PyObject *tail = PyUnicode_FromString(suffix);
    if (tail == NULL) {
        return -1;
    }
    PyObject *sibling = PyUnicode_Concat(stem, tail);
    Py_DECREF(tail);
    if (sibling == NULL) {
        return -1;
    }
    int found = PySet_Contains(files, sibling);
    Py_DECREF(sibling);
    return found;
}

/* One listed name: a segment's (base, stem, index?, timeindex?, txnindex?) appended to ``segments``, a
 * snapshot's (offset, name) to ``snapshots``, anything else left. 0, or -1 with an error set. */
static int
classify_name(PyObject *name, PyObject *files, PyObject *segments, PyObject *snapshots)
{
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "classify_listing(): names must be str");
        return -1;
    }
    int segment = offset_named(name, ".log");
    if (!segment && !offset_named(name, ".snapshot")) {
        return 0;
    }
    PyObject *stem = PyUnicode_Substring(name, 0, 20);
    if (stem == NULL) {
        return -1;
    }
    PyObject *offset = PyLong_FromUnicodeObject(stem, 10);
    PyObject *item = NULL;
    if (offset != NULL && segment) {
        int index = has_sibling(files, stem, ".index");
        int timeindex = index < 0 ? -1 : has_sibling(files, stem, ".timeindex");
        int txnindex = timeindex < 0 ? -1 : has_sibling(files, stem, ".txnindex");
        if (txnindex >= 0) {
            item = Py_BuildValue("(OOOOO)", offset, stem, index ? Py_True : Py_False,
                                 timeindex ? Py_True : Py_False, txnindex ? Py_True : Py_False);
        }
    } else if (offset != NULL) {
        item = PyTuple_Pack(2, offset, name);
    }
    Py_XDECREF(offset);
    Py_DECREF(stem);
    if (item == NULL) {
        return -1;
    }
    int failed = PyList_Append(segment ? segments : snapshots, item);
    Py_DECREF(item);
    return failed;
}

PyDoc_STRVAR(classify_listing_doc,
"classify_listing(names, /) -> (segments, snapshots)\n\n"
"The segments and producer snapshots a folder's file names name: segments as (base offset, 20-digit\n"
"prefix, has .index, has .timeindex, has .txnindex), snapshots as (offset, name), each list sorted.\n"
"kafkatx.storage.partition.classify_listing.");

static PyObject *
classify_listing(PyObject *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "classify_listing(): names must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    PyObject *files = PySet_New(seq);
    PyObject *segments = files != NULL ? PyList_New(0) : NULL;
    PyObject *snapshots = segments != NULL ? PyList_New(0) : NULL;
    if (snapshots == NULL) {
        goto fail;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (classify_name(PySequence_Fast_GET_ITEM(seq, i), files, segments, snapshots) < 0) {
            goto fail;
        }
    }
    if (PyList_Sort(segments) < 0 || PyList_Sort(snapshots) < 0) {
        goto fail;
    }
    Py_DECREF(files);
    Py_DECREF(seq);
    return Py_BuildValue("(NN)", segments, snapshots);
fail:
    Py_XDECREF(snapshots);
    Py_XDECREF(segments);
    Py_XDECREF(files);
    Py_DECREF(seq);
    return NULL;
}

/* One file as read_small_file reads it: a new (bytes, size after) reference, Py_None (new reference)
 * when it does not read whole, NULL with an error set only for a memory error. */
static PyObject *
read_one(const char *path, char *buf, Py_ssize_t limit, int stat_first)
{
    if (stat_first) {
        struct stat st;
        if (stat(path, &st) != 0) {
            Py_RETURN_NONE;
        }
        if (S_ISREG(st.st_mode) && st.st_size == 0) {
            return Py_BuildValue("(y#i)", "", (Py_ssize_t)0, 0);
        }
    }
    int fd;
    do {
        fd = open(path, O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        Py_RETURN_NONE;
    }
    ssize_t got;
    do {
        got = pread(fd, buf, (size_t)limit + 1, 0);
    } while (got < 0 && errno == EINTR);
    long long after = 0;
    int whole = got >= 0 && got <= limit;
    if (whole && got > 0) {
        struct stat st;
        if (fstat(fd, &st) == 0) {
            after = (long long)st.st_size;
        } else {
            whole = 0;
        }
    }
    close(fd);
    if (!whole) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(y#L)", buf, (Py_ssize_t)got, after);
}

PyDoc_STRVAR(read_small_files_doc,
"read_small_files(paths, limit, stat_first, /) -> tuple\n\n"
"Per path, (its bytes, its size after the read) when it reads whole in one read of limit + 1 bytes\n"
"(at most limit bytes), else None; a path whose stat_first item is true and that is an empty regular\n"
"file is (b'', 0) unopened. kafkatx.storage.partition.read_small_files.");

static PyObject *
read_small_files(PyObject *self, PyObject *args)
{
    PyObject *paths, *stat_first;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "OnO:read_small_files", &paths, &limit, &stat_first)) {
        return NULL;
    }
    if (limit < 0 || limit > MAX_LIMIT) {
        PyErr_SetString(PyExc_ValueError, "read_small_files(): limit out of range");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(paths, "read_small_files(): paths must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    PyObject *firsts = PySequence_Fast(stat_first, "read_small_files(): stat_first must be a sequence");
    if (firsts == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (PySequence_Fast_GET_SIZE(firsts) != n) {
        PyErr_SetString(PyExc_ValueError, "read_small_files(): stat_first and paths differ in length");
        Py_DECREF(firsts);
        Py_DECREF(seq);
        return NULL;
    }
    PyObject *out = PyTuple_New(n);
    char *buf = out != NULL ? PyMem_Malloc((size_t)limit + 1) : NULL;
    if (out == NULL || buf == NULL) {
        if (out != NULL) {
            PyErr_NoMemory();
        }
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *encoded = NULL;
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &encoded)) {
            goto fail;
        }
        int first = PyObject_IsTrue(PySequence_Fast_GET_ITEM(firsts, i));
        if (first < 0) {
            Py_DECREF(encoded);
            goto fail;
        }
        PyObject *got = read_one(PyBytes_AS_STRING(encoded), buf, limit, first);
        Py_DECREF(encoded);
        if (got == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(out, i, got);
    }
    PyMem_Free(buf);
    Py_DECREF(firsts);
    Py_DECREF(seq);
    return out;
fail:
    PyMem_Free(buf);
    Py_XDECREF(out);
    Py_DECREF(firsts);
    Py_DECREF(seq);
    return NULL;
}

static PyMethodDef methods[] = {
    {"list_folder", list_folder, METH_O, list_folder_doc},
    {"classify_listing", classify_listing, METH_O, classify_listing_doc},
    {"read_small_files", read_small_files, METH_VARARGS, read_small_files_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {  /* multi-phase init (PEP 489); no module state: nothing to set up */
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.storage._partition",
    .m_doc = "A partition folder's listing and small files in one call each (kafkatx/storage/partition.py's twins).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__partition(void)
{
    return PyModuleDef_Init(&module);
}

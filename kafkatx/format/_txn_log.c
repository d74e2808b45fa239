/*
 * kafkatx.format._txn_log -- the compiled decoder of kafkatx/format/txn_log.py's usual records.
 *
 *   txn_log_decode(key, value) -> (transactional_id, fields | None) | None
 *
 * The decoder itself is _txn_log.h (tl_decode; kafkatx/coordinator/_coordinator.c decodes with it too).
 */
#include "_txn_log.h"

static PyObject *
sp_txn_log_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *key_arg, *value_arg;
    if (wire_args("txn_log_decode", args, nargs, "OO", &key_arg, &value_arg) < 0)
        return NULL;
    Py_buffer kv, vv;
    if (PyObject_GetBuffer(key_arg, &kv, PyBUF_SIMPLE) < 0)
        return NULL;
    int tomb = value_arg == Py_None;
    if (!tomb && PyObject_GetBuffer(value_arg, &vv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&kv);
        return NULL;
    }
    PyObject *tid = NULL, *fields = NULL;
    int got = tl_decode((const uint8_t *)kv.buf, kv.len, tomb ? NULL : (const uint8_t *)vv.buf, tomb ? 0 : vv.len,
                        NULL, &tid, &fields);
    PyBuffer_Release(&kv);
    if (!tomb)
        PyBuffer_Release(&vv);
    if (got < 0)
        return NULL;
    if (got == 0)
        Py_RETURN_NONE;
    PyObject *result = PyTuple_Pack(2, tid, fields);
    Py_DECREF(tid);
    Py_DECREF(fields);
    return result;
}

static PyMethodDef tl_methods[] = {
    {"txn_log_decode", (PyCFunction)(void (*)(void))sp_txn_log_decode, METH_FASTCALL,
     "txn_log_decode(key, value) -> (transactional_id, fields | None) | None (None: let Python decode)"},
    {NULL, NULL, 0, NULL}};

static PyModuleDef_Slot tl_slots[] = {
    {Py_mod_exec, wire_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL}};

static struct PyModuleDef tl_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkatx.format._txn_log",
    .m_doc = "Compiled __transaction_state record decoding for kafkatx.format.txn_log (optional; see _txn_log.c).",
    .m_size = 0, /* no state: nothing is registered */
    .m_methods = tl_methods,
    .m_slots = tl_slots,
};

PyMODINIT_FUNC
PyInit__txn_log(void)
{
    return PyModuleDef_Init(&tl_module);
}

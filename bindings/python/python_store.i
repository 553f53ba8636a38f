/*
 * python_store.i - a rendezvous store implemented by a Python object.
 *
 * gang_python_create_on_store() makes a gang whose rendezvous goes through
 * a Python object (gang.torch wraps torch.distributed's store in one), by
 * way of gang_store_create_callbacks. The object answers:
 *
 *   set(key: str, value: bytes) -> None
 *   get(key: str, timeout_ms: int) -> bytes, or None when it timed out
 *   add(key: str, delta: int) -> int
 *   delete(key: str) -> None           (a missing key is not an error)
 *   check(keys: list[str]) -> bool
 *   wait(keys: list[str], timeout_ms: int) -> bool (False: timed out)
 *
 * Threads: gang calls the callbacks from whatever thread needs the store
 * (the creating thread, its watcher), so each one takes the GIL for the
 * call. An exception becomes GANG_ERR_STORE with its text; gang names the
 * call and the key. Once the interpreter is finalizing (or gang.torch's
 * atexit hook said so through gang_python_store_shutdown), no callback
 * touches Python again: each fails with GANG_ERR_STORE instead.
 */

%{
#include <stdatomic.h>
#include <time.h>

static atomic_int gang_py_store_gone = 0;
/* Callbacks between their check of gang_py_store_gone and their return:
 * gang_python_store_shutdown waits for them, so that none is left waiting
 * for the GIL once the interpreter finalizes (a thread that takes it then
 * is ended on the spot, unwinding through gang's C++ frames). */
static atomic_int gang_py_store_inside = 0;

/* 1 when Python may no longer be entered from another thread; else 0, and
 * the caller is counted in until gang_py_store_leave(). */
static int gang_py_store_closed(void) {
  atomic_fetch_add(&gang_py_store_inside, 1);
  int closed = atomic_load(&gang_py_store_gone) != 0;
#if PY_VERSION_HEX >= 0x030D0000
  closed = closed || Py_IsFinalizing();
#else
  closed = closed || _Py_IsFinalizing();
#endif
  if (closed) atomic_fetch_sub(&gang_py_store_inside, 1);
  return closed;
}

static void gang_py_store_leave(void) { atomic_fetch_sub(&gang_py_store_inside, 1); }

/* Writes the pending exception's text into err and clears it. */
static gang_status_t gang_py_store_error(const char* call, char* err, size_t err_len) {
  PyObject *type = NULL, *value = NULL, *trace = NULL;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  const char* text = NULL;
  PyObject* str = value != NULL ? PyObject_Str(value) : NULL;
  if (str != NULL) text = PyUnicode_AsUTF8(str);
  if (text == NULL) {
    PyErr_Clear();
    text = "(no message)";
  }
  snprintf(err, err_len, "the Python store's %s raised %s: %s", call,
           type != NULL ? ((PyTypeObject*)type)->tp_name : "an exception", text);
  Py_XDECREF(str);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return GANG_ERR_STORE;
}

#define GANG_PY_STORE_ENTER(err, err_len)                                   \
  if (gang_py_store_closed()) {                                            \
    snprintf(err, err_len, "the Python interpreter is shutting down");     \
    return GANG_ERR_STORE;                                                  \
  }                                                                         \
  PyGILState_STATE gil_ = PyGILState_Ensure()

#define GANG_PY_STORE_LEAVE() \
  PyGILState_Release(gil_);      \
  gang_py_store_leave()

/* A list of str from C strings, or NULL with an exception set. */
static PyObject* gang_py_store_keys(const char* const* keys, size_t nkeys) {
  PyObject* list = PyList_New((Py_ssize_t)nkeys);
  if (list == NULL) return NULL;
  for (size_t i = 0; i < nkeys; ++i) {
    PyObject* key = PyUnicode_FromString(keys[i]);
    if (key == NULL) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, key);
  }
  return list;
}

static gang_status_t gang_py_store_set(void* ctx, const char* key, const void* value,
                                       size_t n, char* err, size_t err_len) {
  GANG_PY_STORE_ENTER(err, err_len);
  gang_status_t status = GANG_OK;
  PyObject* r = PyObject_CallMethod((PyObject*)ctx, "set", "sy#", key,
                                    value != NULL ? (const char*)value : "", (Py_ssize_t)n);
  if (r == NULL) status = gang_py_store_error("set", err, err_len);
  Py_XDECREF(r);
  GANG_PY_STORE_LEAVE();
  return status;
}

static gang_status_t gang_py_store_get(void* ctx, const char* key, int64_t timeout_ms,
                                       void** value, size_t* n, char* err,
                                       size_t err_len) {
  GANG_PY_STORE_ENTER(err, err_len);
  gang_status_t status = GANG_OK;
  PyObject* r = PyObject_CallMethod((PyObject*)ctx, "get", "sL", key,
                                    (long long)timeout_ms);
  if (r == NULL) {
    status = gang_py_store_error("get", err, err_len);
  } else if (r == Py_None) {
    snprintf(err, err_len, "not set within %lld ms", (long long)timeout_ms);
    status = GANG_ERR_TIMEOUT;
  } else {
    char* data = NULL;
    Py_ssize_t len = 0;
    if (PyBytes_AsStringAndSize(r, &data, &len) != 0) {
      status = gang_py_store_error("get", err, err_len);
    } else {
      *value = malloc(len > 0 ? (size_t)len : 1);
      if (*value == NULL) {
        snprintf(err, err_len, "out of memory for %zd bytes", len);
        status = GANG_ERR_NO_MEMORY;
      } else {
        memcpy(*value, data, (size_t)len);
        *n = (size_t)len;
      }
    }
  }
  Py_XDECREF(r);
  GANG_PY_STORE_LEAVE();
  return status;
}

static gang_status_t gang_py_store_add(void* ctx, const char* key, int64_t delta,
                                       int64_t* out, char* err, size_t err_len) {
  GANG_PY_STORE_ENTER(err, err_len);
  gang_status_t status = GANG_OK;
  PyObject* r = PyObject_CallMethod((PyObject*)ctx, "add", "sL", key, (long long)delta);
  if (r == NULL) {
    status = gang_py_store_error("add", err, err_len);
  } else {
    long long sum = PyLong_AsLongLong(r);
    if (sum == -1 && PyErr_Occurred()) {
      status = gang_py_store_error("add", err, err_len);
    } else if (out != NULL) {
      *out = (int64_t)sum;
    }
  }
  Py_XDECREF(r);
  GANG_PY_STORE_LEAVE();
  return status;
}

static gang_status_t gang_py_store_remove(void* ctx, const char* key, char* err,
                                          size_t err_len) {
  GANG_PY_STORE_ENTER(err, err_len);
  gang_status_t status = GANG_OK;
  PyObject* r = PyObject_CallMethod((PyObject*)ctx, "delete", "s", key);
  if (r == NULL) status = gang_py_store_error("delete", err, err_len);
  Py_XDECREF(r);
  GANG_PY_STORE_LEAVE();
  return status;
}

static gang_status_t gang_py_store_check(void* ctx, const char* const* keys,
                                         size_t nkeys, int* exist, char* err,
                                         size_t err_len) {
  GANG_PY_STORE_ENTER(err, err_len);
  gang_status_t status = GANG_OK;
  PyObject* list = gang_py_store_keys(keys, nkeys);
  PyObject* r = list != NULL
                    ? PyObject_CallMethod((PyObject*)ctx, "check", "O", list)
                    : NULL;
  int truth = r != NULL ? PyObject_IsTrue(r) : -1;
  if (truth < 0) {
    status = gang_py_store_error("check", err, err_len);
  } else {
    *exist = truth;
  }
  Py_XDECREF(r);
  Py_XDECREF(list);
  GANG_PY_STORE_LEAVE();
  return status;
}

static gang_status_t gang_py_store_wait(void* ctx, const char* const* keys, size_t nkeys,
                                        int64_t timeout_ms, char* err, size_t err_len) {
  GANG_PY_STORE_ENTER(err, err_len);
  gang_status_t status = GANG_OK;
  PyObject* list = gang_py_store_keys(keys, nkeys);
  PyObject* r = list != NULL ? PyObject_CallMethod((PyObject*)ctx, "wait", "OL", list,
                                                   (long long)timeout_ms)
                             : NULL;
  int truth = r != NULL ? PyObject_IsTrue(r) : -1;
  if (truth < 0) {
    status = gang_py_store_error("wait", err, err_len);
  } else if (!truth) {
    snprintf(err, err_len, "not all %zu keys set within %lld ms", nkeys,
             (long long)timeout_ms);
    status = GANG_ERR_TIMEOUT;
  }
  Py_XDECREF(r);
  Py_XDECREF(list);
  GANG_PY_STORE_LEAVE();
  return status;
}

/* The store's reference to the Python object goes with the store. After
 * shutdown the object is left to the interpreter's own teardown. */
static void gang_py_store_release(void* ctx) {
  if (gang_py_store_closed()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF((PyObject*)ctx);
  PyGILState_Release(gil);
  gang_py_store_leave();
}
%}

%nothread gang_python_store_shutdown;
%inline %{
/* From then on no store callback enters Python (atexit: gang's threads may
 * outlive the interpreter's ability to run them); waits (with the GIL
 * released, up to 5 s) for the callbacks already in Python to return. */
static void gang_python_store_shutdown(void) {
  atomic_store(&gang_py_store_gone, 1);
  Py_BEGIN_ALLOW_THREADS
  for (int i = 0; i < 5000 && atomic_load(&gang_py_store_inside) > 0; ++i) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  Py_END_ALLOW_THREADS
}

/* gang_bind_create with the rendezvous through `store`, a Python object
 * answering set/get/add/delete/check/wait (see the top of this file).
 * timeout_ms also bounds the store's waits. The gang keeps the object
 * until it is destroyed. */
static gang_status_t gang_python_create_on_store(PyObject* store, const char* backend,
                                                 int device_type, int device_index,
                                                 int rank, int size, int64_t timeout_ms,
                                                 const char* name, int debug,
                                                 gang_t** out) {
  gang_store_callbacks_t callbacks;
  memset(&callbacks, 0, sizeof callbacks);
  callbacks.struct_size = sizeof callbacks;
  callbacks.ctx = store;
  callbacks.set = gang_py_store_set;
  callbacks.get = gang_py_store_get;
  callbacks.add = gang_py_store_add;
  callbacks.remove = gang_py_store_remove;
  callbacks.check = gang_py_store_check;
  callbacks.wait = gang_py_store_wait;
  callbacks.release = gang_py_store_release;

  /* The GIL is released around this call (threads="1"). */
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_INCREF(store);
  PyGILState_Release(gil);

  gang_store_t* handle = NULL;
  gang_status_t status = gang_store_create_callbacks(&callbacks, timeout_ms, &handle);
  if (status != GANG_OK) {
    gil = PyGILState_Ensure();
    Py_DECREF(store);
    PyGILState_Release(gil);
    return status;
  }
  gang_options_t options;
  gang_options_init(&options);
  options.backend = backend != NULL && backend[0] != '\0' ? backend : NULL;
  options.device_type = device_type;
  options.device_index = device_index;
  options.rank = rank;
  options.size = size;
  options.store = handle;
  options.timeout_ms = timeout_ms;
  options.name = name != NULL && name[0] != '\0' ? name : NULL;
  options.debug = debug;
  status = gang_create(&options, out);
  /* The gang, if made, holds the store; release runs when both are gone. */
  gang_store_destroy(handle);
  return status;
}
%}

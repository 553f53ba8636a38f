/*
 * python_typemaps.i - how gang.h's arguments cross into Python.
 *
 * Catalogued, with ownership, in bindings/TYPEMAPS.md. In short: buffers are
 * borrowed for the call through the buffer protocol; bytes the library
 * allocates are copied into a Python bytes and freed with gang_free; handles
 * come back as owned GangHandle / GangsHandle / WorkHandle objects.
 */

%{
#include <stdio.h>
#include <string.h>
#include <gang/gang.h>
%}

/* ---- errors ------------------------------------------------------------- */

%fragment("gang_py_errors", "header") %{
/* The callable gang.errors registers: factory(status, message) -> exception
 * instance. Until it is set, failures raise RuntimeError. */
static PyObject* gang_py_error_factory = NULL;

/* Raises the exception the factory makes of (status, message, type_error). */
static void gang_py_raise_message(gang_status_t status, const char* message,
                                  int type_error) {
  if (gang_py_error_factory == NULL) {
    PyErr_Format(type_error ? PyExc_TypeError : PyExc_RuntimeError, "%s: %s",
                 gang_status_name(status), message);
    return;
  }
  PyObject* text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message),
                                        "replace");
  if (text == NULL) return;
  PyObject* exc = PyObject_CallFunction(gang_py_error_factory, "iOi",
                                        (int)status, text, type_error);
  Py_DECREF(text);
  if (exc != NULL) {
    PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
}

/* Raises the exception for a failed call. Must run on the thread that made
 * the call, before any other gang call: it reads gang_last_error(). */
static void gang_py_raise(gang_status_t status) {
  const char* message;
  /* A pending signal handler's exception (Ctrl-C's KeyboardInterrupt, which
   * aborted this call's gang) wins over the call's error. */
  if (PyErr_CheckSignals() < 0) return;
  message = gang_last_error();
  if (!message[0]) message = gang_status_string(status);
  gang_py_raise_message(status, message, 0);
}

/* SWIG's own argument conversions fail with "in method 'gang_x', argument
 * N of type 'T'": reworded, that is a GangTypeError (a GangInvalidArgument-
 * Error for a value out of range). The package checks arguments first, so
 * this is a safety net. */
static void gang_py_arg_error(int code, const char* swig_message) {
  char function[64] = "capi", type[64] = "?";
  char message[256];
  int arg = 0;
  (void)sscanf(swig_message, "in method '%63[^']', argument %d of type '%63[^']'",
               function, &arg, type);
  snprintf(message, sizeof message, "%s: argument %d must be a %s%s", function,
           arg, type,
           code == SWIG_OverflowError ? " in range" : "");
  gang_py_raise_message(GANG_ERR_INVALID_ARGUMENT, message,
                        code != SWIG_OverflowError && code != SWIG_ValueError);
}
%}

%fragment("gang_py_errors");

%header %{
#undef SWIG_exception_fail
#define SWIG_exception_fail(code, msg) \
  do {                                   \
    gang_py_arg_error(code, msg);        \
    SWIG_fail;                           \
  } while (0)
%}

%inline %{
/* Sets the callable that turns (status, message) into an exception. */
static void set_error_factory(PyObject* factory) {
  Py_XINCREF(factory);
  Py_XSETREF(gang_py_error_factory, factory);
}
%}

/* Success is None: results come back through out-parameters. */
%typemap(out, fragment="gang_py_errors") gang_status_t %{
  if ($1 < 0) {
    gang_py_raise($1);
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
%}

/* gang_work_wait: True when the operation ended, False while in progress. */
%typemap(out, fragment="gang_py_errors") gang_status_t gang_work_wait %{
  if ($1 < 0) {
    gang_py_raise($1);
    SWIG_fail;
  }
  $result = PyBool_FromLong($1 == GANG_OK);
%}

/* gang_work_test: the raw status, so that a failed operation reads as ended
 * without raising; gang_work_wait raises its error. */
%typemap(out) gang_status_t gang_work_test %{
  $result = PyLong_FromLong((long)$1);
%}

/* ---- handles ------------------------------------------------------------ */

/* gang_t** out, gangs_t** out: an owned handle, or None (a rank outside the
 * new gang). */
%define GANG_PY_HANDLE_OUT(TYPE)
%typemap(in, numinputs=0) TYPE** out (TYPE* handle = NULL) %{
  $1 = &handle;
%}
%typemap(argout) TYPE** out %{
  $result = SWIG_Python_AppendOutput(
      $result, SWIG_NewPointerObj(handle$argnum, $*1_descriptor,
                                  SWIG_POINTER_OWN));
%}
%enddef

GANG_PY_HANDLE_OUT(gang_t)
GANG_PY_HANDLE_OUT(gangs_t)

/* ---- Ctrl-C in blocking calls ------------------------------------------
 *
 * A blocking collective runs in one C call with the GIL released, where
 * Python's SIGINT handler only sets a flag. So that Ctrl-C ends it at once,
 * install_interrupt() (called once at import) puts a handler in front of
 * Python's that calls it and then wakes a watcher thread through a pipe;
 * the watcher aborts the gang the main thread is blocked in, if any. The
 * call then fails, and the pending KeyboardInterrupt is raised instead of
 * its error (gang_py_raise). Peers of the aborted gang fail at once with
 * GANG_ERR_PEER_LOST. The per-call cost is a mutex on the main thread.
 * Only Python's default SIGINT handler (KeyboardInterrupt) leads to an
 * abort: with a Python handler of the program's own, blocking calls finish
 * as they would without gang. */
%fragment("gang_py_interrupt", "header") %{
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static struct sigaction gang_py_python_sigint;
static int gang_py_wake[2] = {-1, -1};
static pthread_mutex_t gang_py_blocking_mu = PTHREAD_MUTEX_INITIALIZER;
static gang_t* gang_py_blocking = NULL; /* the main thread's blocking call's */
static unsigned long gang_py_main_thread = 0;
static int gang_py_interrupt_on = 0;

static void gang_py_on_sigint(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  char byte = 1;
  if (gang_py_python_sigint.sa_flags & SA_SIGINFO) {
    gang_py_python_sigint.sa_sigaction(sig, info, context);
  } else if (gang_py_python_sigint.sa_handler != SIG_DFL &&
             gang_py_python_sigint.sa_handler != SIG_IGN) {
    gang_py_python_sigint.sa_handler(sig);
  }
  if (write(gang_py_wake[1], &byte, 1) < 0) { /* full: a wake is pending */ }
  errno = saved;
}

/* Whether SIGINT's Python handler is still signal.default_int_handler,
 * which raises KeyboardInterrupt: only then is aborting the blocked gang
 * what the program asked for. A program with a handler of its own (say, a
 * graceful stop after the current step) gets its blocked call to finish as
 * it would without gang. Runs on the watcher while the main thread waits in
 * C without the GIL; never while the interpreter is finalizing. */
static int gang_py_sigint_raises(void) {
  int yes = 0;
  PyGILState_STATE gil;
  PyObject *signal_module, *current, *default_handler;
#if PY_VERSION_HEX >= 0x030D0000
  if (Py_IsFinalizing()) return 0;
#else
  if (_Py_IsFinalizing()) return 0;
#endif
  gil = PyGILState_Ensure();
  signal_module = PyImport_ImportModule("signal");
  if (signal_module != NULL) {
    current = PyObject_CallMethod(signal_module, "getsignal", "i", SIGINT);
    default_handler = PyObject_GetAttrString(signal_module, "default_int_handler");
    yes = current != NULL && current == default_handler;
    Py_XDECREF(current);
    Py_XDECREF(default_handler);
    Py_DECREF(signal_module);
  }
  PyErr_Clear();
  PyGILState_Release(gil);
  return yes;
}

static void* gang_py_watch_interrupts(void* unused) {
  char byte;
  (void)unused;
  for (;;) {
    const ssize_t n = read(gang_py_wake[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return NULL;
    if (!gang_py_sigint_raises()) continue;
    pthread_mutex_lock(&gang_py_blocking_mu);
    if (gang_py_blocking != NULL) gang_abort(gang_py_blocking);
    pthread_mutex_unlock(&gang_py_blocking_mu);
  }
}

/* Around a blocking call: the main thread's gang is the one to abort. */
static int gang_py_blocking_begin(gang_t* gang) {
  if (!gang_py_interrupt_on || PyThread_get_thread_ident() != gang_py_main_thread) return 0;
  pthread_mutex_lock(&gang_py_blocking_mu);
  gang_py_blocking = gang;
  pthread_mutex_unlock(&gang_py_blocking_mu);
  return 1;
}

static void gang_py_blocking_end(void) {
  pthread_mutex_lock(&gang_py_blocking_mu);
  gang_py_blocking = NULL;
  pthread_mutex_unlock(&gang_py_blocking_mu);
}
%}

%fragment("gang_py_interrupt");
%nothread install_interrupt;
%inline %{
/* Installs the SIGINT path above over Python's own handler (when Python
 * handles SIGINT at all); main_thread is threading.main_thread().ident.
 * Returns whether it is installed. Idempotent. */
static int install_interrupt(unsigned long main_thread) {
  struct sigaction sa;
  pthread_t watcher;
  if (gang_py_interrupt_on) return 1;
  if (sigaction(SIGINT, NULL, &gang_py_python_sigint) != 0) return 0;
  if (!(gang_py_python_sigint.sa_flags & SA_SIGINFO) &&
      (gang_py_python_sigint.sa_handler == SIG_DFL ||
       gang_py_python_sigint.sa_handler == SIG_IGN)) {
    return 0;
  }
  if (pipe(gang_py_wake) != 0) return 0;
  (void)fcntl(gang_py_wake[0], F_SETFD, FD_CLOEXEC);
  (void)fcntl(gang_py_wake[1], F_SETFD, FD_CLOEXEC);
  (void)fcntl(gang_py_wake[1], F_SETFL, O_NONBLOCK);
  if (pthread_create(&watcher, NULL, gang_py_watch_interrupts, NULL) != 0) {
    close(gang_py_wake[0]);
    close(gang_py_wake[1]);
    return 0;
  }
  pthread_detach(watcher);
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = gang_py_on_sigint;
  sa.sa_mask = gang_py_python_sigint.sa_mask;
  sa.sa_flags = SA_SIGINFO | (gang_py_python_sigint.sa_flags & SA_ONSTACK);
  gang_py_main_thread = main_thread;
  if (sigaction(SIGINT, &sa, NULL) != 0) return 0;
  gang_py_interrupt_on = 1;
  return 1;
}
%}

/* gang_work_t** work: the Python argument is a flag; true makes the call
 * asynchronous and returns an owned WorkHandle; false (or None) blocks, and
 * Ctrl-C interrupts it (above). Every function with this argument takes its
 * gang first (arg1). */
%typemap(in, fragment="gang_py_interrupt") gang_work_t** work (gang_work_t* handle = NULL, int blocking = 0) %{
  {
    const int async_op = $input == Py_None ? 0 : PyObject_IsTrue($input);
    if (async_op < 0) SWIG_fail;
    $1 = async_op ? &handle : NULL;
    if (!async_op) blocking = gang_py_blocking_begin(arg1);
  }
%}
%typemap(argout) gang_work_t** work %{
  if ($1 != NULL) {
    $result = SWIG_Python_AppendOutput(
        $result, SWIG_NewPointerObj(handle$argnum, $*1_descriptor,
                                    SWIG_POINTER_OWN));
  }
%}
%typemap(freearg) gang_work_t** work %{
  if (blocking$argnum) gang_py_blocking_end();
%}

/* ---- element buffers ---------------------------------------------------- */

%fragment("gang_py_buffers", "header") %{
/* Borrows obj's memory for the call; None is NULL. The buffer must be
 * C-contiguous, and writable when `flags` asks for it. Sets a Python error
 * and returns -1 otherwise (BufferError becomes ValueError). */
static int gang_py_get_buffer(PyObject* obj, int flags, Py_buffer* view,
                              void** data) {
  if (obj == Py_None) {
    *data = NULL;
    return 0;
  }
  if (PyObject_GetBuffer(obj, view, flags | PyBUF_C_CONTIGUOUS) < 0) {
    if (PyErr_ExceptionMatches(PyExc_BufferError)) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      PyErr_Format(PyExc_ValueError, "gang: unusable buffer: %S", value);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(tb);
    }
    return -1;
  }
  *data = view->buf;
  return 1;
}
%}

/* Element buffers: as above, or an int (gang._buffers.DeviceView), the
 * address of device memory read from a __cuda_array_interface__ (the
 * package checked it; capi is private). */
%fragment("gang_py_elements", "header", fragment="gang_py_buffers") %{
static int gang_py_get_elements(PyObject* obj, int flags, Py_buffer* view,
                                void** data) {
  if (PyLong_Check(obj) && !PyBool_Check(obj)) {
    *data = PyLong_AsVoidPtr(obj);
    return *data == NULL && PyErr_Occurred() ? -1 : 0;
  }
  return gang_py_get_buffer(obj, flags, view, data);
}
%}

/* const void* (send, and send's buf): any C-contiguous buffer, or None. */
%typemap(in, fragment="gang_py_elements") const void* (Py_buffer view, int held = 0) %{
  held = gang_py_get_elements($input, PyBUF_SIMPLE, &view, (void**)&$1);
  if (held < 0) SWIG_fail;
%}
%typemap(freearg) const void* %{
  if (held$argnum > 0) PyBuffer_Release(&view$argnum);
%}

/* void* (recv, broadcast's and recv's buf): a writable C-contiguous buffer,
 * or None. */
%typemap(in, fragment="gang_py_elements") void* (Py_buffer view, int held = 0) %{
  held = gang_py_get_elements($input, PyBUF_WRITABLE, &view, &$1);
  if (held < 0) SWIG_fail;
%}
%typemap(freearg) void* %{
  if (held$argnum > 0) PyBuffer_Release(&view$argnum);
%}

/* ---- byte payloads ------------------------------------------------------ */

/* (const void* data, size_t len): any buffer, usually bytes. */
%typemap(in, fragment="gang_py_buffers") (const void* data, size_t len) (Py_buffer view, int held = 0) %{
  held = gang_py_get_buffer($input, PyBUF_SIMPLE, &view, (void**)&$1);
  if (held < 0) SWIG_fail;
  $2 = held > 0 ? (size_t)view.len : 0;
%}
%typemap(freearg) (const void* data, size_t len) %{
  if (held$argnum > 0) PyBuffer_Release(&view$argnum);
%}

/* (void** out, size_t* out_len): library memory, copied into a new bytes and
 * freed with gang_free. */
%typemap(in, numinputs=0) (void** out, size_t* out_len) (void* data = NULL, size_t len = 0) %{
  $1 = &data;
  $2 = &len;
%}
%typemap(argout) (void** out, size_t* out_len) %{
  {
    PyObject* bytes = PyBytes_FromStringAndSize((const char*)data$argnum,
                                                (Py_ssize_t)len$argnum);
    gang_free(data$argnum);
    data$argnum = NULL;
    if (bytes == NULL) SWIG_fail;
    $result = SWIG_Python_AppendOutput($result, bytes);
  }
%}
%typemap(freearg) (void** out, size_t* out_len) %{
  gang_free(data$argnum);
%}

/* (void** out, size_t* lens, size_t nlens): the Python argument is nlens
 * (the gang size); the result is a list of one bytes per rank. */
%typemap(in) (void** out, size_t* lens, size_t nlens) (void* data = NULL, size_t* lens = NULL) %{
  {
    Py_ssize_t n = PyLong_AsSsize_t($input);
    if (n < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "nlens < 0");
      SWIG_fail;
    }
    lens = (size_t*)PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(size_t));
    if (lens == NULL) {
      PyErr_NoMemory();
      SWIG_fail;
    }
    $1 = &data;
    $2 = lens;
    $3 = (size_t)n;
  }
%}
%typemap(argout) (void** out, size_t* lens, size_t nlens) %{
  {
    PyObject* list = PyList_New((Py_ssize_t)$3);
    const char* p = (const char*)data$argnum;
    size_t i;
    if (list == NULL) SWIG_fail;
    for (i = 0; i < $3; i++) {
      PyObject* bytes = PyBytes_FromStringAndSize(p, (Py_ssize_t)lens$argnum[i]);
      if (bytes == NULL) {
        Py_DECREF(list);
        SWIG_fail;
      }
      PyList_SET_ITEM(list, (Py_ssize_t)i, bytes);
      p += lens$argnum[i];
    }
    $result = SWIG_Python_AppendOutput($result, list);
  }
%}
%typemap(freearg) (void** out, size_t* lens, size_t nlens) %{
  gang_free(data$argnum);
  PyMem_Free(lens$argnum);
%}

/* ---- integer arrays ----------------------------------------------------- */

%fragment("gang_py_arrays", "header") %{
/* Copies a sequence of non-negative ints into a new PyMem array. */
static int gang_py_sizes(PyObject* seq, size_t** out, size_t* n) {
  PyObject* fast = PySequence_Fast(seq, "expected a sequence of ints");
  Py_ssize_t i, len;
  if (fast == NULL) return -1;
  len = PySequence_Fast_GET_SIZE(fast);
  *out = (size_t*)PyMem_Calloc(len > 0 ? (size_t)len : 1, sizeof(size_t));
  if (*out == NULL) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (i = 0; i < len; i++) {
    size_t v = PyLong_AsSize_t(PySequence_Fast_GET_ITEM(fast, i));
    if (v == (size_t)-1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
    (*out)[i] = v;
  }
  *n = (size_t)len;
  Py_DECREF(fast);
  return 0;
}

/* Copies a sequence of ints into a new PyMem array of int. */
static int gang_py_ints(PyObject* seq, int** out, int* n) {
  PyObject* fast = PySequence_Fast(seq, "expected a sequence of ints");
  Py_ssize_t i, len;
  if (fast == NULL) return -1;
  len = PySequence_Fast_GET_SIZE(fast);
  if (len > 0x7fffffff) {
    Py_DECREF(fast);
    PyErr_SetString(PyExc_ValueError, "too many ranks");
    return -1;
  }
  *out = (int*)PyMem_Calloc(len > 0 ? (size_t)len : 1, sizeof(int));
  if (*out == NULL) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (i = 0; i < len; i++) {
    long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
    if ((v == -1 && PyErr_Occurred()) || v < -0x7fffffffL - 1 ||
        v > 0x7fffffffL) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_OverflowError, "rank out of range");
      Py_DECREF(fast);
      return -1;
    }
    (*out)[i] = (int)v;
  }
  *n = (int)len;
  Py_DECREF(fast);
  return 0;
}
%}

/* Per-rank counts: a sequence of ints, copied for the call. */
%typemap(in, fragment="gang_py_arrays") (const size_t* COUNTS, size_t NCOUNTS) (size_t* counts = NULL) %{
  if (gang_py_sizes($input, &counts, &$2) < 0) SWIG_fail;
  $1 = counts;
%}
%typemap(freearg) (const size_t* COUNTS, size_t NCOUNTS) %{
  PyMem_Free(counts$argnum);
%}
%apply (const size_t* COUNTS, size_t NCOUNTS) {
  (const size_t* recv_counts, size_t ncounts),
  (const size_t* send_counts, size_t nsend),
  (const size_t* recv_counts, size_t nrecv)
};

/* (const int* ranks, int n): a sequence of ints, copied for the call. */
%typemap(in, fragment="gang_py_arrays") (const int* ranks, int n) (int* ranks = NULL) %{
  if (gang_py_ints($input, &ranks, &$2) < 0) SWIG_fail;
  $1 = ranks;
%}
%typemap(freearg) (const int* ranks, int n) %{
  PyMem_Free(ranks$argnum);
%}

/* (int* ranks, size_t capacity, size_t* n): the Python argument is the
 * capacity; the result is a list of the *n ranks written. */
%typemap(in) (int* ranks, size_t capacity, size_t* n) (int* ranks = NULL, size_t count = 0) %{
  {
    Py_ssize_t capacity = PyLong_AsSsize_t($input);
    if (capacity < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "capacity < 0");
      SWIG_fail;
    }
    ranks = (int*)PyMem_Calloc(capacity > 0 ? (size_t)capacity : 1, sizeof(int));
    if (ranks == NULL) {
      PyErr_NoMemory();
      SWIG_fail;
    }
    $1 = ranks;
    $2 = (size_t)capacity;
    $3 = &count;
  }
%}
%typemap(argout) (int* ranks, size_t capacity, size_t* n) %{
  {
    PyObject* list = PyList_New((Py_ssize_t)count$argnum);
    size_t i;
    if (list == NULL) SWIG_fail;
    for (i = 0; i < count$argnum; i++)
      PyList_SET_ITEM(list, (Py_ssize_t)i, PyLong_FromLong(ranks$argnum[i]));
    $result = SWIG_Python_AppendOutput($result, list);
  }
%}
%typemap(freearg) (int* ranks, size_t capacity, size_t* n) %{
  PyMem_Free(ranks$argnum);
%}

/* gang_bind_layout_after_loss: the survivors in, the active ranks out. */
%apply (const int* ranks, int n) { (const int* survivors, int n_survivors) };
%apply (int* ranks, size_t capacity, size_t* n) {
  (int* active, size_t capacity, size_t* n_active)
};

/* ---- scalar results ----------------------------------------------------- */

/* gang_broadcast_flag's int* out: a bool. */
%typemap(in, numinputs=0) int* out (int value = 0) %{ $1 = &value; %}
%typemap(argout) int* out %{
  $result = SWIG_Python_AppendOutput($result, PyBool_FromLong(value$argnum));
%}

/* gang_all_sum's double* out: a float. */
%typemap(in, numinputs=0) double* out (double value = 0) %{ $1 = &value; %}
%typemap(argout) double* out %{
  $result = SWIG_Python_AppendOutput($result, PyFloat_FromDouble(value$argnum));
%}

/* gang_get_async_error's gang_status_t* out: an int. */
%typemap(in, numinputs=0) gang_status_t* out (gang_status_t value = GANG_OK) %{
  $1 = &value;
%}
%typemap(argout) gang_status_t* out %{
  $result = SWIG_Python_AppendOutput($result, PyLong_FromLong((long)value$argnum));
%}

/* gang_env_detect's gang_env_t* out: a dict of its fields. */
%typemap(in, numinputs=0) gang_env_t* out (gang_env_t env) %{
  gang_env_init(&env);
  $1 = &env;
%}
%typemap(argout) gang_env_t* out %{
  {
    PyObject* dict = Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:i,s:s}",
        "rank", env$argnum.rank, "size", env$argnum.size,
        "local_rank", env$argnum.local_rank,
        "local_size", env$argnum.local_size,
        "node_rank", env$argnum.node_rank,
        "num_nodes", env$argnum.num_nodes,
        "master_addr", env$argnum.master_addr,
        "master_port", env$argnum.master_port,
        "source", env$argnum.source);
    if (dict == NULL) SWIG_fail;
    $result = SWIG_Python_AppendOutput($result, dict);
  }
%}

/* ---- DLPack ------------------------------------------------------------- */

/* The DLPack tensor structs (dlpack.h, a stable C ABI), declared here so
 * that the build needs no DLPack header. */
%{
typedef struct {
  int32_t device_type; /* 1 CPU, 2 CUDA, 3 CUDA host memory */
  int32_t device_id;
} gang_dl_device_t;
typedef struct {
  uint8_t code; /* 0 int, 1 uint, 2 float, 4 bfloat, 6 bool */
  uint8_t bits;
  uint16_t lanes;
} gang_dl_dtype_t;
typedef struct {
  void* data;
  gang_dl_device_t device;
  int32_t ndim;
  gang_dl_dtype_t dtype;
  int64_t* shape;
  int64_t* strides; /* in elements; NULL is C-contiguous */
  uint64_t byte_offset;
} gang_dl_tensor_t;
typedef struct { /* "dltensor" capsules */
  gang_dl_tensor_t dl_tensor;
  void* manager_ctx;
  void (*deleter)(void*);
} gang_dl_managed_t;
typedef struct { /* "dltensor_versioned" capsules (DLPack 1.x) */
  uint32_t major, minor;
  void* manager_ctx;
  void (*deleter)(void*);
  uint64_t flags; /* bit 0: read-only */
  gang_dl_tensor_t dl_tensor;
} gang_dl_managed_versioned_t;
%}

%nothread dlpack_info;
%inline %{
/* What a DLPack capsule describes, without consuming it (the capsule keeps
 * the producer's tensor alive until it is collected, so the caller holds it
 * for as long as the memory is used): (address, device_type, device_id,
 * code, bits, lanes, shape, contiguous, readonly). Raises TypeError for
 * anything else. */
static PyObject* dlpack_info(PyObject* capsule) {
  const gang_dl_tensor_t* t = NULL;
  int readonly = 0, contiguous = 1;
  PyObject* shape;
  int32_t i;
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    t = &((gang_dl_managed_t*)PyCapsule_GetPointer(capsule, "dltensor"))->dl_tensor;
  } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    gang_dl_managed_versioned_t* v = (gang_dl_managed_versioned_t*)PyCapsule_GetPointer(
        capsule, "dltensor_versioned");
    if (v->major != 1) {
      return PyErr_Format(PyExc_TypeError, "DLPack version %u.%u is not supported (1.x is)",
                          v->major, v->minor);
    }
    t = &v->dl_tensor;
    readonly = (int)(v->flags & 1u);
  } else {
    return PyErr_Format(PyExc_TypeError, "not an unused DLPack capsule");
  }
  if (t->ndim < 0) return PyErr_Format(PyExc_TypeError, "DLPack tensor with ndim < 0");
  shape = PyTuple_New(t->ndim);
  if (shape == NULL) return NULL;
  {
    int64_t want = 1, count = 1;
    for (i = 0; i < t->ndim; ++i) count *= t->shape[i];
    for (i = t->ndim - 1; i >= 0; --i) {
      /* Dimensions of size 1 may have any stride. */
      if (t->strides != NULL && count > 1 && t->shape[i] != 1 && t->strides[i] != want) {
        contiguous = 0;
      }
      want *= t->shape[i];
    }
  }
  for (i = 0; i < t->ndim; ++i) {
    PyObject* n = PyLong_FromLongLong((long long)t->shape[i]);
    if (n == NULL) {
      Py_DECREF(shape);
      return NULL;
    }
    PyTuple_SET_ITEM(shape, i, n);
  }
  return Py_BuildValue("(NiiiiiNii)",
                       PyLong_FromVoidPtr((char*)t->data + t->byte_offset),
                       (int)t->device.device_type, (int)t->device.device_id,
                       (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes, shape,
                       contiguous, readonly);
}
%}

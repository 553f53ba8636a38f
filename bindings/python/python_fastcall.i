/*
 * python_fastcall.i - the common case of Gang.all_reduce and Gang.broadcast
 * in one C call each, past SWIG's argument conversion and the package's
 * view(): METH_FASTCALL functions of gang.capi, written by hand.
 *
 *   fast_all_reduce(handle, x, op, async_op)
 *   fast_broadcast(handle, x, root, async_op)
 *   fast_learn_tensor(tensor_class, torch_dtype, gang_dtype)
 *
 * The common case: handle is a GangHandle; x is C-contiguous, writable host
 * memory of a dtype gang knows without being told, either through the
 * buffer protocol (numpy arrays, bytearray, array.array, memoryview; its
 * native format read as _buffers.py reads it) or a torch tensor of a class
 * and dtype the package's full path has seen on the host (it calls
 * fast_learn_tensor), read with the five calls into torch that _buffers.py's
 * quick path makes (dtype, is_cuda, is_contiguous(), data_ptr(), numel());
 * op (or root) is an int (a ReduceOperation is one) and op names a gang_op_t.
 * Anything else returns NotImplemented having done nothing, and the package
 * takes its full path, which raises its own errors with its own messages.
 * The package calls these only where its full path would make the same C
 * call: a CPU gang, open, without a group() open, and no dtype= given.
 *
 * The call is made as the SWIG wrappers make it (python_typemaps.i): a
 * blocking call on the main thread registered with the Ctrl-C watcher, the
 * GIL released around the C call, a failure raised by gang_py_raise. Returns
 * None once a blocking call is done; for async_op, (WorkHandle, keep), where
 * keep holds the memory for gang.Work until the operation completes: a
 * memoryview over the export the call used (as the full path keeps one), or
 * the tensor.
 */

%wrapper %{
/* A tensor class fast_learn_tensor was given, with the descriptors of the
 * five things read from its tensors, found on the class once: torch's own
 * getset and method descriptors, called directly rather than looked up on
 * each tensor (about 25 ns of the 140 or so the five cost). A class that
 * overrides one of them in Python is not taken. */
typedef struct {
  PyTypeObject* cls;
  PyGetSetDescrObject* dtype;
  PyGetSetDescrObject* is_cuda;
  PyObject* is_contiguous; /* method descriptors */
  PyObject* data_ptr;
  PyObject* numel;
} gang_fast_class_t;

/* The classes, and the (torch dtype, gang dtype) pairs, fast_learn_tensor
 * was given; strong references, so the pointers compared below stay those
 * objects'. */
#define GANG_FAST_MAX_CLASSES 8
#define GANG_FAST_MAX_DTYPES 32
static gang_fast_class_t gang_fast_classes[GANG_FAST_MAX_CLASSES];
static int gang_fast_nclasses = 0;
static PyObject* gang_fast_torch_dtypes[GANG_FAST_MAX_DTYPES];
static gang_dtype_t gang_fast_gang_dtypes[GANG_FAST_MAX_DTYPES];
static int gang_fast_ndtypes = 0;

/* One operand of a fast call: its memory, and what holds it. */
typedef struct {
  void* data;
  size_t count;
  gang_dtype_t dtype;
  Py_buffer view; /* held when held != 0 (blocking buffer calls) */
  int held;
  PyObject* keep; /* owned: async_op's memoryview or tensor; else NULL */
} gang_fast_operand_t;

/* The gang dtype of a buffer's format and itemsize, as _buffers.py's _kind
 * and _BY_KIND read them (a native-order single element); -1 for none. */
static int gang_fast_format_dtype(const char* format, Py_ssize_t itemsize) {
  char kind;
  if (format == NULL) format = "B";
#if PY_LITTLE_ENDIAN
  if (format[0] == '@' || format[0] == '=' || format[0] == '<') ++format;
#else
  if (format[0] == '@' || format[0] == '=' || format[0] == '>' || format[0] == '!') ++format;
#endif
  if (format[0] == '\0' || format[1] != '\0') return -1;
  switch (format[0]) {
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': kind = 'i'; break;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': kind = 'u'; break;
    case 'e': case 'f': case 'd': kind = 'f'; break;
    case '?': kind = 'b'; break;
    default: return -1;
  }
  switch (itemsize) {
    case 1:
      return kind == 'i' ? GANG_INT8 : kind == 'u' ? GANG_UINT8 : kind == 'b' ? GANG_BOOL : -1;
    case 2:
      return kind == 'i' ? GANG_INT16 : kind == 'f' ? GANG_FLOAT16 : -1;
    case 4:
      return kind == 'i' ? GANG_INT32 : kind == 'u' ? GANG_UINT32 : kind == 'f' ? GANG_FLOAT32 : -1;
    case 8:
      return kind == 'i' ? GANG_INT64 : kind == 'u' ? GANG_UINT64 : kind == 'f' ? GANG_FLOAT64 : -1;
    default:
      return -1;
  }
}

/* Whether a buffer is the common case; fills o's memory if so. */
static int gang_fast_usable(const Py_buffer* view, gang_fast_operand_t* o) {
  int dtype;
  if (view->readonly || view->itemsize <= 0 || !PyBuffer_IsContiguous(view, 'C')) return 0;
  dtype = gang_fast_format_dtype(view->format, view->itemsize);
  if (dtype < 0) return 0;
  o->data = view->buf;
  o->count = (size_t)(view->len / view->itemsize);
  o->dtype = (gang_dtype_t)dtype;
  return 1;
}

/* x through the buffer protocol. A blocking call borrows an export for the
 * call, as the SWIG typemaps do; an asynchronous one takes it through a
 * memoryview, which gang.Work keeps until the operation is done. */
static int gang_fast_buffer(PyObject* x, int async_op, gang_fast_operand_t* o) {
  if (!async_op) {
    if (PyObject_GetBuffer(x, &o->view, PyBUF_RECORDS_RO) < 0) {
      PyErr_Clear();
      return 0;
    }
    if (!gang_fast_usable(&o->view, o)) {
      PyBuffer_Release(&o->view);
      return 0;
    }
    o->held = 1;
    return 1;
  }
  o->keep = PyMemoryView_FromObject(x);
  if (o->keep == NULL) {
    PyErr_Clear();
    return 0;
  }
  if (!gang_fast_usable(PyMemoryView_GET_BUFFER(o->keep), o)) {
    Py_CLEAR(o->keep);
    return 0;
  }
  return 1;
}

/* x.<getset> */
static PyObject* gang_fast_get(PyObject* x, PyGetSetDescrObject* descr) {
  return descr->d_getset->get(x, descr->d_getset->closure);
}

/* x.<method>() */
static PyObject* gang_fast_call(PyObject* x, PyObject* descr) {
#if PY_VERSION_HEX >= 0x03090000
  return PyObject_Vectorcall(descr, &x, 1, NULL);
#else
  return PyObject_CallFunctionObjArgs(descr, x, NULL);
#endif
}

/* A tensor attribute or method result that must be `want` (a bool). */
static int gang_fast_is(PyObject* value, PyObject* want) {
  const int same = value == want;
  if (value == NULL) PyErr_Clear();
  Py_XDECREF(value);
  return same;
}

/* x as a torch tensor of a class and dtype fast_learn_tensor was given,
 * read as _buffers.py's quick path reads it: dtype, is_cuda,
 * is_contiguous(), data_ptr(), numel(). */
static int gang_fast_tensor(PyObject* x, int async_op, gang_fast_operand_t* o) {
  const gang_fast_class_t* c;
  PyObject* value;
  void* data;
  Py_ssize_t count;
  int i;
  for (i = 0; i < gang_fast_nclasses && Py_TYPE(x) != gang_fast_classes[i].cls; ++i) {
  }
  if (i == gang_fast_nclasses) return 0;
  c = &gang_fast_classes[i];
  value = gang_fast_get(x, c->dtype);
  if (value == NULL) goto fail;
  for (i = 0; i < gang_fast_ndtypes && gang_fast_torch_dtypes[i] != value; ++i) {
  }
  Py_DECREF(value); /* the table holds its own reference */
  if (i == gang_fast_ndtypes) return 0;
  o->dtype = gang_fast_gang_dtypes[i];
  if (!gang_fast_is(gang_fast_get(x, c->is_cuda), Py_False) ||
      !gang_fast_is(gang_fast_call(x, c->is_contiguous), Py_True)) {
    return 0;
  }
  value = gang_fast_call(x, c->data_ptr);
  if (value == NULL) goto fail;
  data = PyLong_AsVoidPtr(value);
  Py_DECREF(value);
  if (data == NULL) goto fail; /* a meta tensor (or an error): the full path says */
  value = gang_fast_call(x, c->numel);
  if (value == NULL) goto fail;
  count = PyLong_AsSsize_t(value);
  Py_DECREF(value);
  if (count < 0) goto fail;
  o->data = data;
  o->count = (size_t)count;
  if (async_op) {
    Py_INCREF(x);
    o->keep = x;
  }
  return 1;
fail:
  PyErr_Clear();
  return 0;
}

/* Reads x into o if it is the common case (1); 0 otherwise, with nothing
 * held and no error set. Buffers first (numpy); a torch tensor has no
 * buffer protocol. */
static int gang_fast_operand(PyObject* x, int async_op, gang_fast_operand_t* o) {
  o->held = 0;
  o->keep = NULL;
  if (PyObject_CheckBuffer(x)) return gang_fast_buffer(x, async_op, o);
  return gang_fast_tensor(x, async_op, o);
}

static void gang_fast_release(gang_fast_operand_t* o) {
  if (o->held) PyBuffer_Release(&o->view);
  Py_XDECREF(o->keep);
}

/* The gang of a GangHandle; NULL (and no error) for anything else. */
static gang_t* gang_fast_gang(PyObject* handle) {
  void* gang = NULL;
  if (!SWIG_IsOK(SWIG_ConvertPtr(handle, &gang, SWIGTYPE_p_gang_s, 0))) {
    PyErr_Clear();
    return NULL;
  }
  return (gang_t*)gang;
}

/* An int argument (op, root): 1 and *out for an int (not a bool) that fits
 * an int; 0 and no error otherwise. */
static int gang_fast_int(PyObject* value, int* out) {
  int overflow = 0;
  long v;
  if (!PyLong_Check(value) || PyBool_Check(value)) return 0;
  v = PyLong_AsLongAndOverflow(value, &overflow);
  if (overflow || (v == -1 && PyErr_Occurred()) || v < INT_MIN || v > INT_MAX) {
    PyErr_Clear();
    return 0;
  }
  *out = (int)v;
  return 1;
}

/* async_op as the `gang_work_t** work` typemap reads it: None is false. */
static int gang_fast_flag(PyObject* value) {
  if (value == Py_False || value == Py_None) return 0;
  if (value == Py_True) return 1;
  return PyObject_IsTrue(value);
}

/* After the C call, as the SWIG wrappers finish: raises a failure (reading
 * the thread's last error first), releases the operand, unregisters the
 * blocking call. */
static PyObject* gang_fast_finish(gang_status_t status, gang_work_t* work,
                                  gang_fast_operand_t* o, int blocking) {
  PyObject* result;
  if (status < 0) {
    gang_py_raise(status);
    result = NULL;
  } else if (work != NULL) {
    PyObject* handle =
        SWIG_Python_NewPointerObj(NULL, work, SWIGTYPE_p_gang_work_s, SWIG_POINTER_OWN);
    result = handle == NULL ? NULL : PyTuple_Pack(2, handle, o->keep);
    Py_XDECREF(handle);
  } else {
    Py_INCREF(Py_None);
    result = Py_None;
  }
  gang_fast_release(o);
  if (blocking) gang_py_blocking_end();
  return result;
}

/* fast_all_reduce(handle, x, op, async_op): gang_all_reduce in place. */
static PyObject* gang_fast_all_reduce(PyObject* self, PyObject* const* args,
                                      Py_ssize_t nargs) {
  gang_fast_operand_t x;
  gang_work_t* work = NULL;
  gang_status_t status;
  gang_t* gang;
  int op, async_op, blocking = 0;
  (void)self;
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "fast_all_reduce(handle, x, op, async_op)");
    return NULL;
  }
  if ((gang = gang_fast_gang(args[0])) == NULL || !gang_fast_int(args[2], &op) ||
      op < GANG_SUM || op > GANG_AVG) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  if ((async_op = gang_fast_flag(args[3])) < 0) return NULL;
  if (!gang_fast_operand(args[1], async_op, &x)) Py_RETURN_NOTIMPLEMENTED;
  if (!async_op) blocking = gang_py_blocking_begin(gang);
  Py_BEGIN_ALLOW_THREADS
  status = gang_all_reduce(gang, x.data, x.data, x.count, x.dtype, (gang_op_t)op,
                           async_op ? &work : NULL);
  Py_END_ALLOW_THREADS
  return gang_fast_finish(status, work, &x, blocking);
}

/* fast_broadcast(handle, x, root, async_op): gang_broadcast of x. */
static PyObject* gang_fast_broadcast(PyObject* self, PyObject* const* args,
                                     Py_ssize_t nargs) {
  gang_fast_operand_t x;
  gang_work_t* work = NULL;
  gang_status_t status;
  gang_t* gang;
  int root, async_op, blocking = 0;
  (void)self;
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "fast_broadcast(handle, x, root, async_op)");
    return NULL;
  }
  if ((gang = gang_fast_gang(args[0])) == NULL || !gang_fast_int(args[2], &root)) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  if ((async_op = gang_fast_flag(args[3])) < 0) return NULL;
  if (!gang_fast_operand(args[1], async_op, &x)) Py_RETURN_NOTIMPLEMENTED;
  if (!async_op) blocking = gang_py_blocking_begin(gang);
  Py_BEGIN_ALLOW_THREADS
  status = gang_broadcast(gang, x.data, x.count, x.dtype, root, async_op ? &work : NULL);
  Py_END_ALLOW_THREADS
  return gang_fast_finish(status, work, &x, blocking);
}

/* The descriptor `name` of cls, if it is of `type` (a new reference);
 * NULL otherwise, with no error set. */
static PyObject* gang_fast_descr(PyObject* cls, const char* name, PyTypeObject* type) {
  PyObject* descr = PyObject_GetAttrString(cls, name);
  if (descr == NULL) PyErr_Clear();
  if (descr != NULL && Py_TYPE(descr) != type) Py_CLEAR(descr);
  return descr;
}

/* Adds cls to the classes the fast calls read, if torch's own descriptors
 * serve its dtype, is_cuda, is_contiguous(), data_ptr() and numel() (a
 * class that overrides one in Python stays with the full path). */
static void gang_fast_add_class(PyObject* cls) {
  gang_fast_class_t c;
  c.cls = (PyTypeObject*)cls;
  c.dtype = (PyGetSetDescrObject*)gang_fast_descr(cls, "dtype", &PyGetSetDescr_Type);
  c.is_cuda = (PyGetSetDescrObject*)gang_fast_descr(cls, "is_cuda", &PyGetSetDescr_Type);
  c.is_contiguous = gang_fast_descr(cls, "is_contiguous", &PyMethodDescr_Type);
  c.data_ptr = gang_fast_descr(cls, "data_ptr", &PyMethodDescr_Type);
  c.numel = gang_fast_descr(cls, "numel", &PyMethodDescr_Type);
  if (c.dtype == NULL || c.is_cuda == NULL || c.is_contiguous == NULL || c.data_ptr == NULL ||
      c.numel == NULL) {
    Py_XDECREF(c.dtype);
    Py_XDECREF(c.is_cuda);
    Py_XDECREF(c.is_contiguous);
    Py_XDECREF(c.data_ptr);
    Py_XDECREF(c.numel);
    return;
  }
  Py_INCREF(cls);
  gang_fast_classes[gang_fast_nclasses++] = c;
}

/* fast_learn_tensor(tensor_class, torch_dtype, gang_dtype): a host tensor
 * of this class and torch dtype has this gang dtype (the package's full path
 * found so). Full tables are left as they are: the full path serves the rest. */
static PyObject* gang_fast_learn_tensor(PyObject* self, PyObject* const* args,
                                        Py_ssize_t nargs) {
  int i, dtype;
  (void)self;
  if (nargs != 3 || !PyType_Check(args[0]) || !gang_fast_int(args[2], &dtype)) {
    PyErr_SetString(PyExc_TypeError, "fast_learn_tensor(tensor_class, torch_dtype, gang_dtype)");
    return NULL;
  }
  for (i = 0; i < gang_fast_nclasses && gang_fast_classes[i].cls != (PyTypeObject*)args[0]; ++i) {
  }
  if (i == gang_fast_nclasses && i < GANG_FAST_MAX_CLASSES) gang_fast_add_class(args[0]);
  for (i = 0; i < gang_fast_ndtypes && gang_fast_torch_dtypes[i] != args[1]; ++i) {
  }
  if (i == gang_fast_ndtypes && i < GANG_FAST_MAX_DTYPES) {
    Py_INCREF(args[1]);
    gang_fast_torch_dtypes[i] = args[1];
    gang_fast_gang_dtypes[i] = (gang_dtype_t)dtype;
    gang_fast_ndtypes = i + 1;
  }
  Py_RETURN_NONE;
}

static PyMethodDef gang_fast_methods[] = {
    {"fast_all_reduce", (PyCFunction)(void (*)(void))gang_fast_all_reduce, METH_FASTCALL,
     "fast_all_reduce(handle, x, op, async_op): the common case of Gang.all_reduce; "
     "NotImplemented for the rest"},
    {"fast_broadcast", (PyCFunction)(void (*)(void))gang_fast_broadcast, METH_FASTCALL,
     "fast_broadcast(handle, x, root, async_op): the common case of Gang.broadcast; "
     "NotImplemented for the rest"},
    {"fast_learn_tensor", (PyCFunction)(void (*)(void))gang_fast_learn_tensor, METH_FASTCALL,
     "fast_learn_tensor(tensor_class, torch_dtype, gang_dtype): host tensors of this class "
     "and dtype take the fast calls"},
    {NULL, NULL, 0, NULL}};
%}

%init %{
  if (PyModule_AddFunctions(m, gang_fast_methods) < 0) return NULL;
#if defined(SWIGPYTHON_BUILTIN)
  /* capi.py imports the names in __all__. */
  SwigPyBuiltin_AddPublicSymbol(public_interface, "fast_all_reduce");
  SwigPyBuiltin_AddPublicSymbol(public_interface, "fast_broadcast");
  SwigPyBuiltin_AddPublicSymbol(public_interface, "fast_learn_tensor");
#endif
%}

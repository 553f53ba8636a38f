/*
 * gang_python.i - the Python module gang.capi: gang.h, one function per C
 * call, with Python typemaps. The package gang (gang/__init__.py) is the API
 * users see; this module is its thin, mechanical base.
 *
 *  - GIL: threads="1" releases the GIL around every C call; %nothread keeps
 *    it for the calls that cannot block (queries, names, layout math).
 *  - Errors: a negative gang_status_t raises the exception that
 *    gang.errors registers with set_error_factory(), built from the status
 *    and gang_last_error(), read on the calling thread right after the call.
 *  - Buffers: any object with the buffer protocol; see python_typemaps.i and
 *    bindings/TYPEMAPS.md for which buffer each typemap maps and who owns it.
 *  - Hot path: Gang.all_reduce and Gang.broadcast call fast_all_reduce and
 *    fast_broadcast (python_fastcall.i) first, written by hand.
 */
%module(package="gang", threads="1") capi

%include "python_typemaps.i"

/* Python never frees library memory itself: the typemaps do. */
%ignore gang_free;

/* Calls that return at once keep the GIL (releasing it costs more than
 * they do). Everything else, collectives above all, releases it. */
%nothread gang_version_number;
%nothread gang_version_string;
%nothread gang_status_name;
%nothread gang_status_string;
%nothread gang_last_error;
%nothread gang_dtype_size;
%nothread gang_rank;
%nothread gang_size;
%nothread gang_backend_name;
%nothread gang_device_type;
%nothread gang_device_index;
%nothread gang_name;
%nothread gang_root_rank;
%nothread gang_set_timeout;
%nothread gang_set_cuda_stream;
%nothread gang_set_cuda_completion;
%nothread gang_get_timeout;
%nothread gang_get_async_error;
%nothread gang_supports;
%nothread gangs_get;
%nothread gang_axis_name;
%nothread gang_work_test;
%nothread gang_bind_layout_ranks;
%nothread gang_bind_layout_after_loss;
%nothread set_error_factory;
%nothread gang_python_borrow;

/* A receive from any peer writes its sender when it completes: Python
 * wraps it blocking, with the sender as a result (gang_python_recv_any). */
%ignore gang_recv_any;
%include "../swig/gang.i"

/* Rendezvous through a store written in Python (gang.torch). */
%include "python_store.i"

/* gang_recv_any as Python calls it: blocking (work is always false from
 * the package, so Ctrl-C interrupts it), returning the sender. */
%typemap(in, numinputs=0) int* sender (int value = -1) %{ $1 = &value; %}
%typemap(argout) int* sender %{
  $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(value$argnum));
%}
%inline %{
static gang_status_t gang_python_recv_any(gang_t* gang, void* buf, size_t count,
                                          gang_dtype_t dtype, int tag,
                                          gang_work_t** work, int* sender) {
  return gang_recv_any(gang, buf, count, dtype, tag, sender, work);
}
%}

/* A handle for the gang at an address another extension hands over (the
 * compiled torch backend's gang): borrowed, never destroyed from Python. */
%inline %{
static gang_t* gang_python_borrow(unsigned long long address) {
  return (gang_t*)(uintptr_t)address;
}
%}

/* The common case of all_reduce and broadcast, past SWIG's conversions. */
%include "python_fastcall.i"

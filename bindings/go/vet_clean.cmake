# cmake -DFILE=capi.go -P vet_clean.cmake - makes SWIG's generated Go code
# pass go vet. SWIG's string copy keeps a C pointer in a uintptr field and
# converts it back to unsafe.Pointer ("possible misuse of unsafe.Pointer");
# holding it as an unsafe.Pointer is the same memory layout and no
# conversion. Fails if SWIG's output no longer has the expected shape.
file(READ "${FILE}" text)
macro(swap from to)
  string(FIND "${text}" "${from}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "vet_clean.cmake: ${FILE} has no '${from}'")
  endif()
  string(REPLACE "${from}" "${to}" text "${text}")
endmacro()
swap("type swig_gostring struct { p uintptr; n int }"
     "type swig_gostring struct { p unsafe.Pointer; n int }")
swap("(unsafe.Pointer(p.p))[:p.n]" "(p.p)[:p.n]")
swap("Swig_free(p.p)" "Swig_free(uintptr(p.p))")
file(WRITE "${FILE}" "${text}")

/*
 * gang_go.i - the Go package gang.dev/gang/internal/capi: gang.h, one function per C
 * call, generated with `swig -go -cgo -intgosize 64`. The idiomatic package
 * gang (this directory's .go files) is what users import.
 */
%module capi

%include "go_typemaps.i"
%include "../swig/gang.i"

{ A 2-rank all-reduce through libgang's C ABI from Free Pascal, which
  unmasks floating-point exceptions by default: one element's sum
  overflows to infinity, which gang computes with them masked (gang.h).
  Built and run under gangrun, e.g.
    fpc -Flbuild -FE/tmp examples/ffi/allreduce.pas
    LD_LIBRARY_PATH=build build/gangrun --nproc-per-node 2 -- /tmp/allreduce }
program allreduce;
{$mode objfpc}
uses ctypes, math;

const
  GANG_FLOAT32 = 8;
  GANG_SUM = 0;
  OPTIONS_SIZE = 72; { sizeof(gang_options_t) on LP64 }

procedure gang_options_init_v(options: Pointer; struct_size: csize_t); cdecl; external 'gang';
function gang_create(options: Pointer; out_gang: PPointer): cint; cdecl; external 'gang';
function gang_rank(g: Pointer): cint; cdecl; external 'gang';
function gang_size(g: Pointer): cint; cdecl; external 'gang';
function gang_all_reduce(g, send, recv: Pointer; count: csize_t; dtype, op: cint;
                         work: Pointer): cint; cdecl; external 'gang';
function gang_destroy(g: Pointer): cint; cdecl; external 'gang';
function gang_last_error: PChar; cdecl; external 'gang';

procedure check(status: cint; const what: string);
begin
  if status <> 0 then
  begin
    writeln(stderr, what, ': status ', status, ': ', gang_last_error());
    halt(1);
  end;
end;

var
  options: array[0..OPTIONS_SIZE - 1] of byte;
  g: Pointer;
  rank, size, i: cint;
  x, y: array[0..3] of single;
  want: single;
begin
  gang_options_init_v(@options, OPTIONS_SIZE);
  check(gang_create(@options, @g), 'gang_create');
  rank := gang_rank(g);
  size := gang_size(g);
  for i := 0 to 2 do x[i] := rank + 1;
  x[3] := 3.0e38; { the sum over 2 ranks or more overflows float32 }
  check(gang_all_reduce(g, @x, @y, 4, GANG_FLOAT32, GANG_SUM, nil), 'gang_all_reduce');
  want := size * (size + 1) / 2;
  for i := 0 to 2 do
    if y[i] <> want then
    begin
      writeln(stderr, 'rank ', rank, ': got ', y[i]:0:1, ', want ', want:0:1);
      halt(1);
    end;
  if not IsInfinite(y[3]) then
  begin
    writeln(stderr, 'rank ', rank, ': the overflowing sum is not infinite');
    halt(1);
  end;
  writeln('free pascal: rank ', rank, ' of ', size, ': sum ', y[0]:0:0, ', overflow inf');
  check(gang_destroy(g), 'gang_destroy');
end.

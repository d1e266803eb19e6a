-- bench/run.lua hook: the checkpoint benchmarks live in bench/serial_bench.lua.
return dofile("bench/serial_bench.lua")

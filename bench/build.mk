# bench/: benchmark programs; bench/run-bench runs them.

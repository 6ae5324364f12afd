# test/: unit tests (cmocka), the fake CUDA runtime and end-to-end workloads.

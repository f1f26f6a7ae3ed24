# Included by ctest after the discovered tests (tests/CMakeLists.txt says why): the environment of
# the second runs of some tests, which exist once heed_tests has been built.
if(heed_openblas_tests)
  set_tests_properties(${heed_openblas_tests} PROPERTIES ENVIRONMENT "OPENBLAS_NUM_THREADS=1;HEED_FP32_PRODUCTS=openblas")
endif()
if(heed_avx2_tests)
  set_tests_properties(${heed_avx2_tests} PROPERTIES ENVIRONMENT "OPENBLAS_NUM_THREADS=1;HEED_MAX_CPU_ISA=avx2")
endif()

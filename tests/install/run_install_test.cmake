# Installs heed into a scratch prefix, then configures, builds and runs examples/custom_layer and
# examples/attention_tutorial (outside projects that use find_package(heed)) against that
# installed copy only.
foreach(var HEED_BUILD_DIR HEED_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${HEED_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${HEED_SOURCE_DIR}/examples/custom_layer -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2)
run(${WORK_DIR}/build/custom_layer)
run(${CMAKE_COMMAND} -S ${HEED_SOURCE_DIR}/examples/attention_tutorial -B ${WORK_DIR}/tutorial
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/tutorial -j2)
run(${WORK_DIR}/tutorial/attention_tutorial)

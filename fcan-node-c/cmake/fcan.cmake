# fcan for CMake: generates a node's C code from its schema and links the node runtime.
#
#   include(path/to/fcan/fcan-node-c/cmake/fcan.cmake)
#   add_executable(board main.c app.c)
#   fcan_generate_schema(TARGET board SCHEMA schema/io_board.yaml)
#
# fcan_generate_schema(TARGET <target> SCHEMA <file>... [OUT_DIR <dir>] [NAME <node>])
#   At build time, runs `fcan-codegen c <files> --out <dir>` (again whenever a schema file
#   or fcan-codegen changes) and adds to <target>:
#   - the generated fcan_<node>.c (its header, fcan_<node>.h, is beside it);
#   - the include directories of fcan_<node>.h and fcan.h;
#   - libfcan_node.a for FCAN_RUST_TARGET (the only library the node needs: nothing from
#     the C library beyond memcpy/memset/strlen on a hosted target, nothing at all on a
#     microcontroller target, no -lpthread/-ldl/-lm).
#   <node> is the schema's `node:` name without its `{i}` (io_board{i} -> io_board),
#   read from the first file that has a `node:` line; NAME overrides it. OUT_DIR defaults
#   to <current binary dir>/fcan_<node>.
#
# Cache variables:
#   FCAN_SOURCE_DIR   the fcan source tree (default: the one this file is in); used to
#                     build what is not given prebuilt, with cargo.
#   FCAN_CODEGEN      the fcan-codegen binary. Default: `fcan-codegen` on the PATH, else
#                     built with `cargo build -p fcan-codegen --release` in FCAN_SOURCE_DIR.
#   FCAN_LIB_DIR      a prebuilt layout from fcan-node-c/scripts/build-lib.sh
#                     (include/fcan.h, lib/<rust-target>/libfcan_node.a). Default: none,
#                     libfcan_node.a is built with cargo for FCAN_RUST_TARGET.
#   FCAN_RUST_TARGET  the Rust target triple of the image (thumbv7em-none-eabihf, ...).
#                     Default: the host's when not cross compiling. Required when cross
#                     compiling: which Rust target fits a CPU depends on compiler flags
#                     (FPU, float ABI) CMake does not model.
#   FCAN_CARGO        cargo (only when something is built from source).

include_guard(GLOBAL)

set(_fcan_here "${CMAKE_CURRENT_LIST_DIR}")
get_filename_component(_fcan_default_source "${_fcan_here}/../.." ABSOLUTE)

set(FCAN_SOURCE_DIR "${_fcan_default_source}" CACHE PATH
    "The fcan source tree (for building fcan-codegen and libfcan_node.a with cargo)")
set(FCAN_CODEGEN "" CACHE FILEPATH
    "fcan-codegen binary (empty: fcan-codegen on the PATH, else built with cargo)")
set(FCAN_LIB_DIR "" CACHE PATH
    "Prebuilt libfcan_node layout from build-lib.sh (include/, lib/<rust-target>/); empty: build with cargo")
set(FCAN_RUST_TARGET "" CACHE STRING
    "Rust target triple of the image (empty: the host's when not cross compiling)")

# What fcan-node-c/scripts/build-lib.sh builds for a release (besides the host).
set(FCAN_SHIPPED_TARGETS
    thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabi thumbv7em-none-eabihf
    thumbv8m.main-none-eabihf riscv32imac-unknown-none-elf)

# cargo, found once (only needed when something is built from source).
function(_fcan_cargo out)
  if(NOT FCAN_CARGO)
    find_program(FCAN_CARGO cargo HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin")
  endif()
  if(NOT FCAN_CARGO)
    message(FATAL_ERROR
      "fcan: cargo not found, and it is needed to build ${ARGN}. Install Rust "
      "(https://rustup.rs), or give prebuilt files: FCAN_CODEGEN=<fcan-codegen binary>, "
      "FCAN_LIB_DIR=<layout from fcan-node-c/scripts/build-lib.sh>.")
  endif()
  set(${out} "${FCAN_CARGO}" PARENT_SCOPE)
endfunction()

# Cargo's target directory for FCAN_SOURCE_DIR (CARGO_TARGET_DIR when set).
function(_fcan_cargo_target_dir out)
  if(DEFINED ENV{CARGO_TARGET_DIR} AND NOT "$ENV{CARGO_TARGET_DIR}" STREQUAL "")
    get_filename_component(d "$ENV{CARGO_TARGET_DIR}" ABSOLUTE BASE_DIR "${FCAN_SOURCE_DIR}")
  else()
    set(d "${FCAN_SOURCE_DIR}/target")
  endif()
  set(${out} "${d}" PARENT_SCOPE)
endfunction()

# The host's Rust triple: rustc's, or (no Rust installed: a C team with a prebuilt
# FCAN_LIB_DIR) from the host system for the usual hosts.
function(_fcan_host_triple out)
  find_program(FCAN_RUSTC rustc HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin")
  mark_as_advanced(FCAN_RUSTC)
  set(triple "")
  if(FCAN_RUSTC)
    execute_process(COMMAND "${FCAN_RUSTC}" -vV
      WORKING_DIRECTORY "${FCAN_SOURCE_DIR}"
      OUTPUT_VARIABLE v RESULT_VARIABLE r ERROR_QUIET)
    if(r EQUAL 0 AND v MATCHES "host: ([^\n]+)")
      set(triple "${CMAKE_MATCH_1}")
    endif()
  endif()
  if(triple STREQUAL "")
    string(TOLOWER "${CMAKE_HOST_SYSTEM_PROCESSOR}" cpu)
    if(cpu STREQUAL "amd64")
      set(cpu x86_64)
    elseif(cpu STREQUAL "arm64")
      set(cpu aarch64)
    endif()
    if(CMAKE_HOST_SYSTEM_NAME STREQUAL "Linux")
      set(triple "${cpu}-unknown-linux-gnu")
    elseif(CMAKE_HOST_SYSTEM_NAME STREQUAL "Darwin")
      set(triple "${cpu}-apple-darwin")
    endif()
  endif()
  set(${out} "${triple}" PARENT_SCOPE)
endfunction()

# The Rust target of the image: FCAN_RUST_TARGET, or the host's when not cross compiling.
function(_fcan_rust_target out)
  if(NOT FCAN_RUST_TARGET STREQUAL "")
    set(${out} "${FCAN_RUST_TARGET}" PARENT_SCOPE)
    return()
  endif()
  if(CMAKE_CROSSCOMPILING)
    string(REPLACE ";" "\n    " shipped "${FCAN_SHIPPED_TARGETS}")
    message(FATAL_ERROR
      "fcan: cross compiling (CMAKE_SYSTEM_NAME ${CMAKE_SYSTEM_NAME}, "
      "CMAKE_SYSTEM_PROCESSOR '${CMAKE_SYSTEM_PROCESSOR}'): set "
      "FCAN_RUST_TARGET to the Rust target of your CPU and float ABI, e.g. "
      "-DFCAN_RUST_TARGET=thumbv7em-none-eabihf for a Cortex-M4F with -mfloat-abi=hard. "
      "The targets a release ships:\n    ${shipped}\n"
      "Cortex-M0/M0+: thumbv6m-none-eabi; M3: thumbv7m-none-eabi; M4/M7 soft-float: "
      "thumbv7em-none-eabi; M4F/M7F hard-float: thumbv7em-none-eabihf; M33/M55 "
      "hard-float: thumbv8m.main-none-eabihf; RV32IMAC: riscv32imac-unknown-none-elf.")
  endif()
  _fcan_host_triple(triple)
  if(triple STREQUAL "")
    message(FATAL_ERROR
      "fcan: cannot tell this host's Rust target triple (no rustc): set FCAN_RUST_TARGET")
  endif()
  set(${out} "${triple}" PARENT_SCOPE)
endfunction()

# The fcan-codegen command and what a generation step depends on (the binary, and the
# target that builds it). Sets <cmd_out> and <dep_out>.
function(_fcan_codegen cmd_out dep_out target_out)
  set(${target_out} "" PARENT_SCOPE)
  if(NOT FCAN_CODEGEN)
    find_program(_fcan_codegen_found fcan-codegen)
    mark_as_advanced(_fcan_codegen_found)
    if(_fcan_codegen_found)
      set(FCAN_CODEGEN "${_fcan_codegen_found}" CACHE FILEPATH
          "fcan-codegen binary (empty: fcan-codegen on the PATH, else built with cargo)" FORCE)
    endif()
  endif()
  if(FCAN_CODEGEN)
    if(NOT EXISTS "${FCAN_CODEGEN}")
      message(FATAL_ERROR "fcan: FCAN_CODEGEN=${FCAN_CODEGEN} does not exist")
    endif()
    set(${cmd_out} "${FCAN_CODEGEN}" PARENT_SCOPE)
    set(${dep_out} "${FCAN_CODEGEN}" PARENT_SCOPE)
    return()
  endif()
  # Built from source: cargo runs at every build (it does nothing when the binary is
  # fresh), and regeneration follows the binary's time stamp.
  _fcan_cargo(cargo "fcan-codegen (or set FCAN_CODEGEN)")
  _fcan_cargo_target_dir(tdir)
  set(bin "${tdir}/release/fcan-codegen${CMAKE_EXECUTABLE_SUFFIX}")
  if(NOT TARGET fcan_codegen_tool)
    add_custom_target(fcan_codegen_tool
      COMMAND "${cargo}" build -p fcan-codegen --release
      WORKING_DIRECTORY "${FCAN_SOURCE_DIR}"
      BYPRODUCTS "${bin}"
      COMMENT "fcan: cargo build -p fcan-codegen --release"
      USES_TERMINAL
      VERBATIM)
  endif()
  set(${cmd_out} "${bin}" PARENT_SCOPE)
  set(${dep_out} "${bin}" PARENT_SCOPE)
  set(${target_out} fcan_codegen_tool PARENT_SCOPE)
endfunction()

# The imported library fcan::node_<triple> (libfcan_node.a) and fcan.h's directory.
function(_fcan_node_lib triple lib_out include_out)
  string(MAKE_C_IDENTIFIER "${triple}" id)
  set(lib_target "fcan_node_${id}")
  if(FCAN_LIB_DIR)
    set(include_dir "${FCAN_LIB_DIR}/include")
    set(archive "${FCAN_LIB_DIR}/lib/${triple}/libfcan_node.a")
    if(NOT EXISTS "${archive}" OR NOT EXISTS "${include_dir}/fcan.h")
      file(GLOB have RELATIVE "${FCAN_LIB_DIR}/lib" "${FCAN_LIB_DIR}/lib/*")
      string(REPLACE ";" " " have "${have}")
      message(FATAL_ERROR
        "fcan: FCAN_LIB_DIR=${FCAN_LIB_DIR} has no ${triple}/libfcan_node.a or no "
        "include/fcan.h (it has: ${have}). Build it with "
        "fcan-node-c/scripts/build-lib.sh --out <dir> --target ${triple}.")
    endif()
  else()
    set(include_dir "${FCAN_SOURCE_DIR}/fcan-node-c/include")
    _fcan_cargo_target_dir(tdir)
    set(archive "${tdir}/${triple}/c-lib/libfcan_node.a")
  endif()
  if(NOT TARGET ${lib_target})
    add_library(${lib_target} STATIC IMPORTED GLOBAL)
    set_target_properties(${lib_target} PROPERTIES
      IMPORTED_LOCATION "${archive}"
      INTERFACE_INCLUDE_DIRECTORIES "${include_dir}")
    if(NOT FCAN_LIB_DIR)
      _fcan_cargo(cargo "libfcan_node.a for ${triple} (or set FCAN_LIB_DIR)")
      add_custom_target(${lib_target}_build
        COMMAND "${cargo}" rustc -p fcan-node-c --crate-type staticlib
                --features panic-handler --profile c-lib --target "${triple}"
        WORKING_DIRECTORY "${FCAN_SOURCE_DIR}"
        BYPRODUCTS "${archive}"
        COMMENT "fcan: cargo rustc -p fcan-node-c (libfcan_node.a for ${triple})"
        USES_TERMINAL
        VERBATIM)
      add_dependencies(${lib_target} ${lib_target}_build)
    endif()
  endif()
  set(${lib_out} ${lib_target} PARENT_SCOPE)
  set(${include_out} "${include_dir}" PARENT_SCOPE)
endfunction()

function(fcan_generate_schema)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "TARGET;OUT_DIR;NAME" "SCHEMA")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "fcan_generate_schema: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_TARGET OR NOT TARGET "${ARG_TARGET}")
    message(FATAL_ERROR "fcan_generate_schema: TARGET must name an existing target (got '${ARG_TARGET}')")
  endif()
  if(NOT ARG_SCHEMA)
    message(FATAL_ERROR "fcan_generate_schema(TARGET ${ARG_TARGET}): SCHEMA needs at least one file")
  endif()

  set(schema "")
  foreach(f IN LISTS ARG_SCHEMA)
    get_filename_component(abs "${f}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${abs}")
      message(FATAL_ERROR "fcan_generate_schema(TARGET ${ARG_TARGET}): no schema file ${abs}")
    endif()
    list(APPEND schema "${abs}")
  endforeach()

  # The node's name: NAME, or the `node:` line (io_board{i} -> io_board). Configure
  # runs again when a schema file changes, so a renamed node is picked up.
  set(name "${ARG_NAME}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${schema})
  if(name STREQUAL "")
    foreach(f IN LISTS schema)
      file(STRINGS "${f}" lines REGEX "^node:")
      foreach(line IN LISTS lines)
        if(line MATCHES "^node:[ \t]*[\"']?([A-Za-z_][A-Za-z0-9_]*)")
          set(name "${CMAKE_MATCH_1}")
          break()
        endif()
      endforeach()
      if(NOT name STREQUAL "")
        break()
      endif()
    endforeach()
  endif()
  if(name STREQUAL "")
    message(FATAL_ERROR
      "fcan_generate_schema(TARGET ${ARG_TARGET}): no `node:` line in ${ARG_SCHEMA}: pass NAME <node>")
  endif()
  string(TOLOWER "${name}" name)

  if(ARG_OUT_DIR)
    get_filename_component(out "${ARG_OUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  else()
    set(out "${CMAKE_CURRENT_BINARY_DIR}/fcan_${name}")
  endif()

  _fcan_codegen(codegen codegen_dep codegen_target)
  set(outputs "${out}/fcan_${name}.c" "${out}/fcan_${name}.h" "${out}/schema.bin"
              "${out}/schema.sha256")
  # One rule and one target per output directory, so several targets may share it.
  string(MD5 out_hash "${out}")
  string(SUBSTRING "${out_hash}" 0 8 out_hash)
  set(gen_target "fcan_gen_${name}_${out_hash}")
  if(NOT TARGET ${gen_target})
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND "${codegen}" c ${schema} --out "${out}"
      DEPENDS ${schema} "${codegen_dep}"
      COMMENT "fcan-codegen c: ${name} -> ${out}"
      VERBATIM)
    add_custom_target(${gen_target} DEPENDS ${outputs})
    if(codegen_target)
      add_dependencies(${gen_target} ${codegen_target})
    endif()
  endif()
  add_dependencies(${ARG_TARGET} ${gen_target})

  _fcan_rust_target(triple)
  _fcan_node_lib("${triple}" lib include_dir)

  target_sources(${ARG_TARGET} PRIVATE "${out}/fcan_${name}.c" "${out}/fcan_${name}.h")
  set_source_files_properties("${out}/fcan_${name}.c" "${out}/fcan_${name}.h"
    PROPERTIES GENERATED TRUE)
  target_include_directories(${ARG_TARGET} PUBLIC "${out}" "${include_dir}")
  target_link_libraries(${ARG_TARGET} PRIVATE ${lib})
endfunction()

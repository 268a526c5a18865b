# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The build toolchain of the simulated fleet: stand-ins for nvcc (cuda-nvcc-<X>-<Y>), cmake and the C++ compiler
(gcc-c++ / g++), for building the fleet's imitation nccl-tests and nvbandwidth source trees with their own Makefile
and CMakeLists.txt and the node's real GNU make (tests/testbed/REALITY.md, "Performance tools").

Nothing is compiled.  What is imitated is what a build on a real node depends on, with the real failure texts:

* a compile (``-c FILE``) resolves every ``#include <x>`` / ``#include "x"`` of FILE in its own folder, the ``-I``
  folders, the compiler's own include folder (nvcc: ``<CUDA home>/include``) and ``/usr/include``; a missing one is
  gcc's ``FILE:LINE:10: fatal error: x: No such file or directory`` / ``compilation terminated.`` (exit 1).  nvcc
  needs its host compiler (``-ccbin`` or ``g++`` on PATH) and, for every ``.cu`` file, ``cuda_runtime.h``;
* a link resolves every ``-lNAME`` in the ``-L`` folders and the system's (``libNAME.so`` or ``libNAME.a``); a
  missing one is GNU ld's ``/usr/bin/ld: cannot find -lNAME: No such file or directory`` and collect2's ``ld
  returned 1 exit status``;
* the sources of the imitation trees carry a ``// stand-in-program: <tool> <version>`` line; the object file records
  it, and the linked executable is a small script that runs the GPU double's tool (``gpu-double all_reduce_perf``,
  ``gpu-double nvbandwidth``, lib/perf_double.py) with that version.

cmake reads ``cmake_minimum_required``, ``project(... LANGUAGES ...)`` and ``find_package(Boost COMPONENTS
program_options)`` of CMakeLists.txt and writes a Makefile that builds with the compilers it found; its messages are
CMake's (``No CMAKE_CUDA_COMPILER could be found.``, ``Could NOT find Boost (missing: program_options)``).  Like
nvbandwidth's CMakeLists.txt on anything but Fedora, the Boost library is linked statically: without
``libboost_program_options.a`` make stops with ``No rule to make target '.../libboost_program_options.a', needed by
'nvbandwidth'`` (NVIDIA/nvbandwidth issue #4).
"""
from __future__ import absolute_import, division, print_function

import os
import re
import sys

import gpudouble as gd

DOUBLE_BIN = '/usr/lib/gpu-double/bin/gpu-double'
SYSTEM_INCLUDE = ('usr/include', 'usr/local/include')
SYSTEM_LIB = ('usr/lib64', 'usr/lib/x86_64-linux-gnu', 'usr/lib', 'lib64', 'lib/x86_64-linux-gnu')
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
_MARKER = re.compile(r'//\s*stand-in-program:\s*(\S+)\s+(\S+)')
_NCCL_CODE = re.compile(r'#define\s+NCCL_VERSION_CODE\s+(\d+)')
CMAKE_VERSION = os.environ.get('GPU_DOUBLE_CMAKE_VERSION', '3.26.5')


def _real(rel_or_abs):
    """A path as seen inside the double's root (GPU_DOUBLE_ROOT in tests, / in a node)."""
    return gd.path(rel_or_abs.lstrip('/')) if rel_or_abs.startswith('/') else rel_or_abs


def which(name):
    if '/' in name:
        return name if os.access(_real(name), os.X_OK) else None
    for folder in os.environ.get('PATH', '/usr/bin:/bin').split(':'):
        if folder and os.access(_real(os.path.join(folder, name)), os.X_OK):
            return os.path.join(folder, name)
    return None


class BuildFailure(Exception):
    """What a compiler prints when it fails, and its exit status."""

    def __init__(self, text, rc=1):
        Exception.__init__(self, text)
        self.text = text
        self.rc = rc


def parse_cc_args(args):
    """The options a compile or link uses: sources, objects, -o, -c, -I, -L, -l, -ccbin."""
    out = {'sources': [], 'objects': [], 'output': None, 'compile': False, 'include': [], 'libdirs': [],
           'libs': [], 'ccbin': None}
    i = 0
    while i < len(args):
        arg = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if arg == '-o' and nxt is not None:
            out['output'] = nxt
            i += 2
            continue
        if arg in ('-ccbin', '--compiler-bindir') and nxt is not None:
            out['ccbin'] = nxt
            i += 2
            continue
        if arg == '-c':
            out['compile'] = True
        elif arg.startswith('-I'):
            out['include'].append(arg[2:] or nxt)
            i += 0 if arg[2:] else 1
        elif arg.startswith('-L'):
            out['libdirs'].append(arg[2:] or nxt)
            i += 0 if arg[2:] else 1
        elif arg.startswith('-l'):
            out['libs'].append(arg[2:])
        elif arg.endswith(('.cu', '.cpp', '.cc', '.cxx', '.c')):
            out['sources'].append(arg)
        elif arg.endswith(('.o', '.a')):
            out['objects'].append(arg)
        i += 1
    return out


def _read(path):
    try:
        with open(_real(path)) as handle:
            return handle.read()
    except (IOError, OSError):
        return ''


def check_includes(source, include_dirs, seen=None):
    """Resolve every #include of a source (recursively for the project's own headers); the markers found."""
    seen = set() if seen is None else seen
    markers = {}
    path = _real(source)
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError):
        raise BuildFailure('cc1plus: fatal error: {0}: No such file or directory\ncompilation terminated.\n'.format(
            source))
    for number, line in enumerate(lines, 1):
        marker = _MARKER.search(line)
        if marker:
            markers['program'], markers['version'] = marker.group(1), marker.group(2)
        code = _NCCL_CODE.search(line)
        if code:
            markers['nccl_code'] = code.group(1)
        match = _INCLUDE.match(line)
        if not match:
            continue
        kind, name = match.groups()
        folders = ([os.path.dirname(source)] if kind == '"' else []) + list(include_dirs) + \
            ['/' + d for d in SYSTEM_INCLUDE]
        found = None
        for folder in folders:
            candidate = os.path.join(folder, name)
            if os.path.exists(_real(candidate)):
                found = candidate
                break
        if found is None:
            raise BuildFailure('{0}:{1}:10: fatal error: {2}: No such file or directory\n {1} | {3}\n      |'
                               '          ^~~~~~~~~~~~~\ncompilation terminated.\n'.format(
                                   source, number, name, line.strip()))
        if found in seen:
            continue
        seen.add(found)
        if found.startswith(('/usr/include', '/usr/local/include')):
            # a system header is not followed further; nccl.h's version code is read (nccl-tests prints it)
            code = _NCCL_CODE.search(_read(found))
            if code:
                markers.setdefault('nccl_code', code.group(1))
            continue
        markers.update(dict((k, v) for k, v in check_includes(found, include_dirs, seen).items()
                            if k not in markers))
    return markers


# The C library's own (-lrt -lpthread -ldl -lm): glibc-devel / libc6-dev, which the compiler packages depend on.
LIBC_LIBS = ('c', 'rt', 'pthread', 'dl', 'm')


def check_libs(libs, libdirs):
    folders = list(libdirs) + ['/' + d for d in SYSTEM_LIB]
    for lib in libs:
        if lib in LIBC_LIBS:
            continue
        if not any(os.path.exists(_real(os.path.join(f, 'lib{0}.{1}'.format(lib, ext))))
                   for f in folders for ext in ('so', 'a')):
            raise BuildFailure('/usr/bin/ld: cannot find -l{0}: No such file or directory\n'
                               'collect2: error: ld returned 1 exit status\n'.format(lib))


def read_object(path):
    markers = {}
    try:
        with open(_real(path)) as handle:
            for line in handle:
                if '=' in line:
                    key, value = line.strip().split('=', 1)
                    markers[key] = value
    except (IOError, OSError):
        raise BuildFailure('/usr/bin/ld: cannot find {0}: No such file or directory\n'
                           'collect2: error: ld returned 1 exit status\n'.format(path))
    return markers


def write_file(path, text, mode=0o644):
    target = _real(path)
    folder = os.path.dirname(target)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder)
    with open(target, 'w') as handle:
        handle.write(text)
    os.chmod(target, mode)


def executable_text(markers, objects):
    program = markers.get('program')
    if program == 'all_reduce_perf':
        tool = 'all_reduce_perf --nccl-tests-version {0} --nccl-code {1} --program all_reduce_perf'.format(
            markers.get('version', '0'), markers.get('nccl_code', '0'))
    elif program == 'nvbandwidth':
        # built from a release tarball: no git, so CMakeLists.txt's `git describe` gives an empty GIT_VERSION
        tool = "nvbandwidth --version-tag {0} --git-version ''".format(markers.get('version', 'v0.0'))
    else:
        tool = None
    head = '#!/bin/sh\n# Built by the stand-in toolchain of the simulated fleet from {0}\n'.format(' '.join(objects))
    if tool is None:
        return head + 'echo "stand-in executable without a program" >&2\nexit 1\n'
    return head + 'exec {0} {1} -- "$@"\n'.format(DOUBLE_BIN, tool)


def compile_or_link(opts, include_dirs, libdirs, compiler):
    """Compile (-c) or link, writing the object or the executable; raises BuildFailure."""
    if opts['compile']:
        for source in opts['sources']:
            markers = check_includes(source, include_dirs)
            target = opts['output'] or os.path.splitext(os.path.basename(source))[0] + '.o'
            write_file(target, 'STANDIN-OBJECT compiler={0}\nsource={1}\n{2}'.format(
                compiler, source, ''.join('{0}={1}\n'.format(k, v) for k, v in sorted(markers.items()))))
        return
    markers = {}
    for source in opts['sources']:
        markers.update(check_includes(source, include_dirs))
    for obj in opts['objects']:
        if obj.endswith('.a'):
            if not os.path.exists(_real(obj)):
                raise BuildFailure('/usr/bin/ld: cannot find {0}: No such file or directory\n'
                                   'collect2: error: ld returned 1 exit status\n'.format(obj))
            continue
        found = read_object(obj)
        for key, value in found.items():
            markers.setdefault(key, value)
    check_libs(opts['libs'], libdirs)
    write_file(opts['output'] or 'a.out', executable_text(markers, opts['objects'] + opts['sources']), 0o755)


# ---------------------------------------------------------------- nvcc

def nvcc(args, cuda_version, cuda_home):
    """(stdout, stderr, rc) of ``nvcc ARGS`` of the CUDA <cuda_version> toolkit installed in cuda_home."""
    major, minor = cuda_version.split('.')[:2]
    if args in (['--version'], ['-V']):
        return ('nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n'
                'Cuda compilation tools, release {0}.{1}, V{2}\n'
                'Build cuda_{0}.{1}.r{0}.{1}/compiler.0_0\n'.format(major, minor, cuda_version)), '', 0
    opts = parse_cc_args(args)
    host = opts['ccbin'] or 'g++'
    if which(host) is None:
        return '', 'sh: 1: {0}: not found\nnvcc fatal   : Failed to preprocess host compiler properties.\n'.format(
            host), 1
    if not opts['sources'] and not opts['objects']:
        return '', 'nvcc fatal   : No input files specified; use option --help for more information\n', 1
    include = opts['include'] + [os.path.join(cuda_home, 'include')]
    try:
        if opts['sources'] and not os.path.exists(_real(os.path.join(cuda_home, 'include', 'cuda_runtime.h'))):
            raise BuildFailure('<command-line>: fatal error: cuda_runtime.h: No such file or directory\n'
                               'compilation terminated.\n')
        libdirs = opts['libdirs'] + [os.path.join(cuda_home, 'lib64'), os.path.join(cuda_home, 'lib64', 'stubs')]
        opts['libs'] = ['cudart' if lib == 'cudart' else lib for lib in opts['libs']]
        compile_or_link(opts, include, libdirs, 'nvcc')
    except BuildFailure as failure:
        return '', failure.text, failure.rc
    return '', '', 0


def cmd_nvcc(args):
    """``gpu-double nvcc --cuda-version X.Y.Z --cuda-home DIR -- ARGS`` (the cuda-nvcc package's nvcc)."""
    version, home = '0.0.0', '/usr/local/cuda'
    while args and args[0] in ('--cuda-version', '--cuda-home') and len(args) > 1:
        if args[0] == '--cuda-version':
            version = args[1]
        else:
            home = args[1]
        args = args[2:]
    if args[:1] == ['--']:
        args = args[1:]
    out, err, rc = nvcc(args, version, home)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


# ---------------------------------------------------------------- c++

def cxx(args):
    if args in (['--version'], ['-v']):
        return 'c++ (simulated fleet) stand-in\n', '', 0
    opts = parse_cc_args(args)
    if not opts['sources'] and not opts['objects']:
        return '', 'c++: fatal error: no input files\ncompilation terminated.\n', 1
    try:
        compile_or_link(opts, opts['include'], opts['libdirs'], 'c++')
    except BuildFailure as failure:
        return '', failure.text, failure.rc
    return '', '', 0


def cmd_cxx(args):
    out, err, rc = cxx(args)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


# ---------------------------------------------------------------- cmake

CUDA_COMPILER_MISSING = """CMake Error at CMakeLists.txt:{line} (project):
  No CMAKE_CUDA_COMPILER could be found.

  Tell CMake where to find the compiler by setting either the environment
  variable "CUDACXX" or the CMake cache entry CMAKE_CUDA_COMPILER to the full
  path to the compiler, or to the compiler name if it is in the PATH.


"""
CXX_COMPILER_MISSING = """CMake Error at CMakeLists.txt:{line} (project):
  No CMAKE_CXX_COMPILER could be found.

  Tell CMake where to find the compiler by setting either the environment
  variable "CXX" or the CMake cache entry CMAKE_CXX_COMPILER to the full path
  to the compiler, or to the compiler name if it is in the PATH.


"""
BOOST_MISSING = """CMake Error at /usr/share/cmake/Modules/FindPackageHandleStandardArgs.cmake:230 (message):
  Could NOT find Boost (missing: program_options)
Call Stack (most recent call first):
  CMakeLists.txt:{line} (find_package)


"""


def _version_tuple(text):
    return tuple(int(p) for p in re.findall(r'\d+', text)[:3])


def cmake(args, cwd):
    """(stdout, stderr, rc) of ``cmake [-DVAR=VALUE ...] <source dir>`` run in cwd (the build folder)."""
    if args == ['--version']:
        return ('cmake version {0}\n\nCMake suite maintained and supported by Kitware (kitware.com/cmake).\n'.format(
            CMAKE_VERSION)), '', 0
    defines = {}
    source = None
    for arg in args:
        if arg.startswith('-D') and '=' in arg:
            key, value = arg[2:].split('=', 1)
            defines[key.split(':')[0]] = value
        elif not arg.startswith('-'):
            source = arg
    if source is None:
        return '', 'CMake Error: The source directory "{0}" does not exist.\n'.format(cwd), 1
    source = os.path.normpath(os.path.join(cwd, source))
    try:
        with open(_real(os.path.join(source, 'CMakeLists.txt'))) as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError):
        return '', ('CMake Error: The source directory "{0}" does not appear to contain CMakeLists.txt.\n'
                    'Specify --help for usage, or press the help button on the CMake GUI.\n'.format(source)), 1
    out = []
    languages, project_line, boost_line, sources = [], 1, None, []
    for number, line in enumerate(lines, 1):
        match = re.match(r'\s*cmake_minimum_required\(VERSION ([0-9.]+)', line)
        if match and _version_tuple(match.group(1)) > _version_tuple(CMAKE_VERSION):
            return '', ('CMake Error at CMakeLists.txt:{0} (cmake_minimum_required):\n  CMake {1} or higher is '
                        'required.  You are running version {2}\n\n\n-- Configuring incomplete, errors occurred!\n'
                        .format(number, match.group(1), CMAKE_VERSION)), 1
        match = re.match(r'\s*project\(\s*\S+(.*)$', line)
        if match:
            project_line = number
            rest = ' '.join([match.group(1)] + lines[number:number + 2])
            languages = re.findall(r'\b(CUDA|CXX)\b', rest.split(')', 1)[0])
        if re.match(r'\s*find_package\(Boost\b.*program_options', line):
            boost_line = number
        match = re.match(r'\s*(\S+\.(?:cu|cpp))\s*$', line)
        if match:
            sources.append(match.group(1))
    cuda = defines.get('CMAKE_CUDA_COMPILER') or os.environ.get('CUDACXX') or which('nvcc')
    if 'CUDA' in languages and (not cuda or which(cuda) is None):
        return '', CUDA_COMPILER_MISSING.format(line=project_line) + '-- Configuring incomplete, errors occurred!\n', 1
    cxx_path = defines.get('CMAKE_CXX_COMPILER') or os.environ.get('CXX') or which('c++') or which('g++')
    if 'CXX' in languages and (not cxx_path or which(cxx_path) is None):
        return '', CXX_COMPILER_MISSING.format(line=project_line) + '-- Configuring incomplete, errors occurred!\n', 1
    out.append('-- The CUDA compiler identification is NVIDIA')
    out.append('-- The CXX compiler identification is GNU')
    static_boost = None
    if boost_line:
        header = '/usr/include/boost/program_options.hpp'
        if not os.path.exists(_real(header)):
            return '\n'.join(out) + '\n', BOOST_MISSING.format(line=boost_line) + \
                '-- Configuring incomplete, errors occurred!\n', 1
        # FindBoost looks where the library is; nvbandwidth's CMakeLists.txt links it statically unless the
        # os-release names Fedora (NVIDIA/nvbandwidth issue #4)
        libdir = next((d for d in ('/usr/lib/x86_64-linux-gnu', '/usr/lib64')
                       for ext in ('so', 'a') if os.path.exists(_real(d + '/libboost_program_options.' + ext))),
                      None)
        if libdir is None:
            return '\n'.join(out) + '\n', BOOST_MISSING.format(line=boost_line) + \
                '-- Configuring incomplete, errors occurred!\n', 1
        fedora = re.search(r'^ID=.*fedora', _read('/etc/os-release'), re.M)
        static_boost = None if fedora else os.path.join(libdir, 'libboost_program_options.a')
        out.append('-- Found Boost: /usr/include (found version "{0}") found components: program_options'.format(
            _read('/usr/include/boost/version.hpp').strip().split()[-1] if _read('/usr/include/boost/version.hpp')
            else '1.83.0'))
    out += ['-- Configuring done', '-- Generating done', '-- Build files have been written to: {0}'.format(cwd)]
    cuda_home = os.path.dirname(os.path.dirname(cuda))
    objects = []
    rules = []
    for src in sources:
        obj = 'CMakeFiles/{0}.o'.format(os.path.basename(src))
        objects.append(obj)
        compiler = cuda if src.endswith('.cu') else cxx_path
        rules.append('{0}: {1}\n\t@mkdir -p CMakeFiles\n\t{2} -c {1} -o {0} -I{3} -I{4}/include\n'.format(
            obj, os.path.join(source, src), compiler, source, cuda_home))
    target = 'nvbandwidth'
    deps = ' '.join(objects + ([static_boost] if static_boost else []))
    makefile = ('# Generated by the simulated fleet\'s cmake stand-in from {0}/CMakeLists.txt\n'
                'all: {1}\n\n{1}: {2}\n\t{3} -o {1} {4} {5} -L{6}/lib64 -L{6}/lib64/stubs -lnvidia-ml -lcuda\n\n'
                '{7}\n'.format(source, target, deps, cxx_path, ' '.join(objects),
                               static_boost or '-lboost_program_options', cuda_home, '\n'.join(rules)))
    write_file(os.path.join(cwd, 'Makefile'), makefile)
    write_file(os.path.join(cwd, 'CMakeCache.txt'), 'CMAKE_CUDA_COMPILER:FILEPATH={0}\nCMAKE_CXX_COMPILER:FILEPATH='
               '{1}\n'.format(cuda, cxx_path))
    return '\n'.join(out) + '\n', '', 0


def cmd_cmake(args):
    out, err, rc = cmake(args, os.getcwd())
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc

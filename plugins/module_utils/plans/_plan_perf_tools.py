# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The perf_tools role's settings and its plan (see _plan.py for the plan's shape): the performance tools a fitness
gate runs on a GPU node, obtained the way a site gets them.  Opt-in (``nodeprep_perf_tools_install``).

* ``all_reduce_perf`` of NVIDIA/nccl-tests, built from its release tarball with its own Makefile (``make MPI=0
  CUDA_HOME=<toolkit> BUILDDIR=<dir> [NVCC_GENCODE=...]``: README.md and src/common.mk of nccl-tests) against NCCL
  from NVIDIA's CUDA repository (``libnccl``/``libnccl-devel`` on EL, ``libnccl2``/``libnccl-dev`` on Debian and
  Ubuntu, at ``<version>+cuda<X.Y>``: NVIDIA/nccl pkg/redhat/nccl.spec.in and pkg/debian/control.in);
* ``nvbandwidth`` of NVIDIA/nvbandwidth, built from its release tarball with CMake (``cmake`` with
  ``CMAKE_CUDA_COMPILER``, then ``make``: its README.md and CMakeLists.txt, which needs CMake 3.20, a C++17 compiler,
  Boost program_options - linked statically except on Fedora, NVIDIA/nvbandwidth issue #4 - NVML and the CUDA driver
  API);
* or, per tool, a binary the site already has (``nodeprep_perf_tools_all_reduce_perf``,
  ``nodeprep_perf_tools_nvbandwidth``): nothing is built for it.

The CUDA toolkit is the one of the driver's CUDA version (nvidia-smi's ``CUDA Version``; the toolkit of that
version is the newest the loaded driver runs) unless ``nodeprep_perf_tools_cuda_version`` names another, installed
from NVIDIA's CUDA repository (the one the nvidia_driver role configures) as its parts only: ``cuda-nvcc-X-Y``,
``cuda-cudart-devel-X-Y`` (Debian ``-dev``), and for nvbandwidth ``cuda-driver-devel-X-Y`` and ``cuda-nvml-devel-X-Y``
(package names as NVIDIA's repositories carry them; tests/testbed/REALITY.md "Performance tools").  The compiler,
make, CMake and Boost come from the distribution; on EL, Boost's static library (``boost-static``) is in CRB
(PowerTools on EL 8), enabled for that one package.

Every tool is linked as ``<prefix>/bin/<tool>``: the path :func:`binaries` returns, for the checks that run them.
A build lives in a folder named after what it was built from (tool version, CUDA version, NCCL version,
architectures), so a change of any of them builds again, and a node that has its tools runs no task.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import posixpath
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._driver_packages import family_of
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._os_release import os_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._package_db import version_text

ROLE = 'perf_tools'
# The readiness check of the role's work: each tool built (or given) and linked where the performance gates run it.
CHECK = 'perf.tools'
CHECKS = (CHECK,)
PREFIX = 'nodeprep_perf_tools_'
TOOLS = ('all_reduce_perf', 'nvbandwidth')
# What each tool is built from: the source tree's name (GitHub's release archive: <repository>-<tag without v>) and
# the file that shows it was unpacked.
SOURCES = {'all_reduce_perf': {'name': 'nccl-tests', 'marker': 'Makefile'},
           'nvbandwidth': {'name': 'nvbandwidth', 'marker': 'CMakeLists.txt'}}
# The NCCL build NVIDIA publishes of the default NCCL for each CUDA major (libnccl2 2.27.7-1+cuda12.9 and
# +cuda13.0 in public apt/dnf transcripts: tests/testbed/REALITY.md "Performance tools").
NCCL_CUDA_BUILD = {12: '12.9', 13: '13.0'}
# Where Boost's static library is on EL (CentOS Stream 9 and Rocky: boost-static in CRB; EL 8: PowerTools).
EL_BOOST_STATIC_REPO = {'8': 'powertools', '9': 'crb', '10': 'crb'}

_VERSION_RE = re.compile(r'^[0-9]+(\.[0-9]+){1,3}$')
_NCCL_RE = re.compile(r'^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+$')
_CUDA_RE = re.compile(r'^([0-9]+)\.([0-9]+)$')
_ARCH_RE = re.compile(r'^[0-9]{2,3}[af]?$')
_URL_RE = re.compile(r'^(https?|ftp|file)://\S+$')
_CHECKSUM_RE = re.compile(r'^(md5|sha1|sha224|sha256|sha384|sha512):[0-9a-fA-F]+$')
_PATH_RE = re.compile(r'^/[^\s]*$')

SETTINGS = {
    PREFIX + 'install': {
        'type': 'bool', 'default': False,
        'description': 'Install the performance tools (nccl-tests all_reduce_perf, nvbandwidth) and what builds them. '
                       'V(false) leaves the node alone.'},
    PREFIX + 'tools': {
        'type': 'list', 'elements': 'str', 'default': list(TOOLS), 'choices': list(TOOLS),
        'description': 'The tools to provide.'},
    PREFIX + 'prefix': {
        'type': 'path', 'default': '/opt/nodeprep/perf',
        'description': 'Folder of the sources (C(src/)), the builds (C(build/)) and the links to the tools (C(bin/)).'},
    PREFIX + 'cuda_version': {
        'type': 'str', 'default': '',
        'description': "The CUDA toolkit that builds the tools, such as V(12.8). V('') takes the driver's CUDA "
                       "version (nvidia-smi's C(CUDA Version))."},
    PREFIX + 'nccl_version': {
        'type': 'str', 'default': '2.27.7-1',
        'description': 'The NCCL packages nccl-tests is built and run with (version-release of NVIDIA\'s packages).'},
    PREFIX + 'nccl_cuda': {
        'type': 'str', 'default': '',
        'description': "The CUDA build of those NCCL packages (the C(+cudaX.Y) of their version). V('') takes the one "
                       'NVIDIA publishes for the CUDA major of the toolkit (12.9 for CUDA 12, 13.0 for CUDA 13).'},
    PREFIX + 'nccl_tests_version': {
        'type': 'str', 'default': '2.17.9',
        'description': 'The nccl-tests release (its tag without the v).'},
    PREFIX + 'nccl_tests_url': {
        'type': 'str', 'default': 'https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v{version}.tar.gz',
        'description': 'Where the nccl-tests release tarball is downloaded from; C({version}) is replaced by the '
                       'version. Its top folder must be C(nccl-tests-<version>) (GitHub\'s release archives).'},
    PREFIX + 'nccl_tests_checksum': {
        'type': 'str', 'default': '',
        'description': "The tarball's checksum (V(sha256:<hex>)), verified by the download. V('') verifies nothing."},
    PREFIX + 'nvbandwidth_version': {
        'type': 'str', 'default': '0.8',
        'description': 'The nvbandwidth release (its tag without the v).'},
    PREFIX + 'nvbandwidth_url': {
        'type': 'str', 'default': 'https://github.com/NVIDIA/nvbandwidth/archive/refs/tags/v{version}.tar.gz',
        'description': 'Where the nvbandwidth release tarball is downloaded from; C({version}) is replaced by the '
                       'version. Its top folder must be C(nvbandwidth-<version>).'},
    PREFIX + 'nvbandwidth_checksum': {
        'type': 'str', 'default': '',
        'description': "The tarball's checksum (V(sha256:<hex>)), verified by the download. V('') verifies nothing."},
    PREFIX + 'cuda_architectures': {
        'type': 'list', 'elements': 'str', 'default': [],
        'description': "The GPU architectures to build for (V(90) Hopper, V(100) Blackwell). V([]) keeps each tool's "
                       'own choice (nccl-tests: its list for the CUDA version; nvbandwidth: the GPUs it finds).'},
    PREFIX + 'all_reduce_perf': {
        'type': 'path', 'default': '',
        'description': "The path of an all_reduce_perf the site already has: linked, nothing built. V('') builds "
                       'nccl-tests.'},
    PREFIX + 'nvbandwidth': {
        'type': 'path', 'default': '',
        'description': "The path of an nvbandwidth the site already has: linked, nothing built. V('') builds "
                       'nvbandwidth.'},
}


# ---------------------------------------------------------------- settings

def check_settings(plan, settings):
    def get(name):
        return settings[PREFIX + name]

    prefix = get('prefix') or ''
    if not _PATH_RE.match(prefix) or posixpath.normpath(prefix) in ('/', '/usr', '/etc') or '..' in prefix.split('/'):
        _plan.add_problem(plan, PREFIX + 'prefix', prefix, 'an absolute folder of its own, such as /opt/nodeprep/perf')
    if get('cuda_version') and not _CUDA_RE.match(get('cuda_version')):
        _plan.add_problem(plan, PREFIX + 'cuda_version', get('cuda_version'),
                          "a CUDA version X.Y such as 12.8, or '' for the driver's")
    if not _NCCL_RE.match(get('nccl_version') or ''):
        _plan.add_problem(plan, PREFIX + 'nccl_version', get('nccl_version'),
                          "NVIDIA's NCCL package version-release such as 2.27.7-1")
    if get('nccl_cuda') and not _CUDA_RE.match(get('nccl_cuda')):
        _plan.add_problem(plan, PREFIX + 'nccl_cuda', get('nccl_cuda'),
                          "the CUDA build of the NCCL packages such as 12.9, or '' for the one of the CUDA major")
    for tool, source in (('nccl_tests', 'nccl-tests'), ('nvbandwidth', 'nvbandwidth')):
        if not _VERSION_RE.match(get(tool + '_version') or ''):
            _plan.add_problem(plan, PREFIX + tool + '_version', get(tool + '_version'),
                              'a {0} release such as {1}'.format(source, SETTINGS[PREFIX + tool + '_version']['default']))
        url = get(tool + '_url') or ''
        if not _URL_RE.match(url) or url.replace('{version}', '').count('{') or '}' in url.replace('{version}', ''):
            _plan.add_problem(plan, PREFIX + tool + '_url', url,
                              'an http(s), ftp or file URL, with {version} where the version goes')
        checksum = get(tool + '_checksum')
        if checksum and not _CHECKSUM_RE.match(checksum):
            _plan.add_problem(plan, PREFIX + tool + '_checksum', checksum,
                              "<algorithm>:<hex> such as sha256:<64 hex digits>, or ''")
    bad = [a for a in get('cuda_architectures') or [] if not _ARCH_RE.match(str(a))]
    if bad:
        _plan.add_problem(plan, PREFIX + 'cuda_architectures', get('cuda_architectures'),
                          'compute capabilities without the dot, such as 90 (Hopper) or 100 (Blackwell)')
    for tool in TOOLS:
        path = get(tool)
        if path and (not _PATH_RE.match(path) or path.endswith('/')):
            _plan.add_problem(plan, PREFIX + tool, path, "the absolute path of an executable, or '' to build it")


def _prefix(settings):
    return posixpath.normpath(settings[PREFIX + 'prefix'])


def binaries(settings):
    """{tool: path} where the role puts each tool it provides (``<prefix>/bin/<tool>``)."""
    bindir = posixpath.join(_prefix(settings), 'bin')
    return dict((tool, posixpath.join(bindir, tool)) for tool in settings[PREFIX + 'tools'])


def gate_paths(settings):
    """{tool: path} the performance gates of readiness run, for both tools: the site's own binary where its path is
    given (``nodeprep_perf_tools_<tool>``; the role links it, so it is the same program), else the role's link
    ``<prefix>/bin/<tool>`` (whether or not this run's inventory installs the tools)."""
    bindir = posixpath.join(_prefix(settings), 'bin')
    return dict((tool, settings[PREFIX + tool] or posixpath.join(bindir, tool)) for tool in TOOLS)


def source_paths(settings, tool):
    """{tarball, tree, marker, url} of the release a tool is built from."""
    prefix = _prefix(settings)
    key = 'nccl_tests' if tool == 'all_reduce_perf' else 'nvbandwidth'
    version = settings[PREFIX + key + '_version']
    name = '{0}-{1}'.format(SOURCES[tool]['name'], version)
    tree = posixpath.join(prefix, 'src', name)
    return {'tarball': posixpath.join(prefix, 'src', name + '.tar.gz'), 'tree': tree,
            'marker': posixpath.join(tree, SOURCES[tool]['marker']),
            'url': settings[PREFIX + key + '_url'].replace('{version}', version),
            'checksum': settings[PREFIX + key + '_checksum'] or '', 'version': version}


def gather(settings):
    request = _plan.new_gather()
    if not settings[PREFIX + 'install']:
        return request
    # OS, the installed packages (kernel_state.driver_node.packages, _driver_plan.keep_package) and the PCI scan come
    # with the kernel subset; the driver's CUDA version with the nvidia subset.
    request['subsets'] = ['kernel', 'nvidia']
    prefix = _prefix(settings)
    files = [prefix, posixpath.join(prefix, 'src'), posixpath.join(prefix, 'build'), posixpath.join(prefix, 'bin')]
    for tool in settings[PREFIX + 'tools']:
        files.append(binaries(settings)[tool])
        given = settings[PREFIX + tool]
        if given:
            files.append(given)
            continue
        paths = source_paths(settings, tool)
        files += [paths['tarball'], paths['marker'], posixpath.join(prefix, 'build', '*', tool)]
    request['files'] = files
    return request


# ---------------------------------------------------------------- the node

def cuda_version(facts, settings):
    """((major, minor), why) of the toolkit that builds; (None, why not)."""
    given = settings[PREFIX + 'cuda_version']
    if given:
        match = _CUDA_RE.match(given)
        return (int(match.group(1)), int(match.group(2))), PREFIX + 'cuda_version'
    nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
    match = _CUDA_RE.match(str(nvidia.get('cuda_version') or ''))
    if match:
        return (int(match.group(1)), int(match.group(2))), 'nvidia-smi: CUDA Version {0}'.format(
            nvidia['cuda_version'])
    return None, 'nvidia-smi: {0}'.format(nvidia.get('error') or 'no CUDA version')


def installed_packages(facts):
    """{name: 'version-release'} of the installed packages the gather kept (kernel_state.driver_node.packages)."""
    state = facts.get('kernel_state') if isinstance(facts.get('kernel_state'), dict) else {}
    node = state.get('driver_node') if isinstance(state.get('driver_node'), dict) else {}
    records = node.get('packages') if isinstance(node.get('packages'), dict) else {}
    return dict((name, version_text(found[-1])) for name, found in records.items() if found)


def package_names(family, cuda, build):
    """[(name, wanted version or None, repository or None)] the builds of ``build`` (tools) need on ``family``."""
    dash = '{0}-{1}'.format(*cuda)
    dev = 'devel' if family == 'el' else 'dev'
    names = []
    if build:
        names += ['cuda-nvcc-' + dash, 'cuda-cudart-{0}-{1}'.format(dev, dash), 'make',
                  'gcc-c++' if family == 'el' else 'g++']
    if 'nvbandwidth' in build:
        names += ['cuda-driver-{0}-{1}'.format(dev, dash), 'cuda-nvml-{0}-{1}'.format(dev, dash), 'cmake']
        names += ['boost-devel', 'boost-static'] if family == 'el' else ['libboost-program-options-dev']
    return names


def nccl_packages(family):
    return ('libnccl', 'libnccl-devel') if family == 'el' else ('libnccl2', 'libnccl-dev')


def package_spec(family, name, version):
    if version is None:
        return name
    return '{0}-{1}'.format(name, version) if family == 'el' else '{0}={1}'.format(name, version)


def _file(facts, path):
    files = facts.get('nodeprep_files') if isinstance(facts.get('nodeprep_files'), dict) else {}
    return files.get(path)


def _exists(facts, path, kind=None):
    """Whether ``path`` was seen (a glob's match is in nodeprep_files only when it exists)."""
    state = _file(facts, path)
    return bool(state and state.get('exists') and (kind is None or state.get('type') == kind))


def build_dir(settings, tool, cuda, nccl):
    """The folder a build lives in, named after what it is built from."""
    paths = source_paths(settings, tool)
    parts = ['{0}-{1}'.format(SOURCES[tool]['name'], paths['version']), 'cuda{0}.{1}'.format(*cuda)]
    if tool == 'all_reduce_perf':
        parts.append('nccl' + nccl)
    archs = settings[PREFIX + 'cuda_architectures']
    if archs:
        parts.append('sm' + '-'.join(str(a) for a in archs))
    return posixpath.join(_prefix(settings), 'build', '_'.join(parts))


def gencode(archs):
    """NVCC_GENCODE of nccl-tests for the architectures (src/common.mk: -gencode=arch=compute_N,code=sm_N)."""
    return ' '.join('-gencode=arch=compute_{0},code=sm_{0}'.format(a) for a in archs)


def build_steps(settings, tool, cuda, nccl, facts):
    """The steps that bring one tool to be: download, unpack, configure, build (argv lists), each None when not
    needed, and the binary."""
    paths = source_paths(settings, tool)
    out_dir = build_dir(settings, tool, cuda, nccl)
    binary = posixpath.join(out_dir, tool)
    cuda_home = '/usr/local/cuda-{0}.{1}'.format(*cuda)
    archs = [str(a) for a in settings[PREFIX + 'cuda_architectures'] or []]
    built = _exists(facts, binary, 'file')
    unpacked = _exists(facts, paths['marker'], 'file')
    step = {'tool': tool, 'binary': binary, 'build_dir': out_dir, 'download': None, 'unpack': None,
            'configure': None, 'build': None, 'reasons': []}
    if built:
        return step
    step['reasons'].append('{0}: not built ({1} is missing)'.format(tool, binary))
    if not unpacked and not _exists(facts, paths['tarball'], 'file'):
        step['download'] = {'url': paths['url'], 'dest': paths['tarball'], 'checksum': paths['checksum']}
    if not unpacked:
        step['unpack'] = {'src': paths['tarball'], 'dest': posixpath.dirname(paths['tree']),
                          'creates': paths['marker']}
    if tool == 'all_reduce_perf':
        argv = ['make', '-C', paths['tree'], 'MPI=0', 'CUDA_HOME=' + cuda_home, 'BUILDDIR=' + out_dir]
        if archs:
            argv.append('NVCC_GENCODE=' + gencode(archs))
        step['build'] = {'argv': argv, 'chdir': paths['tree']}
    else:
        argv = ['cmake', '-DCMAKE_BUILD_TYPE=Release', '-DCMAKE_CUDA_COMPILER={0}/bin/nvcc'.format(cuda_home)]
        if archs:
            argv.append('-DCMAKE_CUDA_ARCHITECTURES=' + ';'.join(archs))
        step['configure'] = {'argv': argv + [paths['tree']], 'chdir': out_dir}
        step['build'] = {'argv': ['make'], 'chdir': out_dir}
    return step


# ---------------------------------------------------------------- the plan

def plan(facts, settings, context):
    out = _plan_work(facts, settings, context)
    _judge(out, settings)
    return out


def _judge(out, settings):
    """perf.tools: the role's work is its drift (a run fixes it), what stops the role on the node is drift no run
    fixes; skipped where the role installs nothing (or the node has no GPU).  Settings that cannot be used fail it
    (readiness plan_check reads the plan's problems)."""
    if not settings[PREFIX + 'install']:
        _plan.set_check(out, CHECK, 'not managed (nodeprep_perf_tools_install is false)',
                        skip='not managed: nodeprep_perf_tools_install is false')
        return
    if out['problems']:
        _plan.set_check(out, CHECK, 'the performance tools built (or given) and linked under '
                                    'nodeprep_perf_tools_prefix')
        return
    tools = [t for t in TOOLS if t in settings[PREFIX + 'tools']]
    links = binaries(settings)
    expected = '{0} built (or given) and linked at {1}'.format(', '.join(tools), ', '.join(links[t] for t in tools))
    for reason in out['reasons']:
        _plan.add_drift(out, CHECK, reason)
    for error in out['errors']:
        _plan.add_drift(out, CHECK, error, fixable=False)
    reports = [r for r in out['reports'] if r.startswith('The performance tools are not installed on')]
    if reports:
        _plan.set_check(out, CHECK, expected, skip=reports[0])
        return
    _plan.set_check(out, CHECK, expected, '' if out['drift'] else 'in place: {0}'.format(', '.join(
        '{0} -> {1}'.format(links[t], settings[PREFIX + t] or 'the build') for t in tools)))


def _plan_work(facts, settings, context):
    out = _plan.new_plan(ROLE)
    check_settings(out, settings)
    if out['problems'] or not settings[PREFIX + 'install']:
        return out
    host = context.get('host') or 'this node'
    pci = ((facts.get('kernel_state') or {}).get('pci') or {}) if isinstance(facts.get('kernel_state'), dict) else {}
    if pci.get('gpu_count') == 0:
        out['reports'].append('The performance tools are not installed on {0}: no NVIDIA GPU on its PCI bus.'.format(
            host))
        return out
    osf = os_facts(facts)
    family = family_of(osf)
    if family not in ('el', 'debian'):
        out['errors'].append('perf_tools on {0}: the OS family {1} is not one the role installs on (allowed: EL '
                             '8/9/10, Debian and Ubuntu).'.format(host, osf.get('os_family')))
        return out
    tools = [t for t in TOOLS if t in settings[PREFIX + 'tools']]
    build = [t for t in tools if not settings[PREFIX + t]]
    prefix = _prefix(settings)
    out['args'] = {'family': family, 'prefix': prefix, 'binaries': binaries(settings), 'predict': False,
                   'packages': [], 'packages_crb': None, 'steps': [], 'links': []}
    cuda, why = cuda_version(facts, settings)
    if cuda is None and build:
        if not (context.get('check_mode') and context.get('driver_pending') is not None):
            out['errors'].append('perf_tools on {0}: cannot tell which CUDA toolkit builds {1} ({2}); set '
                                 'nodeprep_perf_tools_cuda_version (such as 12.8).'.format(host, ', '.join(build), why))
            return out
        # Check mode before the driver this run installs is loaded: the toolkit (so the package names and the build
        # folders) is not known yet; every step is planned by name, the tasks a real run changes predicted.
        out['reports'].append('Check mode on {0}: the tools are built with the CUDA toolkit of the driver this run '
                              'installs; it is chosen once that driver is loaded.'.format(host))
        out['args']['predict'] = True
        cuda = ('X', 'Y')
        why = 'the driver installed in this run'

    # the packages
    installed = installed_packages(facts)
    wanted = []
    if build:
        out['args']['cuda_home'] = '/usr/local/cuda-{0}.{1}'.format(*cuda)
        out['args']['cuda_from'] = why
        wanted = [(name, None) for name in package_names(family, cuda, build)]
    nccl = None
    if 'all_reduce_perf' in build:
        fallback = 'X.Y' if out['args']['predict'] else None
        nccl_cuda = settings[PREFIX + 'nccl_cuda'] or NCCL_CUDA_BUILD.get(cuda[0], fallback)
        if not nccl_cuda:
            out['errors'].append('perf_tools on {0}: NVIDIA publishes no NCCL build known to the role for CUDA {1}.{2} '
                                 '({3}); set nodeprep_perf_tools_nccl_cuda (the +cudaX.Y of the NCCL packages).'.format(
                                     host, cuda[0], cuda[1], why))
            return out
        nccl = '{0}+cuda{1}'.format(settings[PREFIX + 'nccl_version'], nccl_cuda)
        wanted += [(name, nccl) for name in nccl_packages(family)]
    for name, version in wanted:
        have = installed.get(name)
        if have is not None and (version is None or have == version):
            continue
        reason = '{0} is {1}'.format(name, 'not installed' if have is None else '{0}, wanted {1}'.format(have, version))
        out['reasons'].append('install: ' + reason)
        if name == 'boost-static':
            out['args']['packages_crb'] = {'name': name, 'repo': EL_BOOST_STATIC_REPO.get(
                osf.get('distribution_major_version'), 'crb')}
        else:
            out['args']['packages'].append(package_spec(family, name, version))

    # the folders
    dirs = [prefix, posixpath.join(prefix, 'src'), posixpath.join(prefix, 'build'), posixpath.join(prefix, 'bin')]
    for path in dirs:
        _plan.want_path(out, facts, path, state='directory', mode='0755')

    # each tool: built (or given), then linked as <prefix>/bin/<tool>
    for tool in tools:
        given = settings[PREFIX + tool]
        if given:
            state = _file(facts, given)
            if not (state and state.get('exists')):
                out['errors'].append('perf_tools on {0}: {1}{2}={3}: no such file there.'.format(
                    host, PREFIX, tool, given))
                continue
            target = given
        else:
            step = build_steps(settings, tool, cuda, nccl, facts)
            target = step['binary']
            if step['reasons']:
                out['reasons'].extend(step['reasons'])
                out['args']['steps'].append(step)
                if step['configure']:
                    _plan.want_path(out, facts, step['build_dir'], state='directory', mode='0755')
        link = _plan.want_path(out, facts, binaries(settings)[tool], state='link', src=target)
        if link['change']:
            out['args']['links'].append({'path': link['path'], 'src': target})
    out['args']['dirs'] = [entry['path'] for entry in out['files'] if entry['state'] == 'directory' and entry['change']]
    return out

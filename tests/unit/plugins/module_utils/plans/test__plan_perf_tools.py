# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The perf_tools role's decision table (plugins/module_utils/plans/_plan_perf_tools.py): facts + settings -> plan.
The package names and versions expected are written here from tests/testbed/REALITY.md ("Performance tools"), not
computed by the plan."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _driver_packages
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_perf_tools as p
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement

PREFIX = '/opt/nodeprep/perf'
ARP_BUILD = PREFIX + '/build/nccl-tests-2.17.9_cuda13.0_nccl2.27.7-1+cuda13.0'
NVB_BUILD = PREFIX + '/build/nvbandwidth-0.8_cuda13.0'
EL_BUILD_PACKAGES = ['cuda-nvcc-13-0', 'cuda-cudart-devel-13-0', 'make', 'gcc-c++', 'cuda-driver-devel-13-0',
                     'cuda-nvml-devel-13-0', 'cmake', 'boost-devel', 'libnccl-2.27.7-1+cuda13.0',
                     'libnccl-devel-2.27.7-1+cuda13.0']


def record(text):
    version, release = text.rsplit('-', 1) if '-' in text else (text, '')
    epoch = 0
    if ':' in version:
        epoch, version = version.split(':')
    return [{'epoch': int(epoch), 'version': version, 'release': release, 'arch': 'x86_64'}]


def facts(family='el', major='9', cuda='13.0', packages=None, files=None, gpus=8, patterns=None):
    os_info = ({'os_family': 'RedHat', 'distribution_major_version': major, 'distribution': 'Rocky'}
               if family == 'el' else {'os_family': 'Debian', 'distribution_major_version': '24',
                                       'distribution': 'Ubuntu'})
    records = {'nvidia-open': record('3:580.95.05-1.el9')}
    for name, text in (packages or {}).items():
        records[name] = record(text)
    return {
        'nodeprep_gathered': ['kernel', 'nvidia', 'files'],
        'kernel_state': {'os': os_info, 'pci': {'gpu_count': gpus}, 'driver_node': {'packages': records}},
        'nvidia': ({'present': True, 'cuda_version': cuda, 'driver_version': '580.95.05', 'gpus': []} if cuda else
                   {'present': False, 'error': 'nvidia-smi not found', 'cuda_version': None, 'gpus': []}),
        'nodeprep_files': dict(files or {}),
        'nodeprep_file_patterns': list(patterns if patterns is not None else
                                       [PREFIX + '/build/*/all_reduce_perf', PREFIX + '/build/*/nvbandwidth']),
    }


def missing():
    return {'exists': False}


def directory():
    return {'exists': True, 'type': 'directory', 'mode': '0755', 'uid': 0, 'gid': 0}


def regular():
    return {'exists': True, 'type': 'file', 'mode': '0755', 'uid': 0, 'gid': 0, 'sha1': None}


def link(target):
    return {'exists': True, 'type': 'link', 'target': target, 'uid': 0, 'gid': 0}


def fresh_files():
    """Every fixed path the gather asks for, missing (the globs match nothing)."""
    out = dict((path, missing()) for path in (
        PREFIX, PREFIX + '/src', PREFIX + '/build', PREFIX + '/bin', PREFIX + '/bin/all_reduce_perf',
        PREFIX + '/bin/nvbandwidth', PREFIX + '/src/nccl-tests-2.17.9.tar.gz', PREFIX + '/src/nccl-tests-2.17.9/Makefile',
        PREFIX + '/src/nvbandwidth-0.8.tar.gz', PREFIX + '/src/nvbandwidth-0.8/CMakeLists.txt'))
    return out


def converged_files():
    out = fresh_files()
    for path in (PREFIX, PREFIX + '/src', PREFIX + '/build', PREFIX + '/bin'):
        out[path] = directory()
    for path in (PREFIX + '/src/nccl-tests-2.17.9.tar.gz', PREFIX + '/src/nccl-tests-2.17.9/Makefile',
                 PREFIX + '/src/nvbandwidth-0.8.tar.gz', PREFIX + '/src/nvbandwidth-0.8/CMakeLists.txt',
                 ARP_BUILD + '/all_reduce_perf', NVB_BUILD + '/nvbandwidth'):
        out[path] = regular()
    out[PREFIX + '/bin/all_reduce_perf'] = link(ARP_BUILD + '/all_reduce_perf')
    out[PREFIX + '/bin/nvbandwidth'] = link(NVB_BUILD + '/nvbandwidth')
    return out


EL_INSTALLED = {'cuda-nvcc-13-0': '13.0.88-1', 'cuda-cudart-devel-13-0': '13.0.96-1', 'make': '4.3-8.el9',
                'gcc-c++': '11.5.0-5.el9_5', 'cuda-driver-devel-13-0': '13.0.96-1', 'cuda-nvml-devel-13-0': '13.0.87-1',
                'cmake': '3.26.5-2.el9', 'boost-devel': '1.75.0-8.el9', 'boost-static': '1.75.0-8.el9',
                'libnccl': '2.27.7-1+cuda13.0', 'libnccl-devel': '2.27.7-1+cuda13.0'}


def settings(**given):
    out = _plan.defaults(p)
    out['nodeprep_perf_tools_install'] = True
    out.update(('nodeprep_perf_tools_' + k, v) for k, v in given.items())
    return out


def plan(the_facts, the_settings, **context):
    return _plans.plan_role('perf_tools', the_facts, the_settings, [], _plan.new_context(host='gpu-a01', **context))


def test_off_by_default_gathers_and_does_nothing():
    off = _plan.defaults(p)
    assert off['nodeprep_perf_tools_install'] is False
    assert _plan.is_empty(p.gather(off))
    assert plan(facts(), off)['run'] == []


def test_fresh_el_node_installs_downloads_builds_and_links():
    out = plan(facts(files=fresh_files()), settings())
    args = out['args']
    assert (out['problems'], out['errors']) == ([], [])
    assert args['packages'] == EL_BUILD_PACKAGES
    assert args['packages_crb'] == {'name': 'boost-static', 'repo': 'crb'}
    assert args['cuda_home'] == '/usr/local/cuda-13.0' and args['cuda_from'] == 'nvidia-smi: CUDA Version 13.0'
    assert args['dirs'] == [PREFIX, PREFIX + '/src', PREFIX + '/build', PREFIX + '/bin', NVB_BUILD]
    arp, nvb = args['steps']
    assert arp['download'] == {'url': 'https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.17.9.tar.gz',
                               'dest': PREFIX + '/src/nccl-tests-2.17.9.tar.gz', 'checksum': ''}
    assert arp['unpack'] == {'src': PREFIX + '/src/nccl-tests-2.17.9.tar.gz', 'dest': PREFIX + '/src',
                             'creates': PREFIX + '/src/nccl-tests-2.17.9/Makefile'}
    # nccl-tests' own Makefile (README.md: make CUDA_HOME=... ; MPI=0 single node; BUILDDIR of src/Makefile)
    assert arp['configure'] is None
    assert arp['build'] == {'argv': ['make', '-C', PREFIX + '/src/nccl-tests-2.17.9', 'MPI=0',
                                     'CUDA_HOME=/usr/local/cuda-13.0', 'BUILDDIR=' + ARP_BUILD],
                            'chdir': PREFIX + '/src/nccl-tests-2.17.9'}
    # nvbandwidth: CMake with the toolkit's nvcc, then make, out of the source tree
    assert nvb['configure'] == {'argv': ['cmake', '-DCMAKE_BUILD_TYPE=Release',
                                         '-DCMAKE_CUDA_COMPILER=/usr/local/cuda-13.0/bin/nvcc',
                                         PREFIX + '/src/nvbandwidth-0.8'], 'chdir': NVB_BUILD}
    assert nvb['build'] == {'argv': ['make'], 'chdir': NVB_BUILD}
    assert args['links'] == [{'path': PREFIX + '/bin/all_reduce_perf', 'src': ARP_BUILD + '/all_reduce_perf'},
                             {'path': PREFIX + '/bin/nvbandwidth', 'src': NVB_BUILD + '/nvbandwidth'}]
    assert 'install: cuda-nvcc-13-0 is not installed' in out['reasons']
    assert 'all_reduce_perf: not built ({0}/all_reduce_perf is missing)'.format(ARP_BUILD) in out['reasons']


def test_converged_node_runs_nothing():
    out = plan(facts(packages=EL_INSTALLED, files=converged_files()), settings())
    assert (out['reasons'], out['run'], out['args']['steps'], out['args']['links'], out['args']['dirs']) == \
        ([], [], [], [], [])
    assert out['args']['binaries'] == {'all_reduce_perf': PREFIX + '/bin/all_reduce_perf',
                                       'nvbandwidth': PREFIX + '/bin/nvbandwidth'}


def test_debian_names_and_exact_nccl():
    out = plan(facts(family='debian', cuda='12.8', files=fresh_files()), settings())
    assert out['args']['packages'] == ['cuda-nvcc-12-8', 'cuda-cudart-dev-12-8', 'make', 'g++', 'cuda-driver-dev-12-8',
                                       'cuda-nvml-dev-12-8', 'cmake', 'libboost-program-options-dev',
                                       'libnccl2=2.27.7-1+cuda12.9', 'libnccl-dev=2.27.7-1+cuda12.9']
    assert out['args']['packages_crb'] is None


@pytest.mark.parametrize('major, repo', [('8', 'powertools'), ('9', 'crb'), ('10', 'crb')])
def test_boost_static_comes_from_crb_or_powertools(major, repo):
    out = plan(facts(major=major, files=fresh_files()), settings())
    assert out['args']['packages_crb'] == {'name': 'boost-static', 'repo': repo}


def test_nccl_at_another_version_is_replaced():
    installed = dict(EL_INSTALLED, libnccl='2.28.3-1+cuda13.0')
    out = plan(facts(packages=installed, files=converged_files()), settings())
    assert out['args']['packages'] == ['libnccl-2.27.7-1+cuda13.0']
    assert out['reasons'] == ['install: libnccl is 2.28.3-1+cuda13.0, wanted 2.27.7-1+cuda13.0']


def test_a_new_toolkit_is_a_new_build_and_the_link_moves():
    out = plan(facts(cuda='13.1', packages=EL_INSTALLED, files=converged_files()), settings())
    arp = out['args']['steps'][0]
    new = PREFIX + '/build/nccl-tests-2.17.9_cuda13.1_nccl2.27.7-1+cuda13.0'
    assert arp['build_dir'] == new and arp['download'] is None and arp['unpack'] is None
    assert {'path': PREFIX + '/bin/all_reduce_perf', 'src': new + '/all_reduce_perf'} in out['args']['links']
    assert 'install: cuda-nvcc-13-1 is not installed' in out['reasons']


def test_architectures_reach_both_builds():
    out = plan(facts(files=fresh_files()), settings(cuda_architectures=['90', '100']))
    arp, nvb = out['args']['steps']
    assert arp['build']['argv'][-1] == ('NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 '
                                        '-gencode=arch=compute_100,code=sm_100')
    assert arp['build_dir'].endswith('_sm90-100')
    assert '-DCMAKE_CUDA_ARCHITECTURES=90;100' in nvb['configure']['argv']


def test_a_downloaded_or_unpacked_source_is_not_fetched_again():
    files = fresh_files()
    files[PREFIX + '/src/nccl-tests-2.17.9.tar.gz'] = regular()
    files[PREFIX + '/src/nvbandwidth-0.8/CMakeLists.txt'] = regular()
    arp, nvb = plan(facts(files=files), settings(nccl_tests_checksum='sha256:' + 'a' * 64))['args']['steps']
    assert arp['download'] is None and arp['unpack']['src'] == PREFIX + '/src/nccl-tests-2.17.9.tar.gz'
    assert nvb['download'] is None and nvb['unpack'] is None


def test_the_checksum_and_a_mirror_url_reach_the_download():
    out = plan(facts(files=fresh_files()), settings(nvbandwidth_url='file:///srv/mirror/nvbandwidth-{version}.tgz',
                                                    nvbandwidth_checksum='sha256:' + 'b' * 64))
    assert out['args']['steps'][1]['download'] == {'url': 'file:///srv/mirror/nvbandwidth-0.8.tgz',
                                                   'dest': PREFIX + '/src/nvbandwidth-0.8.tar.gz',
                                                   'checksum': 'sha256:' + 'b' * 64}


def test_a_binary_the_site_has_is_linked_not_built():
    files = converged_files()
    files['/usr/local/bin/all_reduce_perf'] = regular()
    s = settings(all_reduce_perf='/usr/local/bin/all_reduce_perf', tools=['all_reduce_perf'])
    assert '/usr/local/bin/all_reduce_perf' in p.gather(s)['files']
    out = plan(facts(files=files), s)
    assert out['args']['steps'] == [] and out['args']['packages'] == []
    assert out['args']['links'] == [{'path': PREFIX + '/bin/all_reduce_perf', 'src': '/usr/local/bin/all_reduce_perf'}]
    assert out['args']['binaries'] == {'all_reduce_perf': PREFIX + '/bin/all_reduce_perf'}
    files['/usr/local/bin/all_reduce_perf'] = missing()
    out = plan(facts(files=files), s)
    assert out['errors'] == ['perf_tools on gpu-a01: nodeprep_perf_tools_all_reduce_perf=/usr/local/bin/all_reduce_perf: '
                             'no such file there.']


def test_only_nvbandwidth_needs_no_nccl():
    out = plan(facts(files=fresh_files()), settings(tools=['nvbandwidth']))
    assert not [name for name in out['args']['packages'] if 'nccl' in name]
    assert [step['tool'] for step in out['args']['steps']] == ['nvbandwidth']


def test_no_driver_fails_naming_the_setting():
    out = plan(facts(cuda=None, files=fresh_files()), settings())
    assert out['errors'] == ['perf_tools on gpu-a01: cannot tell which CUDA toolkit builds all_reduce_perf, '
                             'nvbandwidth (nvidia-smi: nvidia-smi not found); set nodeprep_perf_tools_cuda_version '
                             '(such as 12.8).']
    given = plan(facts(cuda=None, files=fresh_files()), settings(cuda_version='12.8'))
    assert given['errors'] == [] and given['args']['cuda_from'] == 'nodeprep_perf_tools_cuda_version'


def test_check_mode_with_the_driver_of_this_run_predicts_every_step():
    out = plan(facts(cuda=None, files=fresh_files()), settings(), check_mode=True, driver_pending={'persistenced': True})
    assert out['errors'] == [] and out['args']['predict'] is True
    assert [bool(s['download']) for s in out['args']['steps']] == [True, True]
    assert out['args']['packages_crb'] == {'name': 'boost-static', 'repo': 'crb'}
    assert out['reports'] == ['Check mode on gpu-a01: the tools are built with the CUDA toolkit of the driver this run '
                              'installs; it is chosen once that driver is loaded.']


def test_no_gpu_node_installs_nothing():
    out = plan(facts(gpus=0, files=fresh_files()), settings())
    assert out['reasons'] == [] and out['reports'] == [
        'The performance tools are not installed on gpu-a01: no NVIDIA GPU on its PCI bus.']


def test_unsupported_os():
    f = facts(files=fresh_files())
    f['kernel_state']['os'] = {'os_family': 'Suse', 'distribution_major_version': '15'}
    assert plan(f, settings())['errors'] == ['perf_tools on gpu-a01: the OS family Suse is not one the role installs '
                                             'on (allowed: EL 8/9/10, Debian and Ubuntu).']


@pytest.mark.parametrize('name, value, allowed', [
    ('prefix', 'opt/perf', 'an absolute folder of its own, such as /opt/nodeprep/perf'),
    ('prefix', '/', 'an absolute folder of its own, such as /opt/nodeprep/perf'),
    ('cuda_version', '13', "a CUDA version X.Y such as 12.8, or '' for the driver's"),
    ('nccl_version', '2.27.7', "NVIDIA's NCCL package version-release such as 2.27.7-1"),
    ('nccl_cuda', 'cuda12.9', "the CUDA build of the NCCL packages such as 12.9, or '' for the one of the CUDA major"),
    ('nccl_tests_version', 'v2.17.9', 'a nccl-tests release such as 2.17.9'),
    ('nvbandwidth_url', 'github.com/x.tar.gz', 'an http(s), ftp or file URL, with {version} where the version goes'),
    ('nvbandwidth_url', 'https://x/{tag}.tar.gz', 'an http(s), ftp or file URL, with {version} where the version goes'),
    ('nccl_tests_checksum', 'abc', "<algorithm>:<hex> such as sha256:<64 hex digits>, or ''"),
    ('cuda_architectures', ['sm_90'], 'compute capabilities without the dot, such as 90 (Hopper) or 100 (Blackwell)'),
    ('nvbandwidth', 'nvbandwidth', "the absolute path of an executable, or '' to build it"),
])
def test_bad_settings_are_refused_naming_the_value(name, value, allowed):
    out = plan(facts(files=fresh_files()), settings(**{name: value}))
    assert out['problems'] == ['nodeprep_perf_tools_{0}={1}: {2}'.format(name, _plan.show(value), allowed)]
    assert out['args'] == {} and out['reasons'] == []


def test_a_string_for_the_switch_is_typed_once():
    typed, problems = _plans.typed_settings('perf_tools', {'nodeprep_perf_tools_install': 'false',
                                                           'nodeprep_perf_tools_tools': 'nvbandwidth'})
    assert (typed['nodeprep_perf_tools_install'], typed['nodeprep_perf_tools_tools'], problems) == \
        (False, ['nvbandwidth'], [])
    typed, problems = _plans.typed_settings('perf_tools', {'nodeprep_perf_tools_tools': ['ib_write_bw']})
    assert len(problems) == 1 and 'nodeprep_perf_tools_tools' in problems[0] and 'ib_write_bw' in problems[0]


def test_the_gather_asks_for_what_the_plan_reads():
    request = p.gather(settings())
    assert request['subsets'] == ['kernel', 'nvidia']
    assert PREFIX + '/build/*/all_reduce_perf' in request['files']
    assert set(fresh_files()) <= set(request['files'])
    # the installed build packages come with the kernel subset's package list
    for name in EL_INSTALLED:
        assert _driver_packages.keep_package(name), name
    for name in ('cuda-cudart-dev-13-0', 'libnccl2', 'libnccl-dev', 'g++', 'libboost-program-options-dev'):
        assert _driver_packages.keep_package(name), name
    assert not _driver_packages.keep_package('cuda-toolkit-13-0')


def test_binaries_for_the_checks():
    assert p.binaries(settings(prefix='/opt/perf/')) == {'all_reduce_perf': '/opt/perf/bin/all_reduce_perf',
                                                         'nvbandwidth': '/opt/perf/bin/nvbandwidth'}


# ---------------------------------------------------------------------------------------------------------------------
# Agreement with readiness (tests/unit/plugins/module_utils/plans/agreement.py): the plan owns perf.tools; the role's
# work (packages, downloads, builds, links) is its fixable drift, what stops it on the node is drift no run fixes.

CONVERGED = facts(packages=EL_INSTALLED, files=converged_files())

# (name, facts, settings) -> (work, refuses, status of perf.tools)
AGREEMENT = [
    ('not managed', facts(files=fresh_files()), _plan.defaults(p), (False, False, 'skip')),
    ('fresh node: packages, sources and builds to make', facts(files=fresh_files()), settings(), (True, False, 'fail')),
    ('converged', CONVERGED, settings(), (False, False, 'pass')),
    ('converged, a link removed', facts(packages=EL_INSTALLED, files=dict(converged_files(), **{
        PREFIX + '/bin/nvbandwidth': missing()})), settings(), (True, False, 'fail')),
    ('converged, NCCL at another version', facts(packages=dict(EL_INSTALLED, libnccl='2.26.2-1+cuda12.8'),
                                                 files=converged_files()), settings(), (True, False, 'fail')),
    ("the site's binaries, linked", facts(files=dict(fresh_files(), **{
        '/usr/local/bin/all_reduce_perf': regular(), '/usr/local/bin/nvbandwidth': regular(),
        PREFIX: directory(), PREFIX + '/src': directory(), PREFIX + '/build': directory(), PREFIX + '/bin': directory(),
        PREFIX + '/bin/all_reduce_perf': link('/usr/local/bin/all_reduce_perf'),
        PREFIX + '/bin/nvbandwidth': link('/usr/local/bin/nvbandwidth')})),
     settings(all_reduce_perf='/usr/local/bin/all_reduce_perf', nvbandwidth='/usr/local/bin/nvbandwidth'),
     (False, False, 'pass')),
    ("a site binary that is not there", facts(files=dict(fresh_files(), **{'/usr/local/bin/all_reduce_perf': missing()})),
     settings(all_reduce_perf='/usr/local/bin/all_reduce_perf', tools=['all_reduce_perf']), (True, True, 'fail')),
    ('no driver: the CUDA toolkit cannot be told', facts(cuda=None, files=converged_files()), settings(),
     (False, True, 'fail')),
    ('a prefix that is not a folder of its own', facts(files=fresh_files()), settings(prefix='/usr'),
     (False, True, 'fail')),
    ('no NVIDIA GPU on the PCI bus', facts(gpus=0, files=fresh_files()), settings(), (False, False, 'skip')),
]


@pytest.mark.parametrize('name, the_facts, the_settings, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_readiness_agrees_with_the_plan(name, the_facts, the_settings, want):
    work, refuses, status = want
    agreement.assert_agrees(name, plan(the_facts, the_settings), p.CHECKS, work, refuses, {p.CHECK: status})


def test_the_roles_work_is_what_perf_tools_says():
    check = agreement.verdicts(plan(facts(packages=EL_INSTALLED, files=dict(converged_files(), **{
        PREFIX + '/bin/nvbandwidth': missing()})), settings()), p.CHECKS)[p.CHECK]
    assert check == ('fail', '/opt/nodeprep/perf/bin/nvbandwidth: missing')
    done = plan(CONVERGED, settings())
    assert done['checks'][p.CHECK] == {
        'expected': 'all_reduce_perf, nvbandwidth built (or given) and linked at /opt/nodeprep/perf/bin/all_reduce_perf, '
                    '/opt/nodeprep/perf/bin/nvbandwidth',
        'observed': 'in place: /opt/nodeprep/perf/bin/all_reduce_perf -> the build, /opt/nodeprep/perf/bin/nvbandwidth '
                    '-> the build', 'skip': None}


def test_the_gates_run_the_links_or_the_given_paths():
    assert p.gate_paths(_plan.defaults(p)) == {'all_reduce_perf': PREFIX + '/bin/all_reduce_perf',
                                               'nvbandwidth': PREFIX + '/bin/nvbandwidth'}
    assert p.gate_paths(settings(nvbandwidth='/usr/local/bin/nvbandwidth', tools=['all_reduce_perf'])) == {
        'all_reduce_perf': PREFIX + '/bin/all_reduce_perf', 'nvbandwidth': '/usr/local/bin/nvbandwidth'}

# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU double's fitness reads (nvidia-smi nvlink -s/-e, the XML a fitness fault changes) and its performance
tools (all_reduce_perf, nvbandwidth) and build toolchain, read back with the collection's own parsers; the figures
expected are written here from the profiles and REALITY.md, not computed by the double."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nccl_tests, _nvbandwidth, _nvlink
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _fitness_thresholds as T
from ansible_collections.gpufleet.nodeprep.tests.unit.testbed import test_gpu_double

import gpudouble as gd  # noqa: E402  (test_gpu_double put the double's lib on sys.path)
import perf_double  # noqa: E402
import toolchain_double  # noqa: E402

node = test_gpu_double.node  # the double's node fixture (a root with the double installed)

PROFILES = ['hgx-b200-8gpu', 'hgx-h100-8gpu', 'hgx-h200-8gpu', 'gb200-4gpu', 'gb300-4gpu']
GPUS = {'hgx-b200-8gpu': 8, 'hgx-h100-8gpu': 8, 'hgx-h200-8gpu': 8, 'gb200-4gpu': 4, 'gb300-4gpu': 4}
# nvlink -s speed per link: 26.562 GB/s in the H100 capture, 53.125 in the GB200 one (REALITY.md)
SPEED = {'hgx-b200-8gpu': 53.125, 'hgx-h100-8gpu': 26.562, 'hgx-h200-8gpu': 26.562, 'gb200-4gpu': 53.125,
         'gb300-4gpu': 53.125}


def xml_gpus(node):  # noqa: F811
    out, rc = node.smi('-q', '-x')
    assert rc == 0, out
    return parse_nvsmi_xml(out)['gpus']


def nccl_lib(node, where='usr/lib64'):  # noqa: F811
    folder = node.path / where
    folder.mkdir(parents=True, exist_ok=True)
    (folder / 'libnccl.so.2').write_text('stand-in\n')


# ---------------------------------------------------------------- nvidia-smi nvlink

@pytest.mark.parametrize('profile', PROFILES)
def test_nvlink_status_of_every_profile_parses_and_matches_the_board(node, profile):  # noqa: F811
    node.ready(profile)
    out, rc = node.smi('nvlink', '-s')
    assert rc == 0
    parsed = _nvlink.parse_nvlink_status(out)
    assert len(parsed['gpus']) == GPUS[profile]
    name = xml_gpus(node)[0]['name']
    assert set((g['active'], g['inactive']) for g in parsed['gpus']) == {(T.model_for(name)['nvlinks'], 0)}
    assert set(link['speed_gbps'] for g in parsed['gpus'] for link in g['links']) == {SPEED[profile]}
    assert out.splitlines()[1] == '\t Link 0: {0:g} GB/s'.format(SPEED[profile])


def test_nvlink_errors_and_gpu_selection(node):  # noqa: F811
    node.ready('hgx-h100-8gpu')
    out, rc = node.smi('nvlink', '--errorcounters', '-i', '3')
    assert rc == 0
    [gpu] = _nvlink.parse_nvlink_errors(out)['gpus']
    assert gpu['index'] == 3 and sorted(gpu['links']) == list(range(18))
    assert gpu['links'][17] == {'Replay Errors': 0, 'Recovery Errors': 0, 'CRC Errors': 0}
    assert '\n\n\t Link 1: Replay Errors: 0\n' in out  # links apart by an empty line, as in the H100 capture
    assert node.smi('nvlink', '-q')[1] == 2
    assert node.smi('nvlink')[1] == 2


def test_nvlink_inactive_fault(node):  # noqa: F811
    node.ready('hgx-h100-8gpu').fault('nvlink-inactive', '2 3,9\n')
    gpus = _nvlink.parse_nvlink_status(node.smi('nvlink', '-s')[0])['gpus']
    assert [(g['index'], g['active'], g['inactive']) for g in gpus if g['inactive']] == [(2, 16, 2)]
    assert [link['link'] for link in gpus[2]['links'] if not link['active']] == [3, 9]
    node.fault('nvlink-inactive', '')  # default: the last link of the last GPU
    gpus = _nvlink.parse_nvlink_status(node.smi('nvlink', '-s')[0])['gpus']
    assert [(g['index'], [l['link'] for l in g['links'] if not l['active']]) for g in gpus if g['inactive']] == \
        [(7, [17])]
    node.fault('nvlink-inactive', '0 all\n')
    out = node.smi('nvlink', '-s', '-i', '0')[0]
    assert out.splitlines()[1] == 'NVML: Unable to retrieve NVLink information as all links are inActive'
    assert _nvlink.parse_nvlink_status(out)['gpus'][0]['all_inactive'] is True


@pytest.mark.parametrize('text, cells', [
    ('2 3,9\n', {('GPU2', 'GPU5'): 'NV16', ('GPU0', 'GPU1'): 'NV18'}),
    ('2 all\n', {('GPU2', 'GPU5'): 'SYS', ('GPU2', 'GPU3'): 'NODE', ('GPU0', 'GPU1'): 'NV18'}),
])
def test_nvlink_inactive_fault_shows_in_topo_m(node, text, cells):  # noqa: F811
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvidia_smi_topo
    node.ready('hgx-h100-8gpu').fault('nvlink-inactive', text)
    out, rc = node.smi('topo', '-m')
    matrix = _nvidia_smi_topo.parse_topo_matrix(out)
    for (one, two), cell in cells.items():
        assert matrix['links'][one][two] == matrix['links'][two][one] == cell


def test_nvlink_needs_the_driver(node):  # noqa: F811
    node.profile('hgx-h100-8gpu')
    out, rc = node.smi('nvlink', '-s')
    assert (out, rc) == (test_gpu_double.NO_DRIVER, 9)


# ---------------------------------------------------------------- the XML of the fitness faults

def test_hw_slowdown_fault_power_brake_by_default(node):  # noqa: F811
    node.ready('hgx-h100-8gpu').fault('hw-slowdown', '')
    gpus = xml_gpus(node)
    reasons = gpus[7]['clocks_event_reasons']
    assert [k for k, v in sorted(reasons.items()) if v] == ['hw_power_brake_slowdown', 'hw_slowdown']
    # the cap is a quarter of the H100 profile's 1980 MHz (495); the idle clock, 345 MHz, is already below it
    assert gpus[7]['clocks']['graphics_mhz'] == 345
    assert gpus[7]['clocks_event_reasons_counters_us']['hw_power_brake'] >= 0
    assert gpus[0]['clocks_event_reasons']['hw_slowdown'] is False
    node.fault('hw-slowdown', '1 thermal\n')
    gpus = xml_gpus(node)
    assert [k for k, v in sorted(gpus[1]['clocks_event_reasons'].items()) if v] == [
        'hw_slowdown', 'hw_thermal_slowdown']
    assert gpus[7]['clocks_event_reasons']['hw_slowdown'] is False


def test_hw_slowdown_holds_locked_clocks_at_a_quarter(node):  # noqa: F811
    node.ready('hgx-h100-8gpu').fault('hw-slowdown', '0\n')
    assert node.smi('-pm', '1')[1] == 0
    assert node.smi('-lgc', '1980,1980')[1] == 0
    assert xml_gpus(node)[0]['clocks']['graphics_mhz'] == 495  # 1980 MHz x 0.25


def test_pcie_downtrained_fault(node):  # noqa: F811
    node.ready('hgx-b200-8gpu').fault('pcie-downtrained', '')
    gpus = xml_gpus(node)
    assert gpus[7]['pcie']['width_current'] == 8 and gpus[7]['pcie']['width_max'] == 16
    assert gpus[7]['pcie']['gen_current'] == gpus[7]['pcie']['gen_max'] == 5
    assert gpus[0]['pcie']['width_current'] == 16
    node.fault('pcie-downtrained', '2 x4 gen3\n')
    gpus = xml_gpus(node)
    assert (gpus[2]['pcie']['width_current'], gpus[2]['pcie']['gen_current']) == (4, 3)
    out = node.smi('--query-gpu=pcie.link.width.current,pcie.link.gen.current,pcie.link.width.max',
                   '--format=csv,noheader', '-i', '2')[0]
    assert out == '4, 3, 16\n'


def test_rows_pending_fault(node):  # noqa: F811
    node.ready('hgx-h100-8gpu').fault('rows-pending', '')
    gpus = xml_gpus(node)
    assert gpus[7]['remapped_rows'] == {'pending': True, 'failure': False, 'correctable': 0, 'uncorrectable': 1}
    assert gpus[6]['remapped_rows']['pending'] is False
    # GPU 7 is 00000000:CA:00.0 in the profile: its Xid 63 closes the kernel log
    assert gd.render_kernel_log(gd.load_profile()).endswith(
        "NVRM: Xid (PCI:0000:ca:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for "
        "remapping, reset gpu to activate.\n")


def test_mig_enabled_fault(node):  # noqa: F811
    node.ready('gb200-4gpu').fault('mig-enabled', '')
    gpus = xml_gpus(node)
    assert [(g['mig_mode'], g['mig_pending']) for g in gpus] == [('Disabled', 'Disabled')] * 3 + [
        ('Enabled', 'Enabled')]
    node.fault('mig-enabled', '0 pending\n')
    assert (xml_gpus(node)[0]['mig_mode'], xml_gpus(node)[0]['mig_pending']) == ('Disabled', 'Enabled')
    assert node.smi('--query-gpu=mig.mode.current,mig.mode.pending', '--format=csv,noheader', '-i', '0')[0] == \
        'Disabled, Enabled\n'


def test_v12_layout_keeps_the_fault_without_counters(node):  # noqa: F811
    node.ready('hgx-h100-8gpu', version='570.172.08').fault('hw-slowdown', '')
    out, rc = node.smi('-q', '-x', version='570.172.08')
    assert rc == 0
    gpu = parse_nvsmi_xml(out)['gpus'][7]
    assert gpu['clocks_event_reasons']['hw_slowdown'] is True
    assert gpu['clocks_event_reasons_counters_us'] is None


# ---------------------------------------------------------------- all_reduce_perf and nvbandwidth

def test_all_reduce_perf_format_and_figures(node):  # noqa: F811
    node.ready('hgx-h100-8gpu')
    nccl_lib(node)
    out, err, rc = perf_double.all_reduce_perf(['-b', '16G', '-e', '16G', '-f', '2', '-g', '8', '-c', '1'],
                                               nccl_tests_version='2.17.9', nccl_code=22707)
    assert (err, rc) == ('', 0)
    parsed = _nccl_tests.parse_nccl_tests(out)
    assert (parsed['version'], parsed['nccl_library'], parsed['binary']) == ('2.17.9', 22707, 'all_reduce_perf')
    assert parsed['params']['ngpus'] == 8 and parsed['params']['min_bytes'] == 16 * 1024 ** 3
    assert len(parsed['devices']) == 8 and parsed['devices'][0]['bus_id'] == '0000:53:00'
    assert parsed['complete'] and parsed['wrong_total'] == 0 and parsed['out_of_bounds'] == 0
    # the profile's 481 GB/s (REALITY.md) at 16 GiB; the Azure threshold is 460
    assert 470.0 < parsed['avg_busbw'] < 482.0
    assert parsed['avg_busbw'] >= T.model_for('NVIDIA H100 80GB HBM3')['allreduce']['busbw_gbps']
    # "Avg bus bandwidth" is the mean of every printed half, out-of-place and in-place (src/common.cu).
    halves = [half['busbw'] for row in parsed['rows'] for half in (row['out_of_place'], row['in_place'])]
    assert abs(parsed['avg_busbw'] - sum(halves) / len(halves)) < 0.01
    assert '#       size         count      type   redop    root     time   algbw   busbw  #wrong' in out


def test_all_reduce_perf_slow_fault_halves_it(node):  # noqa: F811
    node.ready('hgx-h100-8gpu').fault('allreduce-slow', '')
    nccl_lib(node)
    parsed = _nccl_tests.parse_nccl_tests(perf_double.all_reduce_perf(['-b', '16G', '-e', '16G', '-g', '8'])[0])
    assert 235.0 < parsed['avg_busbw'] < 241.0
    node.fault('allreduce-slow', '0.8\n')
    shape = ['-b', '1G', '-e', '16G', '-f', '2', '-g', '8']
    parsed = _nccl_tests.parse_nccl_tests(perf_double.all_reduce_perf(shape)[0])
    assert [row['size'] for row in parsed['rows']] == [2 ** 30 * n for n in (1, 2, 4, 8, 16)]
    assert 370.0 < parsed['avg_busbw'] < 385.0


def test_all_reduce_perf_failures(node):  # noqa: F811
    node.ready('gb200-4gpu')
    out, err, rc = perf_double.all_reduce_perf(['-g', '4'])
    assert (out, rc) == ('', 127)
    assert err == ('all_reduce_perf: error while loading shared libraries: libnccl.so.2: cannot open shared object '
                   'file: No such file or directory\n')
    nccl_lib(node, 'usr/lib/x86_64-linux-gnu')
    out, err, rc = perf_double.all_reduce_perf(['-g', '8'])
    assert rc == 1 and err == ('Invalid number of GPUs: 8 requested but only 4 were found.\n'
                               'Please check the number of processes and GPUs per process.\n')
    assert perf_double.all_reduce_perf(['-x', '1'])[2] == 1


def test_nvbandwidth_text_json_and_faults(node):  # noqa: F811
    node.ready('hgx-h100-8gpu').fault('pcie-downtrained', '5 x8\n').fault('nvlink-inactive', '1 all\n')
    tests = ['-t', 'host_to_device_memcpy_ce', 'device_to_host_memcpy_ce', 'device_to_device_memcpy_read_ce']
    out, err, rc = perf_double.nvbandwidth(tests)
    assert (err, rc) == ('', 0)
    parsed = _nvbandwidth.parse_nvbandwidth(out)
    assert (parsed['version'], parsed['driver_version'], parsed['cuda_runtime']) == ('v0.8', '580.95.05', 13000)
    assert len(parsed['devices']) == 8 and parsed['devices'][0]['bus_id'] == '00000000:53:00'
    h2d, d2h, d2d = parsed['testcases']
    assert [c['status'] for c in (h2d, d2h, d2d)] == ['Passed'] * 3
    # H100: 51 / 52 GB/s per GPU (REALITY.md); GPU 5 at x8 gets half
    assert all(50.0 < v < 53.0 for n, v in enumerate(h2d['matrix'][0]) if n != 5)
    assert 24.5 < h2d['matrix'][0][5] < 26.5
    assert all(51.0 < v < 53.0 for n, v in enumerate(d2h['matrix'][0]) if n != 5)
    # 371 GB/s per pair, nothing to or from GPU 1 (every link down), N/A on the diagonal
    assert d2d['matrix'][0][0] is None and d2d['matrix'][0][1] == 0.0 and d2d['matrix'][1][2] == 0.0
    assert 369.0 < d2d['matrix'][2][3] < 373.0
    js = _nvbandwidth.parse_nvbandwidth(perf_double.nvbandwidth(['-j'] + tests)[0])
    assert [c['name'] for c in js['testcases']] == [c['name'] for c in parsed['testcases']]
    assert js['testcases'][0]['matrix'][0][5] == pytest.approx(h2d['matrix'][0][5], abs=0.01)
    assert js['devices'][0]['bus_id'] == '00000000:53:00'


def test_nvbandwidth_one_gpu_waives_device_tests_and_names_unknown_tests(node):  # noqa: F811
    node.ready('hgx-h100-8gpu').fault('gpu-removed', '1\n2\n3\n4\n5\n6\n7\n')
    parsed = _nvbandwidth.parse_nvbandwidth(perf_double.nvbandwidth(['-t', 'device_to_device_memcpy_read_ce',
                                                                     'nope_ce'])[0])
    assert parsed['waived'] == 1 and parsed['error'] == 'Testcase nope_ce not found!'


# ---------------------------------------------------------------- the stand-in toolchain

def tree(node, files):  # noqa: F811
    for rel, text in files.items():
        path = node.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(('/nvcc', '/g++', '/c++')):
            path.chmod(0o755)


def test_nvcc_compile_and_link_make_a_runner_of_the_double(node, monkeypatch):  # noqa: F811
    node.ready('hgx-h100-8gpu')
    monkeypatch.setenv('PATH', '/usr/bin')  # the node's PATH, seen inside the double's root
    tree(node, {'usr/bin/g++': '', 'src/a.cu': '#include "common.h"\n// stand-in-program: all_reduce_perf 2.17.9\n',
                'src/common.h': '#include <nccl.h>\n'})
    home = '/usr/local/cuda-12.8'
    # cuda_runtime.h missing: the cudart devel package is not installed
    out, err, rc = toolchain_double.nvcc(['-ccbin', 'g++', '-c', '/src/a.cu', '-o', '/b/a.o'], '12.8.93', home)
    assert rc == 1 and 'cuda_runtime.h: No such file or directory' in err
    tree(node, {'usr/local/cuda-12.8/include/cuda_runtime.h': ''})
    out, err, rc = toolchain_double.nvcc(['-c', '/src/a.cu', '-o', '/b/a.o'], '12.8.93', home)
    assert rc == 1 and err.startswith('/src/common.h:1:10: fatal error: nccl.h: No such file or directory')
    tree(node, {'usr/include/nccl.h': '#define NCCL_VERSION_CODE 22707\n'})
    assert toolchain_double.nvcc(['-c', '/src/a.cu', '-o', '/b/a.o'], '12.8.93', home)[2] == 0
    out, err, rc = toolchain_double.nvcc(['-o', '/b/all_reduce_perf', '/b/a.o', '-lnccl'], '12.8.93', home)
    assert (rc, err) == (1, '/usr/bin/ld: cannot find -lnccl: No such file or directory\n'
                            'collect2: error: ld returned 1 exit status\n')
    tree(node, {'usr/lib64/libnccl.so': ''})
    assert toolchain_double.nvcc(['-o', '/b/all_reduce_perf', '/b/a.o', '-lnccl'], '12.8.93', home)[2] == 0
    runner = (node.path / 'b/all_reduce_perf').read_text()
    assert 'exec /usr/lib/gpu-double/bin/gpu-double all_reduce_perf --nccl-tests-version 2.17.9 --nccl-code 22707 ' \
           '--program all_reduce_perf -- "$@"' in runner
    assert os.access(str(node.path / 'b/all_reduce_perf'), os.X_OK)
    assert toolchain_double.nvcc(['--version'], '12.8.93', home)[0].splitlines()[2] == \
        'Cuda compilation tools, release 12.8, V12.8.93'


def test_nvcc_needs_its_host_compiler(node, monkeypatch):  # noqa: F811
    monkeypatch.setenv('PATH', '/usr/bin')  # the node's PATH, seen inside the double's root
    out, err, rc = toolchain_double.nvcc(['-ccbin', 'g++', '-c', 'x.cu'], '13.0.88', '/usr/local/cuda-13.0')
    assert rc == 1 and err == 'sh: 1: g++: not found\nnvcc fatal   : Failed to preprocess host compiler properties.\n'


def test_cmake_finds_compilers_and_boost(node, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv('PATH', '/usr/bin')
    monkeypatch.delenv('CUDACXX', raising=False)
    monkeypatch.delenv('CXX', raising=False)
    lists = ('cmake_minimum_required(VERSION 3.20)\n\nproject(nvbandwidth\n    LANGUAGES CUDA CXX)\n'
             'find_package(Boost COMPONENTS program_options REQUIRED)\nset(src\n    nvbandwidth.cpp\n    kernels.cu\n)\n')
    tree(node, {'s/CMakeLists.txt': lists})
    out, err, rc = toolchain_double.cmake(['.'], '/s')
    assert rc == 1 and err.startswith('CMake Error at CMakeLists.txt:3 (project):\n  No CMAKE_CUDA_COMPILER could be '
                                      'found.\n')
    tree(node, {'usr/local/cuda-12.8/bin/nvcc': '', 'usr/bin/c++': ''})
    out, err, rc = toolchain_double.cmake(['-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.8/bin/nvcc', '.'], '/s')
    assert rc == 1 and 'Could NOT find Boost (missing: program_options)' in err
    tree(node, {'usr/include/boost/program_options.hpp': ''})
    out, err, rc = toolchain_double.cmake(['-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.8/bin/nvcc', '.'], '/s')
    assert rc == 1 and 'Could NOT find Boost (missing: program_options)' in err  # the header without the library
    tree(node, {'usr/lib64/libboost_program_options.so': '', 'etc/os-release': 'ID="rocky"\n'})
    out, err, rc = toolchain_double.cmake(['-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.8/bin/nvcc', '.'], '/s')
    assert rc == 0, err
    assert out.endswith('-- Build files have been written to: /s\n')
    makefile = (node.path / 's/Makefile').read_text()
    assert 'nvbandwidth: CMakeFiles/nvbandwidth.cpp.o CMakeFiles/kernels.cu.o /usr/lib64/libboost_program_options.a' \
        in makefile
    assert '/usr/local/cuda-12.8/bin/nvcc -c /s/kernels.cu' in makefile
    assert toolchain_double.cmake(['--version'], '/s')[0].startswith('cmake version 3.26.5\n')
    # Fedora links Boost dynamically (nvbandwidth's CMakeLists.txt, NVIDIA/nvbandwidth issue #4); Ubuntu's library
    # is under the multiarch folder
    tree(node, {'etc/os-release': 'ID=fedora\n'})
    assert toolchain_double.cmake(['-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.8/bin/nvcc', '.'], '/s')[2] == 0
    makefile = (node.path / 's/Makefile').read_text()
    assert 'libboost_program_options.a' not in makefile and '-lboost_program_options' in makefile
    (node.path / 'usr/lib64/libboost_program_options.so').unlink()
    tree(node, {'etc/os-release': 'ID=ubuntu\nID_LIKE=debian\n',
                'usr/lib/x86_64-linux-gnu/libboost_program_options.a': ''})
    assert toolchain_double.cmake(['-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.8/bin/nvcc', '.'], '/s')[2] == 0
    assert 'CMakeFiles/kernels.cu.o /usr/lib/x86_64-linux-gnu/libboost_program_options.a' in \
        (node.path / 's/Makefile').read_text()


# ---------------------------------------------------------------- make testbed-fault

@pytest.mark.parametrize('kind, gpu, value, content', [
    ('hw-slowdown', None, None, ''),
    ('hw-slowdown', '2', 'thermal', '2 thermal\n'),
    ('pcie-downtrained', None, 'x4,gen4', 'last x4 gen4\n'),
    ('nvlink-inactive', '0,3', '3,7', '0 3,7\n3 3,7\n'),
    ('nvlink-inactive', None, 'all', 'last all\n'),
    ('rows-pending', '1', None, '1\n'),
    ('mig-enabled', None, 'pending', 'last pending\n'),
    ('allreduce-slow', None, '0.8', '0.8\n'),
    ('allreduce-slow', None, None, ''),
])
def test_fleet_fitness_fault_files_read_back_by_the_double(node, kind, gpu, value, content):  # noqa: F811
    from ansible_collections.gpufleet.nodeprep.tests.unit.testbed.test_gpu_double_topology import _testbed
    tb = _testbed()

    class Args(object):
        pass
    args = Args()
    args.gpu, args.value = gpu, value
    assert tb.FAULTS[kind]['flag'] == kind and kind in gd.FAULT_NAMES
    assert tb.fault_content(kind, args) == content
    # what the double makes of the file
    node.ready('hgx-h100-8gpu').fault(kind, content)
    profile = gd.load_profile()
    last = profile['gpus'][-1]['pci_bus_id']
    if kind == 'pcie-downtrained':
        assert gd.pcie_downtrained(profile) == {last: {'width': 4, 'gen': 4}}
    elif kind == 'nvlink-inactive' and gpu:
        assert sorted(gd.nvlink_inactive(profile).values()) == [{3, 7}, {3, 7}]
    elif kind == 'nvlink-inactive':
        assert gd.nvlink_inactive(profile) == {last: set(range(18))}
    elif kind == 'hw-slowdown' and gpu:
        assert gd.hw_slowdown(profile) == {profile['gpus'][2]['pci_bus_id']: 'thermal'}
    elif kind == 'mig-enabled':
        assert gd.mig_enabled(profile) == {last: ('Disabled', 'Enabled')}
    elif kind == 'allreduce-slow':
        assert gd.allreduce_factor() == (0.8 if value else 0.5)


def test_nvbandwidth_built_from_a_tarball_has_no_git_version(node):  # noqa: F811
    node.ready('hgx-h100-8gpu')
    runner = toolchain_double.executable_text({'program': 'nvbandwidth', 'version': 'v0.8'}, ['a.o'])
    assert "exec /usr/lib/gpu-double/bin/gpu-double nvbandwidth --version-tag v0.8 --git-version '' -- \"$@\"" in runner
    out = perf_double.nvbandwidth(['-t', 'host_to_device_memcpy_ce'], 'v0.8', '')[0]
    assert out.splitlines()[:2] == ['nvbandwidth Version: v0.8', 'Built from Git version: ']
    assert _nvbandwidth.parse_nvbandwidth(out)['version'] == 'v0.8'


@pytest.mark.parametrize('profile', ['hgx-h100-8gpu', 'hgx-h200-8gpu', 'hgx-b200-8gpu'])
def test_a_healthy_profile_passes_its_models_thresholds(node, profile):  # noqa: F811
    """Without a fault the double's figures pass the public thresholds (docs/readiness-thresholds.md), in each
    threshold's own run shape; with allreduce-slow they do not."""
    node.ready(profile)
    nccl_lib(node)
    name = xml_gpus(node)[0]['name']
    t = T.thresholds(name)
    shape = ['-b', str(t['allreduce_min_bytes']['value']), '-e', str(t['allreduce_max_bytes']['value']), '-f', '2',
             '-g', '8', '-c', '1']
    parsed = _nccl_tests.parse_nccl_tests(perf_double.all_reduce_perf(shape)[0])
    assert parsed['avg_busbw'] >= t['allreduce_busbw_gbps']['value'] and parsed['wrong_total'] == 0
    if t['host_to_device_gbps']['value'] is not None:
        cases = _nvbandwidth.parse_nvbandwidth(perf_double.nvbandwidth(
            ['-t', 'host_to_device_memcpy_ce', 'device_to_host_memcpy_ce', 'device_to_device_memcpy_read_ce'])[0])
        h2d, d2h, d2d = [[v for row in c['matrix'] for v in row if v is not None] for c in cases['testcases']]
        assert min(h2d) >= t['host_to_device_gbps']['value'] and min(d2h) >= t['device_to_host_gbps']['value']
        assert min(d2d) >= t['device_to_device_read_gbps']['value']
    node.fault('allreduce-slow', '')
    parsed = _nccl_tests.parse_nccl_tests(perf_double.all_reduce_perf(shape)[0])
    assert parsed['avg_busbw'] < t['allreduce_busbw_gbps']['value']

# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the simulated fleet's GPU double (tests/testbed/gpu_double) against the collection's parser."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import re
import os
import shutil
import struct
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, ROOT

DOUBLE = os.path.join(ROOT, 'tests', 'testbed', 'gpu_double')
sys.path.insert(0, os.path.join(DOUBLE, 'lib'))

import bootloader  # noqa: E402
import double_tools  # noqa: E402
import gpudouble as gd  # noqa: E402
import nvsmi_double  # noqa: E402

KERNEL = '6.18.44-fc-v657'
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")
REAL_XML = {
    'hgx-b200-8gpu': 'b200-8gpu_k8s-test-infra.xml',
    'hgx-h100-8gpu': 'h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml',
}


def load_profile(name):
    with open(os.path.join(DOUBLE, 'profiles', name + '.json')) as f:
        return json.load(f)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node root with the double installed; returns a helper to shape it."""
    root = tmp_path / 'root'
    (root / 'etc' / 'testbed').mkdir(parents=True)
    (root / 'etc' / 'modprobe.d').mkdir(parents=True)
    (root / 'var' / 'lib' / 'testbed' / 'faults').mkdir(parents=True)
    (root / 'lib' / 'modules' / KERNEL).mkdir(parents=True)
    monkeypatch.setenv('GPU_DOUBLE_ROOT', str(root))
    monkeypatch.setenv('GPU_DOUBLE_UNAME_R', KERNEL)
    monkeypatch.setenv('GPU_DOUBLE_TEMPLATES', os.path.join(DOUBLE, 'templates'))
    monkeypatch.setenv('GPU_DOUBLE_EUID', '0')
    monkeypatch.delenv('GPU_DOUBLE_PROC_DRIVER', raising=False)

    class Node(object):
        path = root

        def profile(self, name='hgx-b200-8gpu'):
            shutil.copy(os.path.join(DOUBLE, 'profiles', name + '.json'), str(root / 'etc/testbed/hardware.json'))
            return self

        def module(self, version='580.95.05', flavour='open'):
            d = root / 'lib' / 'modules' / KERNEL / 'updates' / 'dkms'
            d.mkdir(parents=True, exist_ok=True)
            (d / 'nvidia.ko').write_text('TESTBED-NVIDIA-MODULE version={0} flavour={1}\n'.format(version, flavour))
            return self

        def blacklist(self, initramfs=True):
            (root / 'etc/modprobe.d/blacklist-nouveau.conf').write_text('blacklist nouveau\noptions nouveau modeset=0\n')
            if initramfs:
                (root / 'boot').mkdir(exist_ok=True)
                assert bootloader.dracut(['-f', '/boot/initramfs-{0}.img'.format(KERNEL), KERNEL]) == 0
            return self

        def fault(self, name, text=''):
            (root / 'var/lib/testbed/faults' / name).write_text(text)
            return self

        def ready(self, name='hgx-b200-8gpu', version='580.95.05', flavour='open'):
            return self.profile(name).module(version, flavour).blacklist()

        def smi(self, *argv, **kw):
            return nvsmi_double.run(list(argv), kw.get('version', '580.95.05'))

    return Node()


# ---------------------------------------------------------------- XML against the collection's parser

def _parser():
    return parse_nvsmi_xml


# The GPU fields that describe the board itself, which the double must print as the real capture does.
STATIC_FIELDS = ('name', 'architecture', 'memory_total_mib', 'default_power_limit_w', 'min_power_limit_w',
                 'max_power_limit_w', 'max_clocks', 'pci_device_id', 'pci_bus_id', 'uuid', 'supported_clocks')


def _gpus(parsed):
    return parsed['gpus'] if isinstance(parsed, dict) else parsed


@pytest.mark.parametrize('profile_name', sorted(REAL_XML))
def test_double_xml_has_the_real_field_set(node, profile_name):
    parse = _parser()
    node.ready(profile_name)
    text, rc = node.smi('-q', '-x')
    assert rc == 0
    with open(os.path.join(FIXTURES, 'nvidia-smi-xml', REAL_XML[profile_name])) as f:
        real = _gpus(parse(f.read()))
    ours = _gpus(parse(text))
    assert len(ours) == len(real) == 8
    for mine, theirs in zip(ours, real):
        assert sorted(mine) == sorted(theirs)
        # What the board is (not what this boot set): the same values as the real capture's GPU in that slot.
        for field in STATIC_FIELDS:
            assert (field, mine[field]) == (field, theirs[field])


@pytest.mark.parametrize('profile_name', ['hgx-b200-8gpu', 'hgx-h100-8gpu', 'hgx-h200-8gpu'])
def test_double_xml_values_come_from_the_profile(node, profile_name):
    parse = _parser()
    prof = load_profile(profile_name)
    node.ready(profile_name)
    parsed = parse(node.smi('-q', '-x')[0])
    gpus = _gpus(parsed)
    assert [g['pci_bus_id'] for g in gpus] == [g['pci_bus_id'] for g in prof['gpus']]
    assert [g['uuid'] for g in gpus] == [g['uuid'] for g in prof['gpus']]
    for g in gpus:
        assert g['name'] == prof['product_name']
        assert g['architecture'] == prof['architecture']
        assert g['memory_total_mib'] == prof['memory_total_mib']
        assert g['default_power_limit_w'] == prof['power']['default_w']
        assert g['min_power_limit_w'] == prof['power']['min_w']
        assert g['max_power_limit_w'] == prof['power']['max_w']
        assert g['power_limit_w'] == prof['power']['default_w']
        assert g['persistence_mode'] is False
        assert g['max_clocks'] == {'graphics_mhz': prof['max_clocks']['graphics_mhz'],
                                   'sm_mhz': prof['max_clocks']['sm_mhz'], 'mem_mhz': prof['max_clocks']['mem_mhz']}
        assert g['pci_device_id'] == prof['pci_device_id']
        sup = dict((k, sorted(v)) for k, v in g['supported_clocks'].items())
        assert sup == dict((k, sorted(v)) for k, v in prof['supported_clocks'].items())
    assert parsed['driver_version'] == '580.95.05'
    assert parsed['cuda_version'] == '13.0'


def test_double_xml_follows_state_changes(node):
    parse = _parser()
    node.ready()
    assert node.smi('-pm', '1')[1] == 0
    assert node.smi('-i', '1', '-pl', '700')[1] == 0
    assert node.smi('-i', '1', '-ac', '3996,1500')[1] == 0
    g = _gpus(parse(node.smi('-q', '-x')[0]))
    assert [x['persistence_mode'] for x in g] == [True] * 8
    assert [x['power_limit_w'] for x in g] == [1000.0, 700.0] + [1000.0] * 6
    assert g[1]['applications_clocks'] == {'graphics_mhz': 1500, 'mem_mhz': 3996}
    assert g[0]['applications_clocks'] == {'graphics_mhz': 1965, 'mem_mhz': 3996}


# ---------------------------------------------------------------- driver load rules

@pytest.mark.parametrize('setup,argv,expected,rc', [
    ('nothing', ['-L'], NO_DRIVER, 9),
    ('no-blacklist', ['-L'], NO_DRIVER, 9),
    ('initramfs-old', ['-L'], NO_DRIVER, 9),
    ('proprietary-blackwell', ['-L'], 'No devices were found\n', 6),
    ('mismatch', ['-L'], 'Failed to initialize NVML: Driver/library version mismatch\n'
                         'NVML library version: 590.48\n', 18),
    ('driver-unloaded', ['-L'], NO_DRIVER, 9),
    ('ready', ['-i', '3', '-L'], 'GPU 3: NVIDIA B200 (UUID: GPU-00000003-0000-0000-0000-000000000003)\n', 0),
    ('ready', ['-i', '9', '-L'], 'No devices were found\n', 6),
    ('proprietary-hopper', ['-i', '00000000:53:00.0', '-L'],
     'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)\n', 0),
])
def test_driver_load_rules(node, setup, argv, expected, rc):
    version = '580.95.05'
    node.profile()
    if setup == 'no-blacklist':
        node.module()
    elif setup == 'initramfs-old':
        node.module()
        (node.path / 'boot').mkdir()
        bootloader.dracut(['-f', '/boot/initramfs-{0}.img'.format(KERNEL), KERNEL])
        node.blacklist(initramfs=False)
    elif setup == 'proprietary-blackwell':
        node.ready(flavour='proprietary')
    elif setup == 'proprietary-hopper':
        node.ready('hgx-h100-8gpu', flavour='proprietary')
    elif setup == 'mismatch':
        node.ready()
        version = '590.48.01'
    elif setup == 'driver-unloaded':
        node.ready().fault('driver-unloaded')
    elif setup == 'ready':
        node.ready()
    assert node.smi(*argv, version=version) == (expected, rc)


def test_kernel_log_tells_why(node):
    node.profile().module()
    node.smi('-L')
    log = (node.path / 'run/gpu-double/kernel.log').read_text()
    assert 'NVRM: The NVIDIA probe routine was not called for 8 device(s).' in log
    node2 = node.ready(flavour='proprietary')
    (node.path / 'run/gpu-double/state.json').unlink()
    node2.smi('-L')
    log = (node.path / 'run/gpu-double/kernel.log').read_text()
    assert 'NVRM: The NVIDIA GPU 0000:8f:00.0 (PCI ID: 10de:2901)' in log
    assert 'NVRM: installed in this system requires use of the NVIDIA open kernel modules.' in log


def test_proc_driver_version_formats(node, tmp_path, monkeypatch):
    proc = tmp_path / 'proc-driver'
    monkeypatch.setenv('GPU_DOUBLE_PROC_DRIVER', str(proc))
    node.ready()
    node.smi('-L')
    assert (proc / 'nvidia' / 'version').read_text().splitlines()[0] == (
        'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  '
        '(dvs-builder@U16-I3-B03-4-3)  Thu Sep 18 21:36:58 UTC 2025')
    assert sorted(os.listdir(str(proc / 'nvidia' / 'gpus')))[0] == '0000:8f:00.0'
    node.fault('driver-unloaded')
    assert node.smi('-L') == (NO_DRIVER, 9)
    assert not (proc / 'nvidia').exists()
    assert gd.nvrm_version_line('570.172.08', 'proprietary') == (
        'NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.172.08  Thu Sep 18 21:36:58 UTC 2025')


# ---------------------------------------------------------------- setters

B0 = '00000000:8F:00.0'
PM_WARN = ('Warning: persistence mode is disabled on device {0}. See the Known Issues section of the nvidia-smi(1) '
           'man page for more information. Run with [--help | -h] switch to get more information on how to enable '
           'persistence mode.'.format(B0))


@pytest.mark.parametrize('argv,euid,expected,rc', [
    (['-i', '0', '-pm', '1'], '0', 'Enabled Legacy persistence mode for GPU {0}.\nAll done.\n'.format(B0), 0),
    (['-i', '0', '-pm', '0'], '0', 'Persistence mode is already Disabled for GPU {0}.\nAll done.\n'.format(B0), 0),
    (['-i', '0', '-pm', '1'], '1000',
     'Unable to set persistence mode for GPU {0}: Insufficient Permissions\n'
     'Terminating early due to previous errors.\n'.format(B0), 4),
    (['-i', '0', '-pl', '700'], '0',
     'Power limit for GPU {0} was set to 700.00 W from 1000.00 W.\nAll done.\n'.format(B0), 0),
    (['-i', '0', '-pl', '150'], '0',
     'Provided power limit 150.00 W is not a valid power limit which should be between 200.00 W and '
     '1000.00 W for GPU {0}\nTerminating early due to previous errors.\n'.format(B0), 2),
    (['-i', '0', '-pl', '700'], '1000',
     'Failed to set power management limit for GPU {0}: Insufficient Permissions\n'
     'Terminating early due to previous errors.\n'.format(B0), 4),
    (['-i', '0', '-lgc', '1500,1500'], '0',
     'GPU clocks set to "(gpuClkMin 1500, gpuClkMax 1500)" for GPU {0}\n\n{1}\nAll done.\n'.format(B0, PM_WARN), 0),
    (['-i', '0', '-lmc', '3996,3996'], '0',
     'Memory clocks set to "(memClkMin 3996, memClkMax 3996)" for GPU {0}\n\n{1}\nAll done.\n'.format(B0, PM_WARN),
     0),
    (['-i', '0', '-lgc', '1500,1500'], '1000',
     'The current user does not have permission to change clocks for GPU {0}.\n'
     'Terminating early due to previous errors.\n'.format(B0), 4),
    (['-i', '0', '-rgc'], '0', 'All done.\n', 0),
    (['-i', '0', '-rmc'], '0', 'All done.\n', 0),
    (['-i', '0', '-ac', '3996,1965'], '0',
     'Applications clocks set to "(MEM 3996, SM 1965)" for GPU {0}\nAll done.\n'.format(B0), 0),
    (['-i', '0', '-ac', '5001,2100'], '0',
     'Specified clock combination "(MEM 5001, SM 2100)" is not supported for GPU {0}. Run '
     "'nvidia-smi -q -d SUPPORTED_CLOCKS' to see list of supported clock combinations\n"
     'Treating as warning and moving on.\nAll done.\n'.format(B0), 0),
    (['-pl'], '0', "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", 2),
])
def test_setters(node, monkeypatch, argv, euid, expected, rc):
    node.ready()
    monkeypatch.setenv('GPU_DOUBLE_EUID', euid)
    assert node.smi(*argv) == (expected, rc)


def test_application_clocks_are_deprecated_from_590(node):
    node.ready(version='590.48.01')
    assert node.smi('-i', '0', '-ac', '3996,1965', version='590.48.01') == (
        'The requested functionality has been deprecated.\n', 0)
    out = node.smi('-i', '0', '--query-gpu=clocks.applications.graphics,clocks.max.graphics', '--format=csv',
                   version='590.48.01')
    assert out == ('clocks.applications.graphics [MHz], clocks.max.graphics [MHz]\n'
                   '[Requested functionality has been deprecated], 1965 MHz\n', 0)


def test_unsupported_power_limit_is_a_warning(node):
    node.ready()
    prof = json.loads((node.path / 'etc/testbed/hardware.json').read_text())
    prof['unsupported'] = ['power-limit']
    (node.path / 'etc/testbed/hardware.json').write_text(json.dumps(prof))
    assert node.smi('-i', '0', '-pl', '700') == (
        'Changing power management limit is not supported in current scope for GPU: {0}.\nAll done.\n'.format(B0), 0)


def test_clock_lock_shows_in_queries_and_resets(node):
    node.ready()
    assert node.smi('-pm', '1')[1] == 0
    node.smi('-i', '2', '-lgc', '1500,1500')
    assert node.smi('-i', '2', '--query-gpu=index,clocks.gr,clocks.sm', '--format=csv,noheader,nounits') == (
        '2, 1500, 1500\n', 0)
    assert node.smi('-i', '2', '-rgc') == ('All done.\n', 0)
    assert node.smi('-i', '2', '--query-gpu=clocks.gr', '--format=csv,noheader') == ('120 MHz\n', 0)


# ---------------------------------------------------------------- queries and faults

def test_csv_query_header_units_and_errors(node):
    node.ready()
    assert node.smi('-i', '0', '--query-gpu=index,name,pci.bus_id,power.limit,memory.total,pci.device_id',
                    '--format=csv') == (
        'index, name, pci.bus_id, power.limit [W], memory.total [MiB], pci.device_id\n'
        '0, NVIDIA B200, 00000000:8F:00.0, 1000.00 W, 183359 MiB, 0x290110DE\n', 0)
    assert node.smi('--query-gpu=index,bogus', '--format=csv') == (
        'Field "bogus" is not a valid field to query.\n', 2)


@pytest.mark.parametrize('content,gone', [('', '00000000:CC:00.0'), ('2\n', '00000000:96:00.0'),
                                          ('0000:8f:00.0\n', '00000000:8F:00.0')])
def test_gpu_removed_hides_gpu_from_smi_and_pci(node, tmp_path, content, gone):
    node.ready().fault('gpu-removed', content)
    text, rc = node.smi('--query-gpu=index,pci.bus_id,count', '--format=csv,noheader')
    assert rc == 0
    rows = [line.split(', ') for line in text.splitlines()]
    assert [r[0] for r in rows] == [str(i) for i in range(7)]
    assert gone not in [r[1] for r in rows]
    assert set(r[2] for r in rows) == {'7'}
    profile = gd.load_profile()
    pci = [name for name in gd.write_pci_tree(profile, str(tmp_path / 'pci')) if name not in gd.pci_switches(profile)]
    assert len(pci) == 7 + 4 + 8  # GPUs, ConnectX-7 bridge functions, compute NICs (the PCIe bridges left out)
    assert gd.sysfs_bus_id(gone) not in pci


def test_pci_tree_files(node, tmp_path):
    node.profile()
    profile = gd.load_profile()
    names = [n for n in gd.write_pci_tree(profile, str(tmp_path / 'pci')) if n not in gd.pci_switches(profile)]
    assert names[:4] == ['0000:05:00.0', '0000:05:00.1', '0000:06:00.0', '0000:06:00.1']
    dev = tmp_path / 'pci' / '0000:8f:00.0'
    assert [(f, (dev / f).read_text()) for f in ('vendor', 'device', 'class', 'subsystem_vendor',
                                                 'subsystem_device')] == [
        ('vendor', '0x10de\n'), ('device', '0x2901\n'), ('class', '0x030200\n'),
        ('subsystem_vendor', '0x10de\n'), ('subsystem_device', '0x1999\n')]


def test_xid_and_pending_row_faults(node):
    parse = _parser()
    node.ready().fault('xid', '79 1\n48\n').fault('remapped-rows-pending', '0\n').fault('retired-pages-pending', '1')
    assert gd.xid_lines(gd.load_profile()) == [
        "NVRM: Xid (PCI:0000:90:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:8f:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error "
        "(DBE) has been detected on GPU in the framebuffer"]
    g = _gpus(parse(node.smi('-q', '-x')[0]))
    assert [x['remapped_rows']['pending'] for x in g[:3]] == [True, False, False]
    assert [x['retired_pages'] for x in g[:3]] == [None, {'pending': True, 'single_bit': None, 'double_bit': None},
                                                   None]


def test_nvidia_smi_hang_fault(node):
    node.ready().fault('nvidia-smi-hang')
    env = dict(os.environ, GPU_DOUBLE_LIB=os.path.join(DOUBLE, 'lib'))
    script = "import sys; sys.path.insert(0, {0!r}); import nvsmi_double; nvsmi_double.main(['-L'], '580.95.05')".format(
        os.path.join(DOUBLE, 'lib'))
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, '-c', script], env=env, timeout=1.5, check=False)


# ---------------------------------------------------------------- daemons, dkms, boot loader

def test_fabric_manager_refuses_other_version(node, capsys):
    node.ready('hgx-h100-8gpu')
    assert double_tools.cmd_fabricmanager([], '570.172.08') == 1
    assert capsys.readouterr().out == ('nv-fabricmanager: fabric manager version 570.172.08 does not match the '
                                       'NVIDIA driver version 580.95.05; both must be the same version\n')


def test_nvlsm_needs_ib_umad(node, capsys, monkeypatch):
    monkeypatch.setenv('GPU_DOUBLE_NVLSM_WAIT', '0.5')
    node.ready()
    assert double_tools.cmd_nvlsm([], '2025.06.4') == 1
    assert 'kernel module ib_umad is not loaded' in capsys.readouterr().out
    assert double_tools.cmd_fabricmanager([], '580.95.05') == 1
    assert capsys.readouterr().out == ('nv-fabricmanager: NVLink subnet manager (nvlsm) is not running; '
                                       'start nvlsm first\n')


def test_dkms_builds_only_with_headers(node, capsys):
    node.profile()
    src = node.path / 'usr/src/nvidia-open-580.95.05'
    src.mkdir(parents=True)
    (src / 'dkms.conf').write_text('PACKAGE_NAME="nvidia-open"\nPACKAGE_VERSION="580.95.05"\nTESTBED_FLAVOUR="open"\n')
    assert double_tools.cmd_dkms(['install', '-m', 'nvidia-open', '-v', '580.95.05', '-k', KERNEL]) == 1
    assert 'Your kernel headers for kernel {0} cannot be found'.format(KERNEL) in capsys.readouterr().out
    hdr = node.path / 'usr/src/kernels' / KERNEL
    hdr.mkdir(parents=True)
    (hdr / 'Makefile').write_text('all:\n')
    os.symlink('/usr/src/kernels/' + KERNEL, str(node.path / 'lib/modules' / KERNEL / 'build'))
    assert double_tools.cmd_dkms(['autoinstall', '-k', KERNEL]) == 0
    capsys.readouterr()
    assert double_tools.cmd_dkms(['status']) == 0
    assert capsys.readouterr().out == 'nvidia-open/580.95.05, {0}, x86_64: installed\n'.format(KERNEL)
    assert gd.find_module(KERNEL)[1] == {'version': '580.95.05', 'flavour': 'open'}


def test_dkms_build_fails_for_the_marked_kernel(node, capsys):
    """Fault dkms-build-fails (R24): dkms install/autoinstall fail for the kernels it names with dkms's texts and exit
    codes, leave build/make.log naming the kernel, and dkms status shows the module installed for the others only;
    the default marks the fleet's ELRepo kernel-ml."""
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _dkms
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dkms_status
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _kernel_state
    node.profile()
    ml = '6.16.7-1.el9.elrepo.x86_64'
    src = node.path / 'usr/src/nvidia-open-580.95.05'
    src.mkdir(parents=True)
    (src / 'dkms.conf').write_text('PACKAGE_NAME="nvidia-open"\nPACKAGE_VERSION="580.95.05"\nTESTBED_FLAVOUR="open"\n')
    for k in (KERNEL, ml):
        hdr = node.path / 'usr/src/kernels' / k
        hdr.mkdir(parents=True)
        (hdr / 'Makefile').write_text('all:\n')
        (node.path / 'lib/modules' / k).mkdir(parents=True, exist_ok=True)
        os.symlink('/usr/src/kernels/' + k, str(node.path / 'lib/modules' / k / 'build'))
    (node.path / 'var/lib/testbed/faults/dkms-build-fails').write_text('')
    assert double_tools.cmd_dkms(['install', 'nvidia-open/580.95.05', '-k', KERNEL]) == 0
    assert double_tools.cmd_dkms(['install', 'nvidia-open/580.95.05', '-k', ml]) == 10
    out = capsys.readouterr().out
    assert ('Error! Bad return status for module build on kernel: {0} (x86_64)\nConsult '
            '/var/lib/dkms/nvidia-open/580.95.05/build/make.log for more information.').format(ml) in out
    assert double_tools.cmd_dkms(['autoinstall', '-k', ml]) == 11
    assert 'Autoinstall on {0} failed for module(s) nvidia-open(10).'.format(ml) in capsys.readouterr().out
    log = (node.path / 'var/lib/dkms/nvidia-open/580.95.05/build/make.log').read_text()
    assert _dkms.log_kernel(log) == ml and 'Error 2' in _dkms.log_tail(log)[-4]
    assert double_tools.cmd_dkms(['status']) == 0
    entries = _dkms_status.parse_dkms_status(capsys.readouterr().out)
    assert _dkms.needed_for(entries, KERNEL, ml) == (['nvidia-open/580.95.05'], ['nvidia-open/580.95.05'])
    # Another glob: the ELRepo kernel builds, and a successful build removes the failed build's log.
    (node.path / 'var/lib/testbed/faults/dkms-build-fails').write_text('7.*\n')
    assert double_tools.cmd_dkms(['install', 'nvidia-open/580.95.05', '-k', ml]) == 0
    assert not (node.path / 'var/lib/dkms/nvidia-open/580.95.05/build/make.log').exists()
    assert _kernel_state.dkms_logs(str(node.path), entries) == {}


@pytest.mark.parametrize('series', ['3.0', '3.2'])
def test_dkms_status_with_a_stale_tree(node, capsys, series):
    """Fault dkms-stale-tree (dkms-project/dkms#352; REALITY.md "A stale DKMS tree"): a version tree whose source
    is gone.  The Debian-family nodes' dkms 3.0.x prints nothing past it, the error on stderr only, and exits 0, as
    the real dkms 3.0.10 did on the same tree (tests/fixtures/host/dkms-status.stale-first.*); autoinstall builds
    nothing.  EL's 3.2.x lists it as broken and goes on."""
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dkms_status
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _kernel_state
    node.profile()
    if series == '3.0':
        (node.path / 'var/lib/dpkg').mkdir(parents=True)
        (node.path / 'var/lib/dpkg/status').write_text('')
    src = node.path / 'usr/src/nvidia-580.95.05'
    src.mkdir(parents=True)
    (src / 'dkms.conf').write_text('PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="580.95.05"\nTESTBED_FLAVOUR="open"\n')
    hdr = node.path / 'usr/src/kernels' / KERNEL
    hdr.mkdir(parents=True)
    (hdr / 'Makefile').write_text('all:\n')
    os.symlink('/usr/src/kernels/' + KERNEL, str(node.path / 'lib/modules' / KERNEL / 'build'))
    assert double_tools.cmd_dkms(['install', 'nvidia/580.95.05', '-k', KERNEL]) == 0
    capsys.readouterr()
    assert os.readlink(str(node.path / 'var/lib/dkms/nvidia/580.95.05/source')) == '/usr/src/nvidia-580.95.05'
    stale = node.path / 'var/lib/dkms/nvidia/535.104.05'
    (stale / KERNEL / 'x86_64/module').mkdir(parents=True)
    (stale / KERNEL / 'x86_64/module/nvidia.ko').write_text('')
    os.symlink('/usr/src/nvidia-535.104.05', str(stale / 'source'))
    assert double_tools.cmd_dkms(['status']) == 0
    out, err = capsys.readouterr()
    capture = open(os.path.join(ROOT, 'tests/fixtures/host/dkms-status.stale-first.stderr')).read()
    if series == '3.0':
        assert (out, err) == ('', capture)
        assert double_tools.cmd_dkms(['autoinstall', '-k', KERNEL]) == 0
        assert capsys.readouterr() == ('', capture)
    else:
        assert out == 'nvidia/535.104.05: broken\nnvidia/580.95.05, {0}, x86_64: installed\n'.format(KERNEL)
        assert 'Missing the module source directory' in err
        assert [e['status'] for e in _dkms_status.parse_dkms_status(out)] == ['broken', 'installed']
    assert _kernel_state.dkms_tree(str(node.path)) == [
        {'module': 'nvidia', 'version': '535.104.05', 'source': False},
        {'module': 'nvidia', 'version': '580.95.05', 'source': True}]


def test_grubby_default_and_set_default(node, capsys):
    node.profile()
    (node.path / 'etc/machine-id').write_text('0123456789abcdef0123456789abcdef\n')
    for rel in (KERNEL, '6.1.150-1.el9.elrepo.x86_64'):
        assert bootloader.grubby(['--add-kernel=/boot/vmlinuz-' + rel, '--initrd=/boot/initramfs-{0}.img'.format(rel),
                                  '--title=T ' + rel]) == 0
    assert bootloader.grubby(['--set-default=/boot/vmlinuz-' + KERNEL]) == 0
    assert bootloader.grubby(['--default-kernel']) == 0
    assert bootloader.grubby(['--default-index']) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ['The default is /boot/loader/entries/0123456789abcdef0123456789abcdef-{0}.conf with index 0 '
                   'and kernel /boot/vmlinuz-{0}'.format(KERNEL), '/boot/vmlinuz-' + KERNEL, '0']
    assert bootloader.grubby(['--set-default=/boot/vmlinuz-nope']) == 1
    assert double_tools.selected_kernel() == KERNEL


# ---------------------------------------------------------------- issue 14 / issue 10 (R2, R13-R20)

LOST = 'Unable to determine the device handle for gpu 0000:96:00.0: Unknown Error\n'


def test_gpu_missing_keeps_indexes_names_the_gpu_and_exits_15(node):
    """R14/R16: the lost GPU is named, the others keep nvidia-smi's index, rc 15, partial data."""
    node.ready().fault('gpu-missing', '2\n')
    out, err, rc = nvsmi_double.invoke(['-L'], '580.95.05')
    assert rc == 15
    assert err == LOST
    assert [line.split(':')[0] for line in out.splitlines()] == [
        'GPU 0', 'GPU 1', 'GPU 3', 'GPU 4', 'GPU 5', 'GPU 6', 'GPU 7']
    out, err, rc = nvsmi_double.invoke(['--query-gpu=index,pci.bus_id', '--format=csv,noheader'], '580.95.05')
    assert (rc, err) == (15, LOST)
    assert [r.split(', ')[0] for r in out.splitlines()] == ['0', '1', '3', '4', '5', '6', '7']
    out, err, rc = nvsmi_double.invoke([], '580.95.05')
    assert (rc, err) == (15, LOST)
    assert '00000000:96:00.0' not in out and '00000000:97:00.0' in out
    assert node.smi('-i', '2', '-L') == ('', 15)
    assert "NVRM: Xid (PCI:0000:96:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." in \
        gd.render_kernel_log(gd.load_profile())


def test_gpu_missing_xml_is_partial_and_still_counts_the_gpu(node):
    node.ready().fault('gpu-missing', '0000:96:00.0 lost\n')
    out, err, rc = nvsmi_double.invoke(['-q', '-x'], '580.95.05')
    assert rc == 15
    assert err == ('Unable to determine the device handle for gpu 0000:96:00.0: GPU is lost. Reboot the system to '
                   'recover this GPU\n')
    assert '<attached_gpus>8</attached_gpus>' in out
    assert '<gpu id="00000000:96:00.0">' not in out
    assert re.findall(r'<minor_number>(\d+)</minor_number>', out) == ['0', '1', '3', '4', '5', '6', '7']
    pci = gd.write_pci_tree(gd.load_profile(), str(node.path / 'pci'))
    assert '0000:96:00.0' in pci  # still on the bus; only NVML cannot reach it


def test_gpu_missing_parses_with_the_collection(node):
    parse = _parser()
    node.ready().fault('gpu-missing', '2\n')
    gpus = _gpus(parse(node.smi('-q', '-x')[0]))
    assert [g['pci_bus_id'] for g in gpus] == ['00000000:8F:00.0', '00000000:90:00.0', '00000000:97:00.0',
                                               '00000000:C4:00.0', '00000000:C5:00.0', '00000000:CB:00.0',
                                               '00000000:CC:00.0']


def _sysfs(node):
    prof = gd.load_profile()
    pci = node.path / 'sys/bus/pci/devices'
    ib = node.path / 'sys/class/infiniband'
    gd.write_pci_tree(prof, str(pci))
    gd.write_ib_tree(prof, str(ib))
    return pci, ib


def test_b200_has_no_nvidia_bridge_but_sw_mng_connectx_functions(node):
    """R2: NVLink 5 switches are reached through ConnectX-7 functions whose VPD carries SMDL=SW_MNG."""
    node.profile('hgx-b200-8gpu')
    pci, ib = _sysfs(node)
    devs = dict((d.name, dict((f, (d / f).read_text().strip()) for f in ('vendor', 'device', 'class')))
                for d in pci.iterdir())
    assert [n for n, d in devs.items() if d['vendor'] == '0x10de' and d['class'] != '0x030200'] == []
    assert sorted(n for n, d in devs.items() if d['vendor'] == '0x15b3') == [
        '0000:05:00.0', '0000:05:00.1', '0000:06:00.0', '0000:06:00.1', '0000:18:00.0', '0000:2a:00.0',
        '0000:3b:00.0', '0000:4c:00.0', '0000:9a:00.0', '0000:ab:00.0', '0000:bb:00.0', '0000:db:00.0']
    assert set((d['device'], d['class']) for d in devs.values() if d['vendor'] == '0x15b3') == {
        ('0x1021', '0x020700')}
    # the real detection: /sys/class/infiniband/*/device/vpd containing SW_MNG
    hits = sorted(d.name for d in ib.iterdir() if b'SW_MNG' in (d / 'device' / 'vpd').read_bytes())
    assert hits == ['mlx5_0', 'mlx5_2']
    assert os.path.realpath(str(ib / 'mlx5_0' / 'device')) == str(pci / '0000:05:00.0')
    assert len(list(ib.iterdir())) == 12
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._kernel_state import scan_pci
    assert scan_pci(str(node.path))['nvswitch_count'] == 0


def test_connectx_vpd_is_real_binary_vpd(node):
    node.profile('hgx-b200-8gpu')
    pci, _ib = _sysfs(node)
    raw = (pci / '0000:05:00.0' / 'vpd').read_bytes()
    assert raw[:1] == b'\x82' and raw[-1:] == b'\x78'
    rv = raw.index(b'RV')
    assert sum(bytearray(raw[:rv + 4])) % 256 == 0  # pciutils: "checksum good"
    name, fields = gd.parse_vpd(raw)
    assert name == 'Nvidia ConnectX-7 mezz internal for Nvidia Umbriel system'
    assert fields['VA'] == 'MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:SMDL=SW_MNG:MODL=C7010Z'
    assert fields['PN'] == '692-9X760-00SE-S00'
    nic = gd.parse_vpd((pci / '0000:18:00.0' / 'vpd').read_bytes())[1]
    assert nic['PN'] == 'MCX755106AS-HEAT' and 'SW_MNG' not in nic['VA']
    assert oct(os.stat(str(pci / '0000:05:00.0' / 'vpd')).st_mode & 0o777) == '0o600'


@pytest.mark.parametrize('profile_name', ['hgx-h100-8gpu', 'hgx-h200-8gpu'])
def test_hopper_keeps_pci_nvswitches_and_plain_nics(node, profile_name):
    node.profile(profile_name)
    pci, ib = _sysfs(node)
    switches = sorted(d.name for d in pci.iterdir() if (d / 'class').read_text().strip() == '0x068000')
    assert switches == ['0000:05:00.0', '0000:06:00.0', '0000:07:00.0', '0000:08:00.0']
    assert [d.name for d in ib.iterdir() if b'SW_MNG' in (d / 'device' / 'vpd').read_bytes()] == []
    assert len(list(ib.iterdir())) == 8


def test_fabric_manager_runs_on_sw_mng_bridges(node, capsys, monkeypatch):
    node.ready('hgx-b200-8gpu')
    (node.path / 'run/gpu-double').mkdir(parents=True, exist_ok=True)
    (node.path / 'run/gpu-double/nvlsm.running').write_text('2025.06.4\n')
    monkeypatch.setattr(double_tools, '_run_forever', lambda cleanup: 0)
    assert double_tools.cmd_fabricmanager([], '580.95.05') == 0
    assert capsys.readouterr().out == 'nv-fabricmanager: started, version 580.95.05, 2 NVSwitch(es)\n'


def test_power_limit_reverts_when_the_last_client_exits_without_persistence(node):
    """R15: no persistence mode, no daemon: the setting dies with the invocation that made it."""
    node.ready()
    assert node.smi('-i', '1', '-pl', '700') == (
        'Power limit for GPU 00000000:90:00.0 was set to 700.00 W from 1000.00 W.\nAll done.\n', 0)
    assert node.smi('-i', '1', '--query-gpu=power.limit', '--format=csv,noheader') == ('1000.00 W\n', 0)
    node.smi('-i', '1', '-lgc', '1500,1500')
    assert node.smi('-i', '1', '--query-gpu=clocks.gr', '--format=csv,noheader') == ('120 MHz\n', 0)
    # with persistence mode the driver stays loaded and keeps them, until the next boot
    node.smi('-pm', '1')
    node.smi('-i', '1', '-pl', '700')
    assert node.smi('-i', '1', '--query-gpu=power.limit', '--format=csv,noheader') == ('700.00 W\n', 0)
    gd.ensure_state(gd.load_profile(), at_boot=True)
    assert node.smi('-i', '1', '--query-gpu=power.limit,persistence_mode', '--format=csv,noheader') == (
        '1000.00 W, Disabled\n', 0)


def test_persistenced_without_persistence_mode_keeps_nothing(node, monkeypatch, capsys):
    """Ubuntu's unit runs nvidia-persistenced --no-persistence-mode: persistence stays off (R7), settings go."""
    node.ready()
    monkeypatch.setattr(double_tools, '_run_forever', lambda cleanup: 0)
    assert double_tools.cmd_persistenced(['--user', 'nvidia-persistenced', '--no-persistence-mode', '--verbose'],
                                         '580.95.05') == 0
    node.smi('-i', '0', '-pl', '700')
    assert node.smi('-i', '0', '--query-gpu=power.limit,persistence_mode', '--format=csv,noheader') == (
        '1000.00 W, Disabled\n', 0)
    assert node.smi('-i', '0', '-pm', '1') == ('Enabled persistence mode for GPU {0}.\nAll done.\n'.format(B0), 0)
    assert double_tools.cmd_persistenced(['--verbose'], '580.95.05') == 0
    assert node.smi('--query-gpu=persistence_mode', '--format=csv,noheader')[0] == 'Enabled\n' * 8


def test_lgc_warns_only_without_persistence(node):
    node.ready()
    out = node.smi('-i', '0', '-lgc', '1500,1965')[0]
    assert out.endswith('\n\n{0}\nAll done.\n'.format(PM_WARN))
    node.smi('-pm', '1')
    assert node.smi('-i', '0', '-lgc', '1500,1965') == (
        'GPU clocks set to "(gpuClkMin 1500, gpuClkMax 1965)" for GPU {0}\nAll done.\n'.format(B0), 0)


@pytest.mark.parametrize('version,text', [('580.95.05', 'Enabled Legacy persistence mode'),
                                          ('570.148.08', 'Enabled persistence mode')])
def test_pm_text_by_branch(node, version, text):
    node.ready(version=version)
    assert node.smi('-i', '0', '-pm', '1', version=version) == (
        '{0} for GPU {1}.\nAll done.\n'.format(text, B0), 0)


def test_clock_lock_that_does_not_hold(node):
    """R17: the lock is accepted, the GPU runs lower; only the lock query shows the lock."""
    node.ready().fault('clocks-capped', '1400\n')
    node.smi('-pm', '1')
    assert node.smi('-i', '0', '-lgc', '1965,1965') == (
        'GPU clocks set to "(gpuClkMin 1965, gpuClkMax 1965)" for GPU {0}\nAll done.\n'.format(B0), 0)
    assert node.smi('-i', '0', '--query-gpu=clocks.gr,clocks.sm', '--format=csv,noheader') == (
        '1400 MHz, 1400 MHz\n', 0)
    xml = node.smi('-i', '0', '-q', '-x')[0]
    assert '<clocks_event_reason_sw_power_cap>Active</clocks_event_reason_sw_power_cap>' in xml


def test_out_of_band_power_cap(node):
    """R19: enforced limit below the requested one."""
    node.ready().fault('power-capped', '500\n')
    node.smi('-pm', '1')
    node.smi('-i', '0', '-pl', '700')
    assert node.smi('-i', '0', '--query-gpu=power.limit,enforced.power.limit', '--format=csv,noheader') == (
        '700.00 W, 500.00 W\n', 0)
    xml = node.smi('-i', '0', '-q', '-x')[0]
    assert '<current_power_limit>500.00 W</current_power_limit>' in xml
    assert '<requested_power_limit>700.00 W</requested_power_limit>' in xml


def _tag_paths(text):
    import xml.etree.ElementTree as ET
    out = set()

    def walk(elem, pre):
        for child in elem:
            out.add(pre + '/' + child.tag)
            walk(child, pre + '/' + child.tag)
    walk(ET.fromstring(text).find('gpu'), '')
    return out


@pytest.mark.parametrize('profile_name', ['hgx-b200-8gpu', 'hgx-h100-8gpu'])
def test_branch_570_prints_the_v12_layout(node, profile_name):
    """R18: the layout of the real 570 capture below 580, v13 from 580 on."""
    node.ready(profile_name, version='570.148.08')
    xml = node.smi('-q', '-x', version='570.148.08')[0]
    assert '"nvsmi_device_v12.dtd"' in xml
    with open(os.path.join(FIXTURES, 'nvidia-smi-xml', 'a100-sxm4-40gb-1gpu_k8s-test-infra.xml')) as f:
        assert _tag_paths(xml) == _tag_paths(f.read())
    assert '<gpu_reset_status>' in xml and '<voltage>' in xml and 'clocks_event_reasons_counters' not in xml
    (node.path / 'run/gpu-double/state.json').unlink()
    node.module('580.95.05')
    xml = node.smi('-q', '-x')[0]
    assert '"nvsmi_device_v13.dtd"' in xml and '<clocks_event_reasons_counters>' in xml


def test_v12_layout_parses_with_the_collection(node):
    parse = _parser()
    node.ready(version='570.148.08')
    gpus = _gpus(parse(node.smi('-q', '-x', version='570.148.08')[0]))
    assert len(gpus) == 8 and gpus[0]['pci_bus_id'] == B0


@pytest.mark.parametrize('version', ['590.48.01'])
def test_deprecated_ac_and_rac(node, version):
    node.ready(version=version)
    assert node.smi('-ac', '3996,1965', version=version) == ('The requested functionality has been deprecated.\n', 0)
    assert node.smi('-rac', version=version) == ('The requested functionality has been deprecated.\n', 0)


def test_secure_boot_rejects_the_module_until_healed(node, capsys):
    """R13: Secure Boot on, no enrolled MOK: the DKMS module is rejected; healed: it loads."""
    node.ready().fault('secure-boot')
    efivars = node.path / 'sys/firmware/efi/efivars'
    gd.write_efivars(str(efivars))
    assert (efivars / 'SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c').read_bytes() == b'\x06\x00\x00\x00\x01'
    assert double_tools.cmd_mokutil(['--sb-state']) == 0
    assert capsys.readouterr().out == 'SecureBoot enabled\n'
    (node.path / 'var/lib/dkms').mkdir(parents=True)
    (node.path / 'var/lib/dkms/mok.pub').write_text('key')
    assert double_tools.cmd_mokutil(['--test-key', '/var/lib/dkms/mok.pub']) == 0
    assert capsys.readouterr().out == '/var/lib/dkms/mok.pub is not enrolled\n'
    assert node.smi('-L') == (NO_DRIVER, 9)
    assert double_tools.cmd_modprobe(['nvidia']) == 1
    assert capsys.readouterr().err == "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
    log = gd.render_kernel_log(gd.load_profile())
    assert 'Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7' in log
    assert 'module verification failed: signature and/or required key missing' in log
    (node.path / 'var/lib/testbed/faults/secure-boot').unlink()
    gd.write_efivars(str(efivars))
    assert double_tools.cmd_mokutil(['--sb-state']) == 0
    assert capsys.readouterr().out == 'SecureBoot disabled\n'
    assert double_tools.cmd_modprobe(['nvidia']) == 0
    assert node.smi('-L')[1] == 0


def test_every_call_is_counted(node):
    node.ready()
    for argv in (['-L'], ['-q', '-x'], ['--version']):
        node.smi(*argv)
    lines = (node.path / 'run/gpu-double/calls.log').read_text().splitlines()
    assert [line.split(' ', 1)[1] for line in lines] == ['-L', '-q -x', '--version']


# ---------------------------------------------------------------- PCIe switches, ACS, nvidia_peermem


def _acs_ctl(config):
    return struct.unpack_from('<H', config, 0x106)[0]


def test_every_gpu_and_nic_sits_below_a_switch_downstream_port(node, tmp_path):
    node.profile()
    profile = gd.load_profile()
    bridges = gd.pci_switches(profile)
    below = dict((dev, name) for name, b in bridges.items() if b['kind'] == 'downstream' for dev in b['below'])
    gpus = [gd.sysfs_bus_id(g['pci_bus_id']) for g in profile['gpus']]
    assert all(bus in below for bus in gpus + [d['bus_id'] for d in profile['connectx']])
    gd.write_pci_tree(profile, str(tmp_path / 'pci'))
    port = tmp_path / 'pci' / below[gpus[0]]
    config = (port / 'config').read_bytes()
    assert len(config) == 4096 and config[0x0e] == 0x01  # a Type 1 header: lspci reads the bus numbers
    assert struct.unpack_from('<H', config, 0x100)[0] == 0x000d  # the ACS extended capability
    assert _acs_ctl(config) == 0  # ACS off, as on the PEX890xx ports of the HGX H100 capture
    assert [(port / f).read_text() for f in ('irq', 'resource')] == ['0\n', '']


def test_acs_on_fault_sets_the_redirect_bits_above_the_gpu(node, tmp_path):
    node.profile()
    node.fault('acs-on', '1\n')
    profile = gd.load_profile()
    bridges = gd.pci_switches(profile)
    gpu1 = gd.sysfs_bus_id(profile['gpus'][1]['pci_bus_id'])
    port = [n for n, b in bridges.items() if b['kind'] == 'downstream' and gpu1 in b['below']][0]
    gd.write_pci_tree(profile, str(tmp_path / 'pci'))
    on = [n for n, b in bridges.items() if b['kind'] == 'downstream'
          and _acs_ctl((tmp_path / 'pci' / n / 'config').read_bytes()) == gd.ACS_ON]
    assert on == [port]


def test_peermem_needs_the_peer_api(node):
    node.ready()
    tools = double_tools
    assert tools.cmd_modprobe(['nvidia_peermem']) == 0
    assert gd.peermem_loaded()
    assert 'ib_register_peer_memory_client' in gd.kallsyms_text()
    node.fault('rdma-no-peer-api')
    assert not gd.peermem_loaded()
    assert 'ib_register_peer_memory_client' not in gd.kallsyms_text()
    assert tools.cmd_modprobe(['nvidia_peermem']) == 1
    node.fault('peermem-unloaded')
    assert not gd.peermem_loaded()


def test_dkms_remove_all_takes_the_tree_and_3_0_lists_an_unbuilt_lost_source_as_added(node, capsys):
    """dkms remove --all (what the NVIDIA packages' prerm runs) deletes the version from the DKMS tree, so a purged
    driver leaves no stale tree behind; dkms 3.0.x lists a tree whose source is gone but which has no build as
    added (is_module_added only looks at the source link), 3.2.x as broken."""
    node.profile()
    (node.path / 'var/lib/dpkg').mkdir(parents=True)
    (node.path / 'var/lib/dpkg/status').write_text('')
    src = node.path / 'usr/src/nvidia-580.95.05'
    src.mkdir(parents=True)
    (src / 'dkms.conf').write_text('PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="580.95.05"\nTESTBED_FLAVOUR="open"\n')
    hdr = node.path / 'usr/src/kernels' / KERNEL
    hdr.mkdir(parents=True)
    (hdr / 'Makefile').write_text('all:\n')
    os.symlink('/usr/src/kernels/' + KERNEL, str(node.path / 'lib/modules' / KERNEL / 'build'))
    assert double_tools.cmd_dkms(['install', 'nvidia/580.95.05', '-k', KERNEL]) == 0
    assert double_tools.cmd_dkms(['remove', '-m', 'nvidia', '-v', '580.95.05', '--all']) == 0
    assert not (node.path / 'var/lib/dkms/nvidia/580.95.05').exists()
    shutil.rmtree(str(src))  # the package's files go after its prerm
    capsys.readouterr()
    lost = node.path / 'var/lib/dkms/nvidia/570.86.15'
    (lost / KERNEL / 'x86_64').mkdir(parents=True)
    os.symlink('/usr/src/nvidia-570.86.15', str(lost / 'source'))
    assert double_tools.cmd_dkms(['status']) == 0
    assert capsys.readouterr() == ('nvidia/570.86.15: added\n', '')


def test_peermem_built_without_ofed(node, capsys):
    """Fault peermem-no-ofed (issue 30): the peer-memory API is in kallsyms, yet nvidia_peermem's init returns -EINVAL
    (kernel-open/nvidia-peermem/nvidia-peermem.c without NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT) and its modinfo names
    no dependency."""
    node.ready()
    tools = double_tools
    assert tools.cmd_modinfo(['-F', 'depends', 'nvidia_peermem']) == 0
    assert capsys.readouterr().out == 'ib_core,nvidia\n'
    node.fault('peermem-no-ofed')
    assert 'ib_register_peer_memory_client' in gd.kallsyms_text()
    assert tools.cmd_modinfo(['-F', 'depends', 'nvidia_peermem']) == 0
    assert capsys.readouterr().out == '\n'
    assert tools.cmd_modprobe(['nvidia_peermem']) == 1
    assert capsys.readouterr().err == "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument\n"
    assert not gd.peermem_loaded()


def test_modinfo_peermem_needs_the_driver(node, capsys):
    node.profile()
    assert double_tools.cmd_modinfo(['-F', 'depends', 'nvidia_peermem']) == 1
    assert capsys.readouterr().err == 'modinfo: ERROR: Module nvidia_peermem not found.\n'


def test_dmabuf_symbol_from_linux_5_12(node):
    node.ready()
    assert 'ib_umem_dmabuf_get' in gd.kallsyms_text()
    assert gd.kernel_has_dmabuf('6.1.0-40-amd64') and gd.kernel_has_dmabuf('5.14.0-570.58.1.el9_6.x86_64')
    assert not gd.kernel_has_dmabuf('4.18.0-553.el8_10.x86_64') and not gd.kernel_has_dmabuf('5.11.22')


def test_detect_virt(node, capsys):
    # systemd-detect-virt(1): "none" and a non-zero exit on bare metal
    assert double_tools.cmd_detect_virt(['--vm']) == 1
    assert capsys.readouterr().out == 'none\n'
    node.fault('virtual-machine', 'kvm\n')
    assert double_tools.cmd_detect_virt(['--vm']) == 0
    assert capsys.readouterr().out == 'kvm\n'
    assert double_tools.cmd_detect_virt(['--vm', '--quiet']) == 0
    assert capsys.readouterr().out == ''

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPUDirect RDMA parsers and rules (parsers/_rdma_path.py, parsers/_kernel_cmdline.py, rules/_rdma.py,
collect/_rdma_state.py) on a real HGX H100 `lspci -vvv` capture (tests/fixtures/lspci)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rdma as R
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _rdma_path
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _rdma_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _kernel_cmdline

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))),
                        'fixtures', 'lspci')
H100 = os.path.join(FIXTURES, 'hgx-h100-8gpu-pex890xx_lspci-vvv_gpud.txt')
# The capture's eight H100 (10de:2330) and its ConnectX functions (grep "^..:..\.. .*(2330|Mellanox)").
H100_GPUS = ['0000:19:00.0', '0000:3b:00.0', '0000:4c:00.0', '0000:5d:00.0',
             '0000:9b:00.0', '0000:bb:00.0', '0000:cb:00.0', '0000:db:00.0']


@pytest.fixture(scope='module')
def devices():
    with open(H100) as handle:
        return _rdma_path.parse_lspci_vvv(handle.read())


def by_id(devices, bus):
    return [d for d in devices if d['bus_id'] == bus][0]


def test_capture_devices(devices):
    gpus = sorted(d['bus_id'] for d in devices if _rdma_path.device_kind(d) == 'gpu')
    assert gpus == H100_GPUS
    nics = [d['bus_id'] for d in devices if _rdma_path.device_kind(d) == 'nic']
    assert '0000:1a:00.0' in nics and '0000:1b:00.1' in nics
    port = by_id(devices, '0000:17:01.0')
    assert port['port'] == 'Downstream Port'
    assert (port['secondary'], port['subordinate']) == (0x19, 0x19)
    assert port['acs_ctl'] == dict((flag, False) for flag in _rdma_path.ACS_FLAGS)
    nvswitch_port = by_id(devices, '0000:82:00.0')
    assert nvswitch_port['acs_ctl']['ReqRedir'] and nvswitch_port['acs_ctl']['CmpltRedir']
    assert by_id(devices, '0000:15:01.0')['port'] == 'Root Port'
    assert by_id(devices, '0000:16:00.0')['port'] == 'Upstream Port'


def test_bridges_above_gpu(devices):
    chain = [b['bus_id'] for b in R.bridges_above(devices, '0000:19:00.0')]
    assert chain == ['0000:17:01.0', '0000:16:00.0', '0000:15:01.0']


def rdma_from(devices, connectx=('0000:1a:00.0',)):
    return {'connectx': list(connectx), 'peermem_loaded': True, 'cmdline': '', 'bridges': _rdma_state.relevant_devices(devices),
            'lspci_error': None, 'iommu': {'groups': 0}, 'peer_symbols': None}


def test_acs_passes_on_the_capture(devices):
    # ACS is on at the PMC-Sierra ports above the NVSwitches, which are neither GPUs nor NICs: not a finding.
    status, _expected, observed = R.acs_result(rdma_from(devices), H100_GPUS)
    assert status == R.PASS
    assert observed == 'ACS redirect off on 9 switch downstream ports above 9 GPUs/ConnectX devices'


def test_acs_fails_naming_the_bridge(devices):
    rdma = rdma_from(devices)
    port = [b for b in rdma['bridges'] if b['bus_id'] == '0000:17:01.0'][0]
    port['acs_ctl'] = _rdma_path.parse_acs_flags('SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- '
                                                 'DirectTrans-')
    status, _expected, observed = R.acs_result(rdma, H100_GPUS)
    assert status == R.FAIL
    assert observed == ('ACS redirects peer traffic through the root complex at switch downstream port '
                        '0000:17:01.0 (above GPU 0000:19:00.0): ACSCtl ReqRedir+ CmpltRedir+')
    assert R.acs_ports_to_clear(rdma, H100_GPUS) == ['0000:17:01.0']


def test_acs_only_switch_downstream_ports(devices):
    # SrcValid+ on a root port above a GPU is not a redirect; a root port's ACS is not a switch's.
    rdma = rdma_from(devices)
    root = [b for b in rdma['bridges'] if b['bus_id'] == '0000:15:01.0'][0]
    root['acs_ctl'] = _rdma_path.parse_acs_flags('SrcValid+ ReqRedir+ CmpltRedir+')
    assert R.acs_result(rdma, H100_GPUS)[0] == R.PASS


@pytest.mark.parametrize('rdma, status, text', [
    ({'connectx': []}, R.SKIP, 'no ConnectX/InfiniBand device on the PCI bus'),
    (None, R.SKIP, 'the RDMA facts were not gathered'),
    ({'connectx': ['0000:1a:00.0'], 'lspci_error': 'lspci not found (install pciutils)'}, R.FAIL,
     'lspci -D -vvv could not be read: lspci not found (install pciutils)'),
    # empty lspci output (it passed before, as a node without PCIe switches)
    ({'connectx': ['0000:1a:00.0'], 'bridges': []}, R.FAIL,
     'lspci -D -vvv listed no PCI device (empty output), so the switch ports above the 1 GPUs/ConnectX devices could '
     'not be judged'),
    ({'connectx': ['0000:1a:00.0'], 'bridges': None}, R.FAIL,
     'lspci -D -vvv listed no PCI device (empty output), so the switch ports above the 1 GPUs/ConnectX devices could '
     'not be judged'),
])
def test_acs_table(rdma, status, text):
    assert R.acs_result(rdma, [])[0::2] == (status, text)


def test_acs_no_switch_still_passes():
    # a GPU and a ConnectX straight under root ports (no switch), both listed: nothing to judge, a pass
    text = ('0000:00:01.0 PCI bridge: Intel Corporation Device 352a\n\tBus: primary=00, secondary=01, subordinate=01'
            '\n\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00\n\n'
            '0000:01:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n\n'
            '0000:00:02.0 PCI bridge: Intel Corporation Device 352a\n\tBus: primary=00, secondary=02, subordinate=02'
            '\n\n0000:02:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]\n')
    rdma = {'connectx': ['0000:02:00.0'], 'bridges': _rdma_state.relevant_devices(_rdma_path.parse_lspci_vvv(text))}
    assert R.acs_result(rdma, ['0000:01:00.0'])[0::2] == (
        R.PASS, 'no PCIe switch between the 2 GPUs/ConnectX devices and their root ports')


@pytest.mark.parametrize('cut', [0.25, 0.5, 'db:00.0 3D controller'])
def test_acs_truncated_capture_fails(cut):
    # the real HGX H100 capture cut short: the GPUs and NICs past the cut are not listed, so ACS is not proven
    with open(H100) as handle:
        text = handle.read()
    end = text.index(cut) if isinstance(cut, str) else int(len(text) * cut)
    devices = _rdma_path.parse_lspci_vvv(text[:end])
    status, _expected, observed = R.acs_result(rdma_from(devices), H100_GPUS)
    assert status == R.FAIL, observed
    assert 'GPUs/ConnectX devices (' in observed and 'its output is cut short' in observed
    assert 'GPU 0000:db:00.0' in observed


def test_acs_five_digit_domain():
    # a VMD domain (10000:...) as lspci -D prints it: parsed and judged, no crash (it raised ValueError before)
    text = ('10000:e0:06.0 PCI bridge: Intel Corporation 12th Gen Core Processor PCI Express x4 Controller #0 (rev 02)'
            '\n\tBus: primary=00, secondary=e1, subordinate=e1, sec-latency=0\n'
            '\tCapabilities: [40] Express (v2) Downstream Port (Slot+), MSI 00\n'
            '\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n\n'
            '10000:e1:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n\n'
            '0000:1a:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]\n')
    devices = _rdma_path.parse_lspci_vvv(text)
    assert [d['bus_id'] for d in devices] == ['10000:e0:06.0', '10000:e1:00.0', '0000:1a:00.0']
    assert [b['bus_id'] for b in R.bridges_above(devices, '10000:e1:00.0')] == ['10000:e0:06.0']
    rdma = {'connectx': ['0000:1a:00.0'], 'bridges': _rdma_state.relevant_devices(devices)}
    status, _expected, observed = R.acs_result(rdma, ['10000:e1:00.0'])
    assert status == R.FAIL
    assert observed == ('ACS redirects peer traffic through the root complex at switch downstream port '
                        '10000:e0:06.0 (above GPU 10000:e1:00.0): ACSCtl ReqRedir+ CmpltRedir+')


@pytest.mark.parametrize('bus_id, want', [
    ('0000:19:00.0', (0, 0x19)), ('00000000:19:00.0', (0, 0x19)), ('10000:e1:00.0', (0x10000, 0xe1)),
    ('19:00.0', (0, 0x19)), ('nonsense', (None, None)), ('zz:yy:00.0', (None, None)), (None, (None, None)),
])
def test_split_bus_id(bus_id, want):
    assert R.split_bus_id(bus_id) == want


def test_device_kind_without_pci_ids():
    # lspci without the pci.ids database prints the vendor:device ids instead of names
    assert _rdma_path.device_kind({'class': '3D controller', 'description': 'Device 10de:2330 (rev a1)'}) == 'gpu'
    assert _rdma_path.device_kind({'class': 'Infiniband controller', 'description': 'Device 15b3:1021'}) == 'nic'
    assert _rdma_path.device_kind({'class': '3D controller', 'description': 'Device 1002:74a1'}) is None


def test_acs_denied():
    text = '0000:00:01.0 PCI bridge: Intel Corporation Device\n\tBus: primary=00, secondary=01, subordinate=01, ' \
           'sec-latency=0\n\tCapabilities: <access denied>\n\n0000:01:00.0 3D controller: NVIDIA Corporation ' \
           'Device 2330 (rev a1)\n'
    devices = _rdma_path.parse_lspci_vvv(text)
    rdma = {'connectx': ['0000:aa:00.0'], 'bridges': _rdma_state.relevant_devices(devices)}
    status, _e, observed = R.acs_result(rdma, ['0000:01:00.0'])
    assert status == R.FAIL and 'not readable' in observed and '0000:00:01.0' in observed


CX = ['0000:1a:00.0']


@pytest.mark.parametrize('rdma, path, release, flavour, status, text', [
    ({'connectx': CX, 'peermem_loaded': True}, 'auto', None, None, R.PASS,
     'nvidia_peermem loaded (/sys/module/nvidia_peermem)'),
    ({'connectx': CX, 'peermem_loaded': False, 'peer_symbols': list(_rdma_path.PEER_MEMORY_SYMBOLS)}, 'auto', None, None,
     # issue 30: auto names why DMA-BUF cannot serve before it asks for nvidia_peermem
     R.FAIL, 'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX 0000:1a:00.0; DMA-BUF cannot '
             'serve here (the running kernel is unknown; the loaded nvidia module is of unknown flavour, not the open '
             'kernel modules): load nvidia_peermem (rdma role, nodeprep_rdma_peermem: true)'),
    ({'connectx': CX, 'peermem_loaded': False, 'peer_symbols': []}, 'peermem', None, None, R.FAIL,
     'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX 0000:1a:00.0; the RDMA stack lacks '
     'ib_register_peer_memory_client, ib_unregister_peer_memory_client (/proc/kallsyms), so modprobe nvidia_peermem '
     'fails with "Unknown symbol ib_register_peer_memory_client"'),
    ({'connectx': CX, 'peermem_loaded': False}, 'dmabuf', '5.14.0-503.el9.x86_64', 'open', R.PASS,
     'DMA-BUF (kernel 5.14.0-503.el9.x86_64, open kernel modules); nvidia_peermem not loaded'),
    ({'connectx': CX, 'peermem_loaded': False}, 'dmabuf', '4.18.0-553.el8.x86_64', 'proprietary', R.FAIL,
     'DMA-BUF declared but kernel 4.18.0-553.el8.x86_64 is older than 5.12; the loaded nvidia module is '
     'proprietary, not the open kernel modules'),
    ({'connectx': []}, 'auto', None, None, R.SKIP, 'no ConnectX/InfiniBand device on the PCI bus'),
])
def test_peer_memory_table(rdma, path, release, flavour, status, text):
    assert R.peer_memory_result(rdma, path, release, flavour)[0::2] == (status, text)


def test_path_setting_checked():
    with pytest.raises(R.RdmaError, match="nodeprep_rdma_path: 'gdr' is not one of auto, peermem, dmabuf"):
        R.peer_memory_result({'connectx': CX}, 'gdr')


@pytest.mark.parametrize('want, rdma, path, release, flavour, action', [
    (False, {'connectx': CX}, 'auto', None, None, 'skip'),
    (True, {'connectx': []}, 'auto', None, None, 'skip'),
    # DMA-BUF declared: the role asks dmabuf_possible (Linux 5.12 or later and the open kernel modules), whether or
    # not it loads nvidia_peermem; a node that cannot serve it is refused, never told "nvidia_peermem not needed".
    (True, {'connectx': CX}, 'dmabuf', '6.8.0-45-generic', 'open', 'dmabuf'),
    (True, {'connectx': CX}, 'dmabuf', '6.8.0-45-generic', 'proprietary', 'fail'),
    (False, {'connectx': CX}, 'dmabuf', '6.8.0-45-generic', 'proprietary', 'fail'),
    (True, {'connectx': CX}, 'dmabuf', '4.18.0-553.el8.x86_64', 'open', 'fail'),
    (True, {'connectx': CX}, 'dmabuf', None, None, 'fail'),
    (False, {'connectx': CX}, 'dmabuf', '6.8.0-45-generic', 'open', 'skip'),
    (True, {'connectx': []}, 'dmabuf', None, 'proprietary', 'skip'),
    (True, {'connectx': CX, 'peermem_loaded': True}, 'auto', None, None, 'none'),
    (True, {'connectx': CX, 'peer_symbols': list(_rdma_path.PEER_MEMORY_SYMBOLS)}, 'auto', None, None, 'load'),
    (True, {'connectx': CX, 'peer_symbols': list(_rdma_path.PEER_MEMORY_SYMBOLS)}, 'peermem', None, None, 'load'),
    (True, {'connectx': CX, 'peer_symbols': []}, 'auto', '6.8.0-45-generic', 'open', 'dmabuf'),
    (True, {'connectx': CX, 'peer_symbols': []}, 'peermem', '6.8.0-45-generic', 'open', 'fail'),
    (True, {'connectx': CX, 'peer_symbols': []}, 'auto', '6.8.0-45-generic', 'proprietary', 'fail'),
    (True, {'connectx': CX, 'peer_symbols': None}, 'auto', None, None, 'fail'),
])
def test_peermem_plan_table(want, rdma, path, release, flavour, action):
    assert R.peermem_plan(rdma, want, path, release, flavour)['action'] == action


def test_peermem_plan_refuses_dmabuf_on_the_proprietary_modules():
    """The reproduced disagreement: nodeprep_rdma_path dmabuf with nodeprep_rdma_peermem true on a node with the
    proprietary modules: the plan said "nvidia_peermem not needed" while readiness failed the node."""
    plan = R.peermem_plan({'connectx': CX}, True, 'dmabuf', '5.14.0-570.58.1.el9_6.x86_64', 'proprietary')
    assert plan == {'action': 'fail', 'persist': False, 'msg': (
        'DMA-BUF declared (nodeprep_rdma_path: dmabuf) but the loaded nvidia module is proprietary, not the open '
        'kernel modules; DMA-BUF needs Linux 5.12 or later and the open kernel modules: declare nodeprep_rdma_path: '
        'auto or peermem (with nodeprep_rdma_peermem: true) for this node, or load the open kernel modules')}
    status, _expected, observed = R.peer_memory_result({'connectx': CX}, 'dmabuf', '5.14.0-570.58.1.el9_6.x86_64',
                                                       'proprietary')
    assert (status, observed) == ('fail', 'DMA-BUF declared but the loaded nvidia module is proprietary, not the '
                                          'open kernel modules')


def test_peermem_plan_names_the_symbol():
    plan = R.peermem_plan({'connectx': CX, 'peer_symbols': ['ib_unregister_peer_memory_client']}, True, 'peermem')
    assert plan['msg'] == ('cannot load nvidia_peermem: the RDMA stack lacks ib_register_peer_memory_client '
                           '(modprobe would fail with "Unknown symbol ib_register_peer_memory_client"; install '
                           'MLNX_OFED/DOCA-OFED)')


@pytest.mark.parametrize('cmdline, passthrough, off', [
    ('BOOT_IMAGE=/vmlinuz-5.14 root=/dev/sda1 ro iommu=pt', True, False),
    ('intel_iommu=on iommu=pt', True, False),
    ('intel_iommu=on,sm_on', None, False),
    ('amd_iommu=off', None, True),
    ('iommu.passthrough=1', True, False),
    ('iommu=pt iommu=nopt', False, False),
    ('quiet -- iommu=pt', None, False),
])
def test_iommu_cmdline(cmdline, passthrough, off):
    said = _kernel_cmdline.iommu_cmdline(_kernel_cmdline.parse_cmdline(cmdline))
    assert (said['passthrough'], said['off']) == (passthrough, off)


@pytest.mark.parametrize('iommu, cmdline, status, text', [
    ({'groups': 0}, 'quiet', R.PASS, 'IOMMU off: no IOMMU group in /sys/kernel/iommu_groups (cmdline: no IOMMU '
                                     'parameter)'),
    ({'groups': 90, 'device_types': {'0000:19:00.0': 'identity', '0000:1a:00.0': 'identity'}}, 'iommu=pt',
     R.PASS, 'IOMMU in passthrough (90 groups, identity for all 2 devices); cmdline: iommu=pt'),
    ({'groups': 90, 'device_types': {'0000:19:00.0': 'DMA-FQ', '0000:1a:00.0': 'DMA-FQ'}}, 'intel_iommu=on',
     R.FAIL, 'IOMMU translating DMA for GPU 0000:19:00.0 (group type DMA-FQ), ConnectX 0000:1a:00.0 (group type '
             'DMA-FQ); cmdline: intel_iommu=on'),
    ({'groups': 90, 'device_types': {}}, 'intel_iommu=on', R.FAIL,
     'IOMMU on (90 groups) and no iommu=pt on the command line; group type unknown for GPU 0000:19:00.0, '
     'ConnectX 0000:1a:00.0'),
    ({'groups': 90, 'device_types': {}}, 'intel_iommu=on iommu=pt', R.PASS,
     'IOMMU in passthrough (90 groups); cmdline: intel_iommu=on iommu=pt'),
])
def test_iommu_table(iommu, cmdline, status, text):
    rdma = {'connectx': ['0000:1a:00.0'], 'iommu': iommu, 'cmdline': cmdline}
    assert R.iommu_result(rdma, ['0000:19:00.0'])[0::2] == (status, text)


def test_kallsyms_symbols():
    text = ('ffffffffc0a01230 T ib_register_peer_memory_client\t[ib_core]\n'
            'ffffffffc0a01300 t ib_umem_get\t[ib_core]\n'
            'ffffffffc0a01400 t ib_unregister_peer_memory_client_x\t[other]\n')
    assert _rdma_path.kallsyms_symbols(text) == ['ib_register_peer_memory_client']
    assert _rdma_path.kallsyms_symbols('0 T ib_unregister_peer_memory_client') == ['ib_unregister_peer_memory_client']


def test_collect_reads_sysfs(tmp_path):
    root = tmp_path
    for bus, vendor in (('0000:1a:00.0', '0x15b3'), ('0000:19:00.0', '0x10de'), ('0000:05:00.0', '0x15b3')):
        dev = root / 'sys/bus/pci/devices' / bus
        dev.mkdir(parents=True)
        (dev / 'vendor').write_text(vendor + '\n')
    (root / 'proc').mkdir()
    (root / 'proc/cmdline').write_text('ro iommu=pt\n')
    (root / 'proc/kallsyms').write_text('0000000000000000 T ib_register_peer_memory_client\t[ib_core]\n')
    facts = _rdma_state.collect_rdma_facts(None, str(root), None, ['0000:19:00.0'], ['0000:05:00.0'])
    assert facts['connectx'] == ['0000:1a:00.0']
    assert facts['peer_symbols'] == ['ib_register_peer_memory_client']
    assert facts['cmdline'] == 'ro iommu=pt'
    assert facts['lspci_error'].startswith('lspci reads the running system only')
    # copy: the parsed facts are plain data
    assert copy.deepcopy(facts) == facts


# ---------------------------------------------------------------- iommu=pt through the kernel role (a decision table)

BLS_PT = {'bls': {'abc-5.14.0.conf': 'root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M iommu=pt'},
          'grub_cmdline_linux': 'crashkernel=1G-4G:192M', 'grub_cmdline_linux_default': ''}
BLS_NONE = {'bls': {'abc-5.14.0.conf': 'root=/dev/mapper/rl-root ro', 'abc-0-rescue.conf': None},
            'grub_cmdline_linux': '', 'grub_cmdline_linux_default': ''}
GRUB = {'bls': {}, 'grub_cmdline_linux': 'console=ttyS0', 'grub_cmdline_linux_default': 'quiet splash'}


@pytest.mark.parametrize('family, running, boot, grubby, line, reboot', [
    ('el', 'ro iommu=pt', BLS_PT, None, None, False),
    ('el', 'ro', BLS_PT, None, None, True),
    ('el', 'ro', {'bls': {'abc-5.14.0.conf': 'root=/dev/sda ro'}},
     ['grubby', '--update-kernel=ALL', '--args=iommu=pt'], None, True),
    ('el', 'ro intel_iommu=off', {'bls': {'a.conf': 'ro intel_iommu=off'}}, None, None, False),
    ('debian', 'quiet', GRUB, None, 'GRUB_CMDLINE_LINUX="console=ttyS0 iommu=pt"', True),
    ('debian', 'quiet iommu=pt', dict(GRUB, grub_cmdline_linux='iommu=pt'), None, None, False),
])
def test_iommu_boot_plan(family, running, boot, grubby, line, reboot):
    got = R.iommu_boot_plan(family, running, boot)
    assert (got['grubby'], got['grub_line'], got['reboot'], got['error']) == (grubby, line, reboot, None)


def test_iommu_boot_plan_without_default_grub():
    got = R.iommu_boot_plan('debian', 'quiet', {'bls': {}, 'grub_cmdline_linux': None})
    assert got['error'] == 'iommu=pt: /etc/default/grub not found, so the kernel command line cannot be set'


def test_boot_args_from_the_tree(tmp_path):
    entries = tmp_path / 'boot/loader/entries'
    entries.mkdir(parents=True)
    (entries / 'abc-5.14.0.conf').write_text('title Rocky\nversion 5.14.0\nlinux /vmlinuz-5.14.0\noptions root=/dev/sda '
                                             'ro iommu=pt\n')
    (entries / 'abc-0-rescue.conf').write_text('options ro\n')
    (tmp_path / 'etc/default').mkdir(parents=True)
    (tmp_path / 'etc/default/grub').write_text('GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="crashkernel=auto rhgb"\n')
    assert _rdma_state.read_boot_args(str(tmp_path)) == {'bls': {'abc-5.14.0.conf': 'root=/dev/sda ro iommu=pt'},
                                                         'grub_cmdline_linux': 'crashkernel=auto rhgb',
                                                         'grub_cmdline_linux_default': ''}


# ---------------------------------------------------------------- issue 30: DMA-BUF first under auto

# Kernel releases of the distributions we support (uname -r of Rocky 9.6, Ubuntu 24.04, Rocky 8.10) and driver
# versions of NVIDIA's repositories (580.82.07 open, 470.256.02: the last branch without the open kernel modules).
EL9, NOBLE, EL8 = '5.14.0-570.58.1.el9_6.x86_64', '6.8.0-45-generic', '4.18.0-553.el8_10.x86_64'
OFED = list(_rdma_path.PEER_MEMORY_SYMBOLS)
DMABUF = list(_rdma_path.DMABUF_SYMBOLS)
# modinfo -F depends nvidia_peermem: built with MLNX_OFED/DOCA-OFED it uses ib_core's
# ib_register_peer_memory_client and nvidia's nvidia_p2p_*; built without, nv_mem_client_init only returns -EINVAL
# (kernel-open/nvidia-peermem/nvidia-peermem.c) and the module uses no symbol of either.
WITH_OFED = {'found': True, 'depends': ['ib_core', 'nvidia']}
NO_OFED = {'found': True, 'depends': []}


def rdma_state(**kw):
    state = {'connectx': CX, 'peermem_loaded': False, 'peer_symbols': OFED, 'dmabuf_symbols': DMABUF,
             'peermem_module': WITH_OFED}
    state.update(kw)
    return state


@pytest.mark.parametrize('rdma, path, release, flavour, version, status, text', [
    # the issue's node: open kernel modules, kernel 5.12+, ConnectX, no nvidia_peermem: ready under auto
    (rdma_state(), 'auto', EL9, 'open', '580.82.07', R.PASS,
     'DMA-BUF (kernel 5.14.0-570.58.1.el9_6.x86_64, open kernel modules); nvidia_peermem not loaded'),
    (rdma_state(peermem_loaded=True, peer_symbols=None, dmabuf_symbols=None), 'auto', NOBLE, 'open', '580.82.07',
     R.PASS, 'DMA-BUF (kernel 6.8.0-45-generic, open kernel modules); nvidia_peermem loaded'),
    # the RDMA stack without DMA-BUF registration
    (rdma_state(dmabuf_symbols=[]), 'auto', EL9, 'open', '580.82.07', R.FAIL,
     'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX 0000:1a:00.0; DMA-BUF cannot serve '
     'here (the RDMA stack lacks ib_umem_dmabuf_get (/proc/kallsyms)): load nvidia_peermem (rdma role, '
     'nodeprep_rdma_peermem: true)'),
    (rdma_state(), 'auto', EL8, 'open', '580.82.07', R.FAIL,
     'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX 0000:1a:00.0; DMA-BUF cannot serve '
     'here (kernel 4.18.0-553.el8_10.x86_64 is older than 5.12): load nvidia_peermem (rdma role, '
     'nodeprep_rdma_peermem: true)'),
    (rdma_state(peermem_loaded=True), 'auto', EL8, 'proprietary', '470.256.02', R.PASS,
     'nvidia_peermem loaded (/sys/module/nvidia_peermem)'),
    # the nvidia_peermem built before OFED: named, and DMA-BUF's blocker too
    (rdma_state(peermem_module=NO_OFED), 'auto', EL9, 'proprietary', '580.82.07', R.FAIL,
     'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX 0000:1a:00.0; nvidia_peermem was '
     'built without the peer-memory API of MLNX_OFED/DOCA-OFED (modinfo -F depends nvidia_peermem: none; no ib_core): '
     'its init returns -EINVAL and modprobe nvidia_peermem fails with "Invalid argument"; rebuild the driver after '
     'installing OFED (dkms install, or reinstall the driver packages); DMA-BUF cannot serve here (the loaded nvidia '
     'module is proprietary, not the open kernel modules)'),
    (rdma_state(peermem_module=NO_OFED), 'peermem', EL9, 'open', '580.82.07', R.FAIL,
     'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX 0000:1a:00.0; nvidia_peermem was '
     'built without the peer-memory API of MLNX_OFED/DOCA-OFED (modinfo -F depends nvidia_peermem: none; no ib_core): '
     'its init returns -EINVAL and modprobe nvidia_peermem fails with "Invalid argument"; rebuild the driver after '
     'installing OFED (dkms install, or reinstall the driver packages)'),
    (rdma_state(), 'dmabuf', EL9, 'open', '510.108.03', R.FAIL, 'DMA-BUF declared but driver 510.108.03 is older than 515'),
])
def test_peer_memory_path_in_use(rdma, path, release, flavour, version, status, text):
    assert R.peer_memory_result(rdma, path, release, flavour, version)[0::2] == (status, text)


@pytest.mark.parametrize('rdma, path, release, flavour, action, words', [
    # auto: DMA-BUF where it serves, the legacy module never loaded there
    (rdma_state(), 'auto', EL9, 'open', 'dmabuf', 'DMA-BUF (kernel 5.14.0-570.58.1.el9_6.x86_64, open kernel '
                                                  'modules, RDMA stack with ib_umem_dmabuf_get); nvidia_peermem not '
                                                  'loaded'),
    (rdma_state(peermem_loaded=True), 'auto', EL9, 'open', 'dmabuf', 'nvidia_peermem not loaded'),
    (rdma_state(), 'auto', EL9, 'proprietary', 'load', 'load nvidia_peermem'),
    (rdma_state(dmabuf_symbols=[]), 'auto', NOBLE, 'open', 'load', 'load nvidia_peermem'),
    (rdma_state(), 'peermem', EL9, 'open', 'load', 'load nvidia_peermem'),
    # built before OFED: refused before any modprobe, naming the rebuild
    (rdma_state(peermem_module=NO_OFED), 'peermem', EL9, 'open', 'fail',
     'rebuild the driver after installing OFED'),
    (rdma_state(peermem_module=NO_OFED), 'auto', EL8, 'open', 'fail',
     'rebuild the driver after installing OFED (dkms install, or reinstall the driver packages), and DMA-BUF cannot '
     'serve: kernel 4.18.0-553.el8_10.x86_64 is older than 5.12; nothing changed'),
    (rdma_state(peermem_module=NO_OFED), 'auto', EL9, 'open', 'dmabuf', 'nvidia_peermem not loaded'),
    # modinfo not answering (None) or the module not built for this kernel: no claim about OFED
    (rdma_state(peermem_module={'found': None, 'depends': None}), 'peermem', EL9, 'open', 'load', 'load'),
    (rdma_state(peermem_module={'found': False, 'depends': None}), 'peermem', EL9, 'open', 'load', 'load'),
])
def test_peermem_plan_dmabuf_first(rdma, path, release, flavour, action, words):
    plan = R.peermem_plan(rdma, True, path, release, flavour, '580.82.07')
    assert plan['action'] == action and words in plan['msg']


@pytest.mark.parametrize('rc, out, err, found, depends', [
    # modinfo(8) -F prints the field's value (empty line for an empty field); kmod's "not found" message
    (0, 'ib_core,nvidia\n', '', True, ['ib_core', 'nvidia']),
    (0, '\n', '', True, []),
    (1, '', 'modinfo: ERROR: Module nvidia_peermem not found.\n', False, None),
    (127, '', 'modinfo: command not found', None, None),
])
def test_parse_modinfo_depends(rc, out, err, found, depends):
    assert _rdma_path.parse_modinfo_depends(rc, out, err) == (found, depends)


@pytest.mark.parametrize('rc, out, vendor, product, name, source', [
    # systemd-detect-virt(1): prints the technology, or "none" and exits non-zero
    (0, 'kvm\n', None, None, 'kvm', 'systemd-detect-virt --vm'),
    (1, 'none\n', 'QEMU', 'Standard PC (Q35 + ICH9, 2009)', 'none', 'systemd-detect-virt --vm'),
    (None, None, 'QEMU\n', 'Standard PC (Q35 + ICH9, 2009)\n', 'qemu', '/sys/class/dmi/id'),
    (None, None, 'Microsoft Corporation\n', 'Virtual Machine\n', 'microsoft', '/sys/class/dmi/id'),
    (None, None, 'Supermicro\n', 'SYS-821GE-TNHR\n', 'none', '/sys/class/dmi/id'),
    (None, None, None, None, None, None),
])
def test_virtualization(rc, out, vendor, product, name, source):
    assert _rdma_path.virtualization(rc, out, vendor, product) == {'name': name, 'source': source}


def test_acs_vm_refusal_names_node_and_virtualization():
    assert R.acs_vm_refusal({'name': 'none', 'source': 'systemd-detect-virt --vm'}, 'gpu01') is None
    assert R.acs_vm_refusal({'name': None, 'source': None}, 'gpu01') is None
    assert R.acs_vm_refusal({'name': 'kvm', 'source': 'systemd-detect-virt --vm'}, 'gpu01') == (
        'gpu01 is a virtual machine (systemd-detect-virt --vm: kvm): ACS must stay on in a virtual machine, so the ACS '
        "boot unit is refused; set nodeprep_rdma_acs_unit: false for it and leave ACS to the hypervisor's host")


# ---------------------------------------------------------------- issue 30: ACS ports found by their place

# The capture's switch downstream ports above its GPUs and ConnectX functions (lspci -t of the same node).
H100_ACS_PORTS = ['0000:17:01.0', '0000:17:02.0', '0000:17:03.0', '0000:39:01.0', '0000:39:02.0', '0000:4a:01.0',
                  '0000:4a:02.0', '0000:5b:01.0', '0000:5b:02.0', '0000:99:01.0', '0000:99:02.0', '0000:99:03.0',
                  '0000:b9:01.0', '0000:b9:02.0', '0000:c9:01.0', '0000:c9:02.0', '0000:d9:01.0', '0000:d9:02.0']


def renumbered(text, shift):
    """The capture as the node shows it after a BIOS or adapter change moved every bus from 0x10 up by ``shift``."""
    import re

    def bus(value):
        number = int(value, 16)
        return '{0:02x}'.format(number + shift if number >= 0x10 else number)
    text = re.sub(r'^([0-9a-f]{4}:)?([0-9a-f]{2}):([0-9a-f]{2}\.)',
                  lambda m: '{0}{1}:{2}'.format(m.group(1) or '', bus(m.group(2)), m.group(3)), text, flags=re.M)
    return re.sub(r'(primary|secondary|subordinate)=([0-9a-f]{2})',
                  lambda m: '{0}={1}'.format(m.group(1), bus(m.group(2))), text)


def test_acs_unit_ports_plan_and_boot_agree(devices):
    # the plan reads the gathered devices, the boot script lspci's own: one function, one answer
    assert R.acs_unit_ports(devices) == H100_ACS_PORTS
    assert R.acs_unit_ports(_rdma_state.relevant_devices(devices)) == H100_ACS_PORTS
    # the NVSwitch ports (ACS on, nothing of ours below) are not touched
    assert '0000:82:00.0' not in R.acs_unit_ports(devices)


def test_acs_unit_ports_follow_a_renumbering():
    with open(H100) as handle:
        moved = _rdma_path.parse_lspci_vvv(renumbered(handle.read(), 2))
    expected = ['0000:{0:02x}:{1}'.format(int(port[5:7], 16) + 2, port[8:]) for port in H100_ACS_PORTS]
    assert R.acs_unit_ports(moved) == expected
    assert R.setpci_argv(expected[0]) == ['setpci', '-s', '0000:19:01.0', 'ECAP_ACS+0x6.w=0000']


class FakeModule(object):
    def __init__(self, tools):
        self.tools = tools

    def get_bin_path(self, name, opt_dirs=None):
        return self.tools.get(name)


def test_collect_reads_dmabuf_symbols_and_dmi(tmp_path):
    root = tmp_path
    dev = root / 'sys/bus/pci/devices/0000:1a:00.0'
    dev.mkdir(parents=True)
    (dev / 'vendor').write_text('0x15b3\n')
    (root / 'sys/class/dmi/id').mkdir(parents=True)
    (root / 'sys/class/dmi/id/sys_vendor').write_text('QEMU\n')
    (root / 'sys/class/dmi/id/product_name').write_text('Standard PC (Q35 + ICH9, 2009)\n')
    (root / 'proc').mkdir()
    (root / 'proc/kallsyms').write_text('0000000000000000 T ib_umem_dmabuf_get\t[ib_core]\n'
                                        '0000000000000000 T ib_register_peer_memory_client\t[ib_core]\n')
    facts = _rdma_state.collect_rdma_facts(None, str(root), None, [], [])
    assert (facts['peer_symbols'], facts['dmabuf_symbols']) == (['ib_register_peer_memory_client'],
                                                                ['ib_umem_dmabuf_get'])
    assert facts['virtualization'] == {'name': 'qemu', 'source': '/sys/class/dmi/id'}


def test_collect_asks_modinfo_and_systemd_detect_virt():
    calls = []

    def run_status(module, argv):
        calls.append(argv)
        return {'/usr/bin/systemd-detect-virt': (1, 'none\n', ''),
                '/usr/sbin/modinfo': (0, '\n', '')}[argv[0]]
    module = FakeModule({'systemd-detect-virt': '/usr/bin/systemd-detect-virt', 'modinfo': '/usr/sbin/modinfo'})
    assert _rdma_state.read_virtualization(module, '/nonexistent-root/', run_status)['name'] is None
    bare_metal = {'name': 'none', 'source': 'systemd-detect-virt --vm'}
    assert _rdma_state.read_virtualization(module, '/', run_status) == bare_metal
    assert _rdma_state.read_peermem_module(module, run_status) == {'found': True, 'depends': []}
    assert calls == [['/usr/bin/systemd-detect-virt', '--vm'], ['/usr/sbin/modinfo', '-F', 'depends', 'nvidia_peermem']]
    assert _rdma_state.read_peermem_module(FakeModule({}), run_status) == {'found': None, 'depends': None}

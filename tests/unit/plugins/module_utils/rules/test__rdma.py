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
    ({'connectx': ['0000:1a:00.0'], 'bridges': []}, R.PASS,
     'no PCIe switch between the 1 GPUs/ConnectX devices and their root ports'),
])
def test_acs_table(rdma, status, text):
    assert R.acs_result(rdma, [])[0::2] == (status, text)


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
     R.FAIL, 'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX 0000:1a:00.0; load it (rdma role, '
             'nodeprep_rdma_peermem: true) or declare DMA-BUF (nodeprep_rdma_path: dmabuf)'),
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

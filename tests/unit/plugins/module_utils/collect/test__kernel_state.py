# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVLink 5 switch bridges (R2), Secure Boot and the DKMS MOK (R13), and roots that cannot be read."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import struct

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _kernel_state as K
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _kernel

RELEASE = '6.12.0-55.el10.x86_64'


def _vpd(model, part):
    """A PCI VPD blob in the layout of the spec (identifier string, then VPD-R keywords).

    The keyword values are the ones R2 names (SMDL=SW_MNG on the switch bridge); the rest of the blob is made up.
    """
    ident = b'NVIDIA ConnectX-7'
    keywords = b''
    for key, value in ((b'PN', part), (b'SN', b'MT0000X00000'), (b'SMDL', model)):
        keywords += key[:2] + struct.pack('B', len(value)) + value if key != b'SMDL' else \
            b'V0' + struct.pack('B', len(b'SMDL=' + value)) + b'SMDL=' + value
    return b'\x82' + struct.pack('<H', len(ident)) + ident + b'\x90' + struct.pack('<H', len(keywords)) + keywords + b'\x78'


def _tree(tmp_path, nvswitch_pci=False, bridges=0, nics=0, efi=None):
    root = tmp_path / 'root'
    (root / 'proc/sys/kernel').mkdir(parents=True)
    (root / 'proc/sys/kernel/osrelease').write_text(RELEASE + u'\n')
    (root / 'sys/bus/pci/devices').mkdir(parents=True)
    (root / 'sys/class/infiniband').mkdir(parents=True)
    devices = [('0000:1b:00.0', '0x10de', '0x2901', '0x030200')]
    if nvswitch_pci:
        devices.append(('0000:05:00.0', '0x10de', '0x22a3', '0x068000'))
    for bus, vendor, device, klass in devices:
        d = root / 'sys/bus/pci/devices' / bus
        d.mkdir()
        (d / 'vendor').write_text(vendor + u'\n')
        (d / 'device').write_text(device + u'\n')
        (d / 'class').write_text(klass + u'\n')
    functions = [('mlx5_{0}'.format(i), '0000:{0:02x}:00.0'.format(0x40 + i), b'SW_MNG') for i in range(bridges)]
    functions += [('mlx5_{0}'.format(10 + i), '0000:{0:02x}:00.0'.format(0x90 + i), b'MCX75310AAS-NEAT')
                  for i in range(nics)]
    for ib, bus, model in functions:
        d = root / 'sys/devices/pci0000:00' / bus
        d.mkdir(parents=True)
        (d / 'vendor').write_text(u'0x15b3\n')
        (d / 'device').write_text(u'0x1021\n')
        (d / 'class').write_text(u'0x020700\n')
        (d / 'vpd').write_bytes(_vpd(model, b'MCX750500B-0D00'))
        (root / 'sys/class/infiniband' / ib).mkdir()
        # A relative link, the way sysfs links class devices to their PCI function.
        os.symlink('../../../devices/pci0000:00/' + bus, str(root / 'sys/class/infiniband' / ib / 'device'))
    if efi is not None:
        (root / 'sys/firmware/efi/efivars').mkdir(parents=True)
        (root / K.SECURE_BOOT_EFIVAR).write_bytes(b'\x06\x00\x00\x00' + (b'\x01' if efi else b'\x00'))
    return str(root)


class NoTools(object):
    def get_bin_path(self, name, required=False):
        return None

    def run_command(self, argv, **kwargs):
        raise AssertionError('no command expected, got {0}'.format(argv))


@pytest.mark.parametrize('kwargs, fabric, switches, bridges', [
    # HGX B200: no NVIDIA PCI bridges, two SW_MNG bridge functions beside eight ordinary CX-7 NICs (same device id).
    ({'bridges': 2, 'nics': 8}, 'nvlink5', 0, ['mlx5_0', 'mlx5_1']),
    # HGX H100/H200: NVSwitches on the PCI bus, CX-7 NICs without SW_MNG.
    ({'nvswitch_pci': True, 'nics': 8}, 'pci', 1, []),
    # A PCIe node: neither.
    ({'nics': 2}, 'none', 0, []),
])
def test_nvswitch_fabric(tmp_path, kwargs, fabric, switches, bridges):
    pci = K.collect_kernel_facts(NoTools(), root=_tree(tmp_path, **kwargs))['pci']
    assert pci['nvswitch_fabric'] == fabric
    assert pci['nvswitch_count'] == switches
    assert [b['ib_device'] for b in pci['nvlink5_bridges']] == bridges
    assert pci['nvlink5_bridge_count'] == len(bridges)


def test_nvlink5_bridge_fields(tmp_path):
    bridges = K.scan_nvlink5_bridges(_tree(tmp_path, bridges=1, nics=1))
    assert bridges == [{'ib_device': 'mlx5_0', 'bus_id': '0000:40:00.0', 'device_id': '0x1021'}]


def test_nvswitch_fabric_function():
    assert [_kernel.nvswitch_fabric(0, 0), _kernel.nvswitch_fabric(4, 0), _kernel.nvswitch_fabric(0, 2), _kernel.nvswitch_fabric(1, 2)] == [
        'none', 'pci', 'nvlink5', 'nvlink5']


@pytest.mark.parametrize('text, expected', [
    ('SecureBoot enabled\n', True),
    ('SecureBoot disabled\nPlatform is in Setup Mode\n', False),
    ('EFI variables are not supported on this system\n', None),
    ('', None),
])
def test_parse_sb_state(text, expected):
    assert _kernel.parse_sb_state(text) is expected


@pytest.mark.parametrize('text, expected', [
    ('/var/lib/dkms/mok.pub is already enrolled\n', True),
    ('/var/lib/dkms/mok.pub is not enrolled\n', False),
    ('Failed to read /var/lib/dkms/mok.pub\n', None),
])
def test_parse_mok_test_key(text, expected):
    assert _kernel.parse_mok_test_key(text) is expected


@pytest.mark.parametrize('efi, enabled, source', [
    (True, True, '/' + K.SECURE_BOOT_EFIVAR),
    (False, False, '/' + K.SECURE_BOOT_EFIVAR),
    (None, False, 'no /sys/firmware/efi (legacy BIOS boot)'),
])
def test_secure_boot_from_tree(tmp_path, efi, enabled, source):
    facts = K.collect_kernel_facts(NoTools(), root=_tree(tmp_path, efi=efi))
    assert facts['secure_boot']['enabled'] is enabled
    assert facts['secure_boot']['source'] == source
    assert facts['secure_boot']['dkms_mok'] == {'path': None, 'enrolled': None}


class Mokutil(object):
    """The Secure Boot fault of the testbed: mokutil says enabled, the DKMS key is not enrolled."""

    def __init__(self, sb_state, test_key):
        self.outputs = {'--sb-state': sb_state, '--test-key': test_key}
        self.seen = []

    def get_bin_path(self, name, required=False):
        return '/usr/bin/mokutil' if name == 'mokutil' else None

    def run_command(self, argv, **kwargs):
        self.seen.append(argv)
        assert kwargs['environ_update']['LC_ALL'] == 'C'
        return 0, self.outputs[argv[1]], ''


def test_secure_boot_mokutil_live(tmp_path, monkeypatch):
    module = Mokutil('SecureBoot enabled\n', '/var/lib/dkms/mok.pub is not enrolled\n')
    monkeypatch.setattr(K.os.path, 'exists', lambda path, real=os.path.exists: path == '/var/lib/dkms/mok.pub' or
                        real(path))
    result = K._secure_boot(module, '/', [])
    assert result == {'enabled': True, 'source': 'mokutil --sb-state',
                      'dkms_mok': {'path': '/var/lib/dkms/mok.pub', 'enrolled': False}}
    assert module.seen == [['/usr/bin/mokutil', '--sb-state'], ['/usr/bin/mokutil', '--test-key', '/var/lib/dkms/mok.pub']]


def test_root_missing_is_refused_by_name(tmp_path):
    missing = str(tmp_path / 'nonexistent')
    with pytest.raises(_kernel.KernelError) as err:
        K.collect_kernel_facts(NoTools(), root=missing)
    assert str(err.value) == ('root={0} is not a directory; give / or a tree holding proc/sys/kernel/osrelease'
                              .format(missing))


def test_root_without_release_is_refused_not_the_host(tmp_path):
    (tmp_path / 'etc').mkdir()
    with pytest.raises(_kernel.KernelError) as err:
        K.collect_kernel_facts(NoTools(), root=str(tmp_path))
    assert 'root={0} has no proc/sys/kernel/osrelease'.format(tmp_path) in str(err.value)
    assert os.uname()[2] not in str(err.value)


# --------------------------------------------------------------------------------- dkms status, the DKMS tree, apt

def _fixture(*parts):
    return open(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'fixtures', *parts)).read()


def test_dkms_status_that_lists_nothing_and_says_so_on_stderr_is_reported():
    """dkms 3.0.x with a stale tree (the capture: nothing on stdout, the error on stderr, exit 0): no entries, and
    what it said kept for the rules (dkms-project/dkms#352)."""
    from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FakeModule
    stderr = _fixture('host', 'dkms-status.stale-first.stderr')
    module = FakeModule({'dkms': '/usr/sbin/dkms'}, [(0, _fixture('host', 'dkms-status.stale-first.stdout'), stderr)])
    warnings = []
    entries, status = K._dkms(module, '/', warnings)
    assert module.seen == [['/usr/sbin/dkms', 'status']]
    assert entries == [] and warnings == []
    assert status == {'ran': True, 'rc': 0, 'stderr': stderr.strip(), 'problems': []}


def test_an_unparsable_dkms_status_line_does_not_fail_the_kernel_facts():
    from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FakeModule
    out = 'nvidia/580.95.05 6.8.0-60-generic x86_64 installed\nzfs/2.2.2, 6.8.0-60-generic, x86_64: installed\n'
    module = FakeModule({'dkms': '/usr/sbin/dkms'}, [(0, out, '')])
    warnings = []
    entries, status = K._dkms(module, '/', warnings)
    assert [e['module'] for e in entries] == ['zfs']
    assert status['problems'] == warnings == [
        "dkms status line 1: cannot parse 'nvidia/580.95.05 6.8.0-60-generic x86_64 installed'"]
    failed = FakeModule({'dkms': '/usr/sbin/dkms'}, [(4, '', 'Error! something')])
    assert K._dkms(failed, '/', warnings) == ([], {'ran': True, 'rc': 4, 'stderr': 'Error! something',
                                                   'problems': []})
    assert K._dkms(FakeModule({}, []), '/', []) == ([], {'ran': False, 'missing': True})


def test_dkms_tree_names_every_nvidia_version_and_its_source(tmp_path):
    root = tmp_path
    stale = root / 'var/lib/dkms/nvidia/535.104.05'
    (stale / '6.8.0-60-generic/x86_64/module').mkdir(parents=True)
    os.symlink('/usr/src/nvidia-535.104.05', str(stale / 'source'))
    good = root / 'var/lib/dkms/nvidia/580.95.05'
    good.mkdir(parents=True)
    (root / 'usr/src/nvidia-580.95.05').mkdir(parents=True)
    os.symlink('/usr/src/nvidia-580.95.05', str(good / 'source'))
    os.symlink('580.95.05/6.8.0-60-generic/x86_64', str(root / 'var/lib/dkms/nvidia/kernel-6.8.0-60-generic-x86_64'))
    (root / 'var/lib/dkms/zfs/2.2.2').mkdir(parents=True)
    assert K.dkms_tree(str(root)) == [{'module': 'nvidia', 'version': '535.104.05', 'source': False},
                                      {'module': 'nvidia', 'version': '580.95.05', 'source': True}]


def test_apt_candidates_from_apt_cache_policy():
    """One apt-cache policy over the names (the capture: a name apt does not know is left out, a virtual package
    shows (none))."""
    from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FakeModule
    names = ['bash', 'mail-transport-agent', 'nosuchpkg-r4', 'zstd']
    module = FakeModule({'apt-cache': '/usr/bin/apt-cache'},
                        [(0, _fixture('packages', 'apt-cache-policy.stdout'), '')])
    warnings = []
    assert K.apt_candidates(module, names, warnings) == {'bash': '5.2.15-2+b13', 'mail-transport-agent': None,
                                                         'nosuchpkg-r4': None, 'zstd': '1.5.4+dfsg2-5+deb12u1'}
    assert module.seen == [['/usr/bin/apt-cache', 'policy'] + names] and warnings == []
    assert K.apt_candidates(FakeModule({}, []), [], warnings) == {}
    assert K.apt_candidates(FakeModule({'apt-cache': '/usr/bin/apt-cache'}, [(100, '', 'E: broken')]), names,
                            warnings) is None and warnings == ['apt-cache policy failed (rc=100): E: broken']

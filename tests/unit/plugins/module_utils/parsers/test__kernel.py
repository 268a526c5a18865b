# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _kernel as K
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _kernel_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dkms_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _os_release
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._driver_node import KERNEL_PACKAGE_RE
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._package_db import (
    parse_dpkg as parse_dpkg_list,
    parse_rpm as parse_rpm_list,
)

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

HOST = os.path.join(FIXTURES, 'host')
EL9_A = '5.14.0-503.14.1.el9_5.x86_64'
EL9_B = '5.14.0-503.21.1.el9_5.x86_64'


def read(name):
    with open(os.path.join(HOST, name)) as handle:
        return handle.read()


@pytest.mark.parametrize('name, expected', [
    ('nvidia-version.open-570', {'version': '570.86.15', 'flavour': 'open'}),
    ('nvidia-version.proprietary-535', {'version': '535.161.08', 'flavour': 'proprietary'}),
    ('nvidia-version.open-580-aarch64', {'version': '580.95.05', 'flavour': 'open'}),
])
def test_nvidia_version_file(name, expected):
    assert K.parse_nvidia_version_file(read(name)) == expected


@pytest.mark.parametrize('text, message', [
    ('', "/proc/driver/nvidia/version: first line '' does not start with 'NVRM version:'"),
    ('NVRM version: NVIDIA UNIX x86_64 Kernel Module  unknown\n',
     "/proc/driver/nvidia/version: no driver version in 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  unknown'"),
])
def test_nvidia_version_file_errors(text, message):
    with pytest.raises(K.KernelError) as exc:
        K.parse_nvidia_version_file(text)
    assert str(exc.value) == message


@pytest.mark.parametrize('text, expected', [('Dual MIT/GPL\n', 'open'), ('NVIDIA\n', 'proprietary')])
def test_license_flavour(text, expected):
    assert K.license_flavour(text) == expected


def test_license_flavour_error():
    with pytest.raises(K.KernelError) as exc:
        K.license_flavour('GPL\n')
    assert str(exc.value) == "modinfo -F license nvidia printed 'GPL' (expected 'Dual MIT/GPL' or 'NVIDIA')"


def test_dkms_old_and_new():
    assert _dkms_status.parse_dkms_status(read('dkms-status.old')) == [
        {'module': 'nvidia', 'version': '535.161.08', 'kernel': '5.15.0-105-generic', 'arch': 'x86_64',
         'status': 'installed', 'detail': 'installed'},
        {'module': 'nvidia', 'version': '535.161.08', 'kernel': '5.15.0-107-generic', 'arch': 'x86_64',
         'status': 'built', 'detail': 'built'},
    ]
    assert _dkms_status.parse_dkms_status(read('dkms-status.new')) == [
        {'module': 'nvidia', 'version': '570.86.15', 'kernel': EL9_A, 'arch': 'x86_64',
         'status': 'installed', 'detail': 'installed'},
        {'module': 'nvidia', 'version': '570.86.15', 'kernel': EL9_B, 'arch': 'x86_64',
         'status': 'installed', 'detail': 'installed (WARNING! Diff between built and installed module!)'},
        {'module': 'nvidia-fs', 'version': '2.24.3', 'kernel': None, 'arch': None,
         'status': 'added', 'detail': 'added'},
    ]


@pytest.mark.parametrize('text, message', [
    ('nvidia: installed', "dkms status line 1: no module version in 'nvidia: installed'"),
    ('nvidia/1.0, 5.14: installed', "dkms status line 1: expected 'kernel, arch' after the version in "
                                    "'nvidia/1.0, 5.14: installed'"),
    ('garbage', "dkms status line 1: cannot parse 'garbage'"),
])
def test_dkms_errors(text, message):
    with pytest.raises(K.KernelError) as exc:
        _dkms_status.parse_dkms_status(text)
    assert str(exc.value) == message


@pytest.mark.parametrize('text, lines', [
    (read('modprobe.nvidia-installer-disable-nouveau.conf'), [(1, 'blacklist nouveau')]),
    ('install nouveau /bin/false\n', [(1, 'install nouveau /bin/false')]),
    ('install nouveau /usr/bin/true\n# blacklist nouveau\n', [(1, 'install nouveau /usr/bin/true')]),
    ('blacklist nouveau_fb\noptions nouveau modeset=0\n', []),
])
def test_modprobe_conf(text, lines):
    assert K.parse_modprobe_conf(text) == lines


@pytest.mark.parametrize('cmdline, hits', [
    ('BOOT_IMAGE=(hd0,gpt2)/vmlinuz ro rd.driver.blacklist=nouveau modprobe.blacklist=nouveau',
     ['rd.driver.blacklist=nouveau', 'modprobe.blacklist=nouveau']),
    ('ro modprobe.blacklist=radeon,nouveau quiet', ['modprobe.blacklist=radeon,nouveau']),
    ('ro nouveau.modeset=0', []),
])
def test_cmdline(cmdline, hits):
    assert K.cmdline_blacklist(cmdline) == hits


@pytest.mark.parametrize('cfg, env, expected', [
    ('grub.cfg.debian12', '', '6.1.0-28-amd64'),
    ('grub.cfg.debian12', 'next_entry=gnulinux-advanced-0f5e2f1c-1b8e-4f55-8c1d-8a9e6a4b2c10>'
                          'gnulinux-6.1.0-25-amd64-advanced-0f5e2f1c-1b8e-4f55-8c1d-8a9e6a4b2c10\n', '6.1.0-25-amd64'),
    ('grub.cfg.debian12', 'saved_entry=1>2\n', '6.1.0-28-amd64'),
    ('grub.cfg.ubuntu-saved', read('grubenv.saved-6.1.0-25'), '6.1.0-25-amd64'),
    ('grub.cfg.ubuntu-saved', 'saved_entry=1>2\n', '6.1.0-25-amd64'),
    ('grub.cfg.ubuntu-saved', 'saved_entry=Advanced options for Debian GNU/Linux\n', '6.1.0-28-amd64'),
    ('grub.cfg.ubuntu-saved', '', '6.1.0-28-amd64'),
    ('grub.cfg.ubuntu-saved', 'saved_entry=7\n', None),
])
def test_grub_default(cfg, env, expected):
    parsed = K.parse_grub_cfg(read(cfg))
    assert K.resolve_grub_default(parsed, K.parse_grubenv(env)) == expected


def test_grub_tree():
    parsed = K.parse_grub_cfg(read('grub.cfg.debian12'))
    assert [e['title'] for e in parsed['entries']] == ['Debian GNU/Linux', 'Advanced options for Debian GNU/Linux']
    assert [c['release'] for c in parsed['entries'][1]['children']] == [
        '6.1.0-28-amd64', '6.1.0-28-amd64', '6.1.0-25-amd64']
    assert parsed['defaults'] == ['${next_entry}', '0']


def _el9_tree(tmp_path, saved=True):
    root = tmp_path
    for rel in ('boot/loader/entries', 'boot/grub2', 'proc/sys/kernel', 'etc/modprobe.d', 'usr/lib/modprobe.d',
                'sys/bus/pci/devices', 'usr/src/kernels/' + EL9_B):
        (root / rel).mkdir(parents=True, exist_ok=True)
    for name in os.listdir(os.path.join(HOST, 'bls.el9')):
        shutil.copy(os.path.join(HOST, 'bls.el9', name), str(root / 'boot/loader/entries' / name))
    if saved:
        shutil.copy(os.path.join(HOST, 'grubenv.el9'), str(root / 'boot/grub2/grubenv'))
    (root / 'boot/grub2/grub.cfg').write_text(u'insmod blscfg\nblscfg\n')
    for release in (EL9_A, EL9_B):
        (root / 'lib/modules' / release).mkdir(parents=True)
        (root / 'lib/modules' / release / 'vmlinuz').write_text(u'')
        (root / 'boot' / ('vmlinuz-' + release)).write_text(u'')
    (root / 'lib/modules/5.14.0-427.13.1.el9_4.x86_64/extra').mkdir(parents=True)
    os.symlink('/usr/src/kernels/' + EL9_B, str(root / 'lib/modules' / EL9_B / 'build'))
    os.symlink('/usr/src/kernels/' + EL9_A, str(root / 'lib/modules' / EL9_A / 'build'))
    (root / 'boot' / 'vmlinuz-0-rescue-2f0d1c6a9b8e4e57a0c5d3f1e2b4a697').write_text(u'')
    (root / 'proc/sys/kernel/osrelease').write_text(EL9_A + u'\n')
    (root / 'proc/cmdline').write_text(u'BOOT_IMAGE=(hd0,gpt2)/vmlinuz ro modprobe.blacklist=nouveau\n')
    (root / 'proc/modules').write_text(u'nvidia_uvm 1830912 0 - Live 0x0000000000000000 (POE)\n'
                                       u'nvidia 14381056 1 nvidia_uvm, Live 0x0000000000000000 (POE)\n')
    (root / 'proc/driver/nvidia').mkdir(parents=True)
    shutil.copy(os.path.join(HOST, 'nvidia-version.open-570'), str(root / 'proc/driver/nvidia/version'))
    shutil.copy(os.path.join(HOST, 'modprobe.nvidia-installer-disable-nouveau.conf'),
                str(root / 'usr/lib/modprobe.d/nvidia-installer-disable-nouveau.conf'))
    (root / 'usr/lib/modprobe.d/hidden.conf').write_text(u'blacklist nouveau\n')
    (root / 'etc/modprobe.d/hidden.conf').write_text(u'# masks the vendor file\n')
    devices = [('0000:18:00.0', '0x10de', '0x2330', '0x030200'),   # H100 SXM
               ('0000:2a:00.0', '0x10de', '0x2330', '0x030200'),
               ('0000:05:00.0', '0x10de', '0x22a3', '0x068000'),   # NVSwitch
               ('0000:00:1f.0', '0x8086', '0x1bca', '0x060100'),
               ('0000:03:00.0', '0x1a03', '0x2000', '0x030000')]  # ASPEED BMC VGA
    for bus, vendor, device, klass in devices:
        d = root / 'sys/bus/pci/devices' / bus
        d.mkdir()
        (d / 'vendor').write_text(vendor + u'\n')
        (d / 'device').write_text(device + u'\n')
        (d / 'class').write_text(klass + u'\n')
    dkms = root / 'var/lib/dkms/nvidia/570.86.15' / EL9_A / 'x86_64/module'
    dkms.mkdir(parents=True)
    (dkms / 'nvidia.ko.xz').write_text(u'')
    (root / 'var/lib/dkms/nvidia/570.86.15' / EL9_B / 'x86_64/module').mkdir(parents=True)
    (root / 'var/lib/dkms/nvidia/570.86.15' / EL9_B / 'x86_64/module/nvidia.ko.xz').write_text(u'')
    (root / 'lib/modules' / EL9_A / 'extra').mkdir()
    (root / 'lib/modules' / EL9_A / 'extra/nvidia.ko.xz').write_text(u'')
    return str(root)


class NoTools(object):
    def get_bin_path(self, name, required=False):
        return None

    def run_command(self, argv, **kwargs):
        raise AssertionError('no command expected, got {0}'.format(argv))


def test_collect_el9_tree(tmp_path):
    facts = _kernel_state.collect_kernel_facts(NoTools(), root=_el9_tree(tmp_path))
    assert facts['running'] == EL9_A
    assert facts['installed'] == [EL9_A, EL9_B]
    assert facts['module_dirs'] == ['5.14.0-427.13.1.el9_4.x86_64', EL9_A, EL9_B]
    assert facts['default'] == EL9_A
    assert facts['default_source'] == 'bls:boot/grub2/grub.cfg'
    assert facts['devel'] == {EL9_A: False, EL9_B: True}
    assert facts['nouveau']['loaded'] is False
    assert facts['nouveau']['blacklisted'] is True
    assert [os.path.basename(f) for f in facts['nouveau']['blacklist_files']] == [
        'nvidia-installer-disable-nouveau.conf']
    assert facts['nouveau']['cmdline'] == ['modprobe.blacklist=nouveau']
    assert facts['nvidia_module'] == {'loaded': True, 'version': '570.86.15', 'flavour': 'open',
                                      'source': '/proc/driver/nvidia/version'}
    assert facts['dkms'] == [
        {'module': 'nvidia', 'version': '570.86.15', 'kernel': EL9_A, 'arch': 'x86_64', 'status': 'installed',
         'detail': 'installed'},
        {'module': 'nvidia', 'version': '570.86.15', 'kernel': EL9_B, 'arch': 'x86_64', 'status': 'built',
         'detail': 'built'}]
    assert facts['pci']['gpu_count'] == 2
    assert facts['pci']['gpus'][0] == {'bus_id': '0000:18:00.0', 'device_id': '0x2330', 'vendor_id': '0x10de',
                                       'class': '0x030200'}
    assert facts['pci']['nvswitch_count'] == 1
    assert facts['pci']['nvswitches'][0]['device_id'] == '0x22a3'


def test_collect_bls_without_saved_entry_takes_newest(tmp_path):
    facts = _kernel_state.collect_kernel_facts(NoTools(), root=_el9_tree(tmp_path, saved=False))
    assert facts['default'] == EL9_B


def test_resolve_in_root_relative_links(tmp_path):
    (tmp_path / 'usr/src/linux-headers-6.1.0-28-amd64').mkdir(parents=True)
    (tmp_path / 'usr/lib/modules/6.1.0-28-amd64').mkdir(parents=True)
    os.symlink('usr/lib', str(tmp_path / 'lib'))
    os.symlink('../../../src/linux-headers-6.1.0-28-amd64', str(tmp_path / 'usr/lib/modules/6.1.0-28-amd64/build'))
    assert _kernel_state.resolve_in_root(str(tmp_path), '/lib/modules/6.1.0-28-amd64/build') == str(
        tmp_path / 'usr/src/linux-headers-6.1.0-28-amd64')
    assert _kernel_state.resolve_in_root(str(tmp_path), '/lib/modules/6.1.0-99-amd64/build') is None


def test_version_key_orders_numerically():
    assert sorted(['5.14.0-70.el9', '5.14.0-503.el9', '5.14.0-427.el9'], key=K.version_key) == [
        '5.14.0-70.el9', '5.14.0-427.el9', '5.14.0-503.el9']


def test_live_running_kernel_is_uname():
    facts = _kernel_state.collect_kernel_facts(NoTools())
    assert facts['running'] == os.uname()[2]


# ------------------------------------------------------------------------------------------------ the no-op (issue 12)

ROCKY8 = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="8.10"\n'
UBUNTU2404 = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
DEBIAN12 = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'


@pytest.mark.parametrize('text, debian_version, expected', [
    (ROCKY8, None, {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '8.10',
                    'distribution_major_version': '8', 'architecture': 'x86_64'}),
    (UBUNTU2404, 'trixie/sid', {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_version': '24.04',
                                'distribution_major_version': '24', 'architecture': 'x86_64'}),
    (DEBIAN12, '12.11\n', {'os_family': 'Debian', 'distribution': 'Debian', 'distribution_version': '12.11',
                           'distribution_major_version': '12', 'architecture': 'x86_64'}),
    ('ID=arch\n', None, None),
    ('', None, None),
])
def test_os_identity(text, debian_version, expected):
    assert _os_release.os_identity(text, debian_version, 'x86_64') == expected


# ------------------------------------------------------------------------------------------------ kernel packages

def test_kernel_packages_el_releases_are_uname_r():
    """rpm -qa's NAME, EPOCH, VERSION, RELEASE, ARCH (_package_db.parse_rpm) -> the releases the kernel role's plan picks
    from: <version>-<release>.<arch>, what the EL and ELRepo kernel packages name their /lib/modules directory."""
    raw = parse_rpm_list('kernel-core\t0\t5.14.0\t611.el9\tx86_64\nkernel-core\t0\t5.14.0\t570.el9\tx86_64\n'
                         'kernel-lt-core\t0\t6.1.100\t1.el9.elrepo\tx86_64\n')
    assert _kernel_state.kernel_packages(raw, 'el') == {'kernel-core': ['5.14.0-570.el9.x86_64', '5.14.0-611.el9.x86_64'],
                                                        'kernel-lt-core': ['6.1.100-1.el9.elrepo.x86_64']}


def test_kernel_packages_debian_versions():
    raw, _holds = parse_dpkg_list('linux-generic-hwe-22.04\t6.8.0.60.63~22.04.1\tii \tamd64\n'
                                  'linux-image-6.8.0-60-generic\t6.8.0-60.63~22.04.1\tii \tamd64\n')
    assert _kernel_state.kernel_packages(raw, 'debian') == {'linux-generic-hwe-22.04': ['6.8.0.60.63~22.04.1'],
                                                            'linux-image-6.8.0-60-generic': ['6.8.0-60.63~22.04.1']}
    assert _kernel_state.kernel_packages(None, 'el') is None


@pytest.mark.parametrize('name, kept', [
    ('kernel', True), ('kernel-core', True), ('kernel-devel', True), ('kernel-lt-core', True), ('kernel-ml', True),
    ('kernel-headers', False), ('kernel-tools', False), ('linux-generic-hwe-24.04', True),
    ('linux-image-6.8.0-60-generic', True), ('linux-headers-6.8.0-60-generic', True), ('linux-firmware', False),
    ('nvidia-driver', False),
])
def test_kernel_package_names_kept_from_the_package_list(name, kept):
    assert bool(KERNEL_PACKAGE_RE.match(name)) is kept


# ---------------------------------------------------------------------------------------------------------------
# os_facts: the OS facts the kernel, nvidia_driver and dcgm plans read (they served the former nodeprep_os_facts filter)

GATHERED_OS = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
               'distribution_major_version': '9', 'architecture': 'x86_64'}


def test_os_facts_prefer_ansibles_own():
    facts = {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_version': '24.04',
             'distribution_major_version': '24', 'architecture': 'x86_64', 'kernel': '6.8.0-60-generic',
             'kernel_state': {'os': GATHERED_OS}}
    assert _os_release.os_facts(facts) == {'os_family': 'Debian', 'distribution': 'Ubuntu',
                                           'distribution_version': '24.04', 'distribution_major_version': '24',
                                           'architecture': 'x86_64'}


def test_os_facts_from_the_gather_without_setup():
    assert _os_release.os_facts({'kernel_state': {'os': GATHERED_OS}, 'nvidia': {'gpus': [{}] * 8}}) == GATHERED_OS


def test_os_facts_leave_out_what_no_source_has():
    # Neither setup nor the gather read the OS: os_family stays undefined, so the roles run setup.
    assert _os_release.os_facts({'kernel_state': {'os': None}, 'architecture': 'aarch64'}) == {'architecture': 'aarch64'}
    assert _os_release.os_facts({}) == {}

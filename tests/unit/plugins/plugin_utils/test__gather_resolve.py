# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/plugin_utils/_gather_resolve.py: what gpu_node_facts returns as read (the mount tables, the IMEX node list,
/proc/devices and nvidia-imex-ctl's JSON, ethtool's outputs, the boot loader's and modinfo's RDMA reads) becomes, on
the controller, the facts the node-side parse gives (the standalone modules' path), on the real fixtures and on this
host through Ansible; a read over its bound or garbled is refused naming the host and the file."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64
import copy
import json
import os
import shutil

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, FakeModule, ansible_adhoc

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _imex_state, _nic, _nvidia_smi
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _rdma_state, _shm_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _imex_formats, _mounts, _nic_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvidia_smi_topo, _rdma_reads
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._gather_resolve import resolve_gathered

HOST = os.path.join(FIXTURES, 'host')
HOSTNAME = 'gpu-a01'
MIB = 1024 * 1024
# (mountinfo, fstab, path) trees built from the real captures of tests/fixtures/host.
TREES = [
    ('mountinfo.debian12-resized', 'fstab.debian12-shm', '/dev/shm'),
    ('mountinfo.el9', 'fstab.el9', '/dev/shm'),
    ('mountinfo.el9', 'fstab.el9-shm-64g', '/dev/shm'),
    ('mountinfo.el9', 'fstab.shm-bad-size', '/dev/shm'),
    ('mountinfo.el9', 'fstab.shm-nr-blocks', '/dev/shm'),
    ('mountinfo.el9', 'fstab.shm-twice', '/dev/shm'),
    ('mountinfo.el9', 'fstab.shm-no-size', '/dev/shm'),
    ('mountinfo.debian12-resized', None, '/dev/shm'),
    ('mountinfo.el9', 'fstab.el9', '/dev/hugepages'),
]


def _tree(tmp_path, mountinfo, fstab, fstab_bytes=None):
    (tmp_path / 'proc' / 'self').mkdir(parents=True)
    (tmp_path / 'etc').mkdir()
    shutil.copy(os.path.join(HOST, mountinfo), str(tmp_path / 'proc' / 'self' / 'mountinfo'))
    shutil.copy(os.path.join(HOST, 'meminfo.2tib'), str(tmp_path / 'proc' / 'meminfo'))
    if fstab:
        shutil.copy(os.path.join(HOST, fstab), str(tmp_path / 'etc' / 'fstab'))
    if fstab_bytes is not None:
        (tmp_path / 'etc' / 'fstab').write_bytes(fstab_bytes)
    return str(tmp_path)


def _on_the_controller(namespace, read, fail_on_error=True):
    """What the action plugins do with the module's result: JSON on the wire, then resolve_gathered."""
    facts = json.loads(json.dumps({namespace: {'read': read}, 'nodeprep_errors': {}}))
    warnings, failure = resolve_gathered(facts, fail_on_error, HOSTNAME)
    return facts, warnings, failure


@pytest.mark.parametrize('mountinfo, fstab, path', TREES, ids=['{0}+{1}:{2}'.format(*t) for t in TREES])
def test_shm_on_the_fixtures_is_what_the_node_parses(tmp_path, mountinfo, fstab, path):
    root = _tree(tmp_path, mountinfo, fstab)
    on_node = _mounts.shm_facts(_shm_state.read_shm(path=path, root=root))
    facts, warnings, failure = _on_the_controller('shm', _shm_state.read_shm(path=path, root=root))
    assert failure is None
    assert facts['shm'] == on_node
    assert warnings == ['shm: ' + e for e in on_node['errors']]


def test_shm_values_written_by_hand(tmp_path):
    # The Debian 12 capture: /dev/shm resized to 64 GiB live, size=50% in fstab of a host with MemTotal 2113140480 kB.
    root = _tree(tmp_path, 'mountinfo.debian12-resized', 'fstab.debian12-shm')
    facts, _warnings, failure = _on_the_controller('shm', _shm_state.read_shm(root=root))
    assert failure is None
    assert (facts['shm']['mounted'], facts['shm']['size_bytes']) == (True, 64 * 1024 ** 3)
    assert facts['shm']['fstab']['size_bytes'] == 2113140480 * 1024 // 2 and facts['shm']['fstab']['line'] == 17


def test_shm_fstab_bytes_that_are_not_utf8_travel_as_they_are(tmp_path):
    with open(os.path.join(HOST, 'fstab.debian12-shm'), 'rb') as handle:
        data = handle.read() + b'# caf\xe9\n'
    root = _tree(tmp_path, 'mountinfo.debian12-resized', None, fstab_bytes=data)
    read = _shm_state.read_shm(root=root)
    assert read['fstab']['base64'] == base64.b64encode(data).decode('ascii') and 'text' not in read['fstab']
    facts, _warnings, failure = _on_the_controller('shm', read)
    assert failure is None
    assert facts['shm'] == _mounts.shm_facts(_shm_state.read_shm(root=root))
    assert facts['shm']['errors'][-1].endswith('etc/fstab line 18: not UTF-8 (shown with \\x escapes)')


def _shm_read(tmp_path):
    return _shm_state.read_shm(root=_tree(tmp_path, 'mountinfo.el9', 'fstab.el9'))


@pytest.mark.parametrize('change, message', [
    (lambda r: r.update(mountinfo={'path': '/proc/self/mountinfo', 'over_limit': 4 * MIB}),
     'shm facts: host gpu-a01: /proc/self/mountinfo is larger than 4194304 bytes'),
    (lambda r: r['mountinfo'].update(text='x' * (4 * MIB + 1)),
     'shm facts: host gpu-a01: {root}/proc/self/mountinfo: 4194305 bytes, more than the 4194304 the gather returns'),
    (lambda r: r.update(mountinfo='22 97 0:21 / /proc rw - proc proc rw'),
     "shm facts: host gpu-a01: /proc/self/mountinfo: the node returned str instead of the file's text"),
    (lambda r: r['fstab'].update(text=None, base64='not base64!'),
     'shm facts: host gpu-a01: {root}/etc/fstab: the node returned bytes that are not base64'),
    (lambda r: r['mountinfo'].update(text='22 97 0:21 / /proc rw shared:12 proc proc rw\n'),
     "shm facts: host gpu-a01: mountinfo line 1: no ' - ' separator in '22 97 0:21 / /proc rw shared:12 proc proc "
     "rw'"),
    (lambda r: r.update(mountinfo={'path': '/proc/self/mountinfo', 'errno': 2, 'error': '[Errno 2] gone'}),
     'shm facts: host gpu-a01: cannot read /proc/self/mountinfo: [Errno 2] gone'),
])
def test_shm_oversized_or_garbled_names_the_host_and_file(tmp_path, change, message):
    read = _shm_read(tmp_path)
    change(read)
    facts, _warnings, failure = _on_the_controller('shm', read)
    assert failure == {'msg': message.format(root=str(tmp_path)), 'subset': 'shm'}
    facts, _warnings, failure = _on_the_controller('shm', read, fail_on_error=False)
    assert failure is None and 'shm' not in facts
    assert facts['nodeprep_errors'] == {'shm': message.format(root=str(tmp_path))}


def test_the_node_reads_no_more_than_the_bound(tmp_path, monkeypatch):
    monkeypatch.setitem(_shm_state.TEXT_MAX_BYTES, 'fstab', 10)
    read = _shm_read(tmp_path)
    assert read['fstab'] == {'path': str(tmp_path / 'etc' / 'fstab'), 'over_limit': 10}


def test_both_sides_have_the_same_bounds():
    assert _shm_state.TEXT_MAX_BYTES == _mounts.TEXT_MAX_BYTES
    assert _shm_state.TEXT_MAX_BYTES['mountinfo'] == 4 * MIB
    assert (_imex_state.TEXT_MAX_BYTES, _imex_state.CTL_MAX_BYTES) == (
        _imex_formats.TEXT_MAX_BYTES, _imex_formats.CTL_MAX_BYTES) == (256 * 1024, 4 * MIB)
    assert _nic.ETHTOOL_MAX_CHARS == _nic_facts.ETHTOOL_MAX_CHARS == 64 * 1024
    assert _nvidia_smi.TOPO_MAX_CHARS == _nvidia_smi_topo.TOPO_MAX_CHARS == 256 * 1024
    assert _rdma_state.TEXT_MAX_CHARS == _rdma_reads.TEXT_MAX_CHARS == 64 * 1024


# ---------------------------------------------------------------- IMEX

CTL = '/usr/bin/nvidia-imex-ctl'
TIMEOUT = '/usr/bin/timeout'
# The DOWN domain of NVIDIA's ISV validation tests, "real payload shape" (tests/unit/.../test__imex_formats.py).
ISV_DOWN = ('{"nodes": {"1": {"status": "UNAVAILABLE", "host": "10.0.0.2", "connections": {'
            '"0": {"host": "10.0.0.1", "status": "INVALID", "changed": false}}, "hostName": "N/A"}, '
            '"0": {"status": "UNAVAILABLE", "host": "10.0.0.1", "connections": {}, "hostName": "gpu-node-a"}}, '
            '"timestamp": "9/4/2026 00:00:00.000", "status": "DOWN"}')


def _imex_read(tmp_path, monkeypatch, calls, nodes_text='10.0.0.1\n10.0.0.2\n'):
    nodes = tmp_path / 'nodes_config.cfg'
    nodes.write_text(nodes_text)
    cfg = tmp_path / 'config.cfg'
    cfg.write_text('IMEX_NODE_CONFIG_FILE={0}\nIMEX_CMD_ENABLED=1\n'.format(nodes))
    devices = tmp_path / 'devices'
    devices.write_text('Character devices:\n195 nvidia\n234 nvidia-caps-imex-channels\n')
    monkeypatch.setattr(_imex_state, 'PROC_DEVICES', str(devices))
    module = FakeModule({'nvidia-imex-ctl': CTL, 'timeout': TIMEOUT}, calls)
    return _imex_state.collect_imex_facts(module, config_path=str(cfg), timeout=30)


def test_imex_on_the_controller_is_what_the_node_parses(tmp_path, monkeypatch):
    read = _imex_read(tmp_path, monkeypatch, [(1, ISV_DOWN, 'Failed to read node configuration file x\n')])
    facts, _warnings, failure = _on_the_controller('imex', copy.deepcopy(read))
    assert failure is None
    assert facts['imex'] == _imex_formats.imex_facts(read)
    imex = facts['imex']
    assert imex['nodes'] == ['10.0.0.1', '10.0.0.2'] and imex['channels']['major'] == 234
    assert imex['ctl']['domain']['status'] == 'DOWN' and imex['ctl']['not_configured'] is True
    assert [n['hostname'] for n in imex['ctl']['domain']['nodes']] == ['gpu-node-a', 'N/A']
    assert imex['ctl']['error'] == 'nvidia-imex-ctl -N -j exited 1'


def test_imex_a_ctl_over_the_bound_is_its_error_naming_the_host(tmp_path, monkeypatch):
    read = _imex_read(tmp_path, monkeypatch, [(0, ' ' * (4 * MIB) + ISV_DOWN, '')])
    assert read['ctl']['stdout'] is None and read['ctl']['over_limit'] == 4 * MIB
    facts, _warnings, failure = _on_the_controller('imex', read)
    assert failure is None
    assert facts['imex']['ctl']['domain'] is None
    assert facts['imex']['ctl']['error'] == ('host gpu-a01: nvidia-imex-ctl -N -j printed more than 4194304 characters '
                                             '(the most the gather returns)')


@pytest.mark.parametrize('change, message', [
    (lambda r: r.update(nodes_read=['10.0.0.1']),
     "imex facts: host gpu-a01: {nodes}: the node returned list instead of the file's text"),
    (lambda r: r['nodes_read'].update(text='1' * (256 * 1024 + 1)),
     'imex facts: host gpu-a01: {nodes}: 262145 bytes, more than the 262144 the gather returns'),
    (lambda r: r['ctl'].update(stdout='x' * (4 * MIB + 1)),
     'imex facts: host gpu-a01: nvidia-imex-ctl -N -j: 4194305 characters returned, more than the 4194304 the '
     'gather returns'),
    (lambda r: r.pop('channels'),
     "imex facts: the node's read cannot be resolved on host gpu-a01 (KeyError: 'channels')"),
])
def test_imex_oversized_or_garbled_names_the_host_and_file(tmp_path, monkeypatch, change, message):
    read = _imex_read(tmp_path, monkeypatch, [(0, ISV_DOWN, '')])
    change(read)
    _facts, _warnings, failure = _on_the_controller('imex', read)
    assert failure == {'msg': message.format(nodes=tmp_path / 'nodes_config.cfg'), 'subset': 'imex'}


def test_imex_a_node_list_over_the_bound_is_its_error_as_before(tmp_path, monkeypatch):
    read = _imex_read(tmp_path, monkeypatch, [(0, ISV_DOWN, '')], nodes_text='10.0.0.1\n' * 40000)
    facts, _warnings, failure = _on_the_controller('imex', read)
    assert failure is None and facts['imex']['nodes'] is None
    assert facts['imex']['nodes_error'] == '{0} is larger than 262144 bytes'.format(tmp_path / 'nodes_config.cfg')


# ---------------------------------------------------------------- NICs, the RDMA reads

def _ethtool(name):
    with open(os.path.join(FIXTURES, 'ethtool', name)) as handle:
        return handle.read()


def _nic_read():
    return {'eth0': {'mtu': 9000, 'speed_mbps': 100000, 'addresses': {'ipv4': [], 'ipv6': []}, 'nm_managed': None,
                     'ethtool_k': {'argv': ['/usr/sbin/ethtool', '-k', 'eth0'], 'rc': 0, 'stdout': _ethtool(
                         'virtio_net-ens3_ethtool-k_hotsos.txt'), 'stderr': ''},
                     'ethtool_i': {'argv': ['/usr/sbin/ethtool', '-i', 'eth0'], 'rc': 0, 'stdout': _ethtool(
                         'virtio_net-ens3_ethtool-i_hotsos.txt'), 'stderr': ''}}}


def test_nics_on_the_controller_are_what_the_node_parses():
    facts, _warnings, failure = _on_the_controller('nics', _nic_read())
    assert failure is None
    assert facts['nics'] == _nic_facts.nics_from_read(_nic_read())
    assert facts['nics']['eth0']['driver']['driver'] == 'virtio_net'
    assert 'ethtool_k' not in facts['nics']['eth0'] and facts['nics']['eth0']['features']


@pytest.mark.parametrize('change, failure', [
    (lambda r: r['eth0']['ethtool_k'].update(stdout='x' * (64 * 1024 + 1)),
     {'msg': 'nic facts: host gpu-a01: interface eth0: ethtool -k returned 65537 characters, more than the 65536 the '
             'gather returns', 'cmd': ['/usr/sbin/ethtool', '-k', 'eth0'], 'rc': 0}),
    (lambda r: r['eth0'].update(ethtool_k='Features for eth0:'),
     {'msg': "nic facts: host gpu-a01: interface eth0: the node's ethtool -k read is garbled (TypeError: string "
             "indices must be integers, not 'str')"}),
    (lambda r: r['eth0']['ethtool_k'].update(stdout='Features for eth0:\ngro = on\n'),
     {'msg': "nic facts: interface eth0: ethtool -k output line 2: cannot parse 'gro = on'; expected 'name: on|off' "
             "optionally followed by [fixed], [requested on] or [requested off]",
      'cmd': ['/usr/sbin/ethtool', '-k', 'eth0'], 'rc': 0, 'stdout': 'Features for eth0:\ngro = on\n', 'stderr': ''}),
])
def test_nics_oversized_or_garbled_names_the_host_and_interface(change, failure):
    read = _nic_read()
    change(read)
    _facts, _warnings, got = _on_the_controller('nics', read)
    assert got == dict(failure, subset='nic')


ENTRY = '2f0d1c6a9b8e4e57a0c5d3f1e2b4a697-5.14.0-503.21.1.el9_5.x86_64.conf'
# Its options line, as the Rocky 9.5 capture has it (written out by hand).
OPTIONS = ('root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap '
           'rd.lvm.lv=rl/root rd.lvm.lv=rl/swap rhgb quiet rd.driver.blacklist=nouveau modprobe.blacklist=nouveau '
           '$tuned_params')


def test_the_rdma_boot_and_modinfo_reads(tmp_path):
    shutil.copytree(os.path.join(HOST, 'bls.el9'), str(tmp_path / 'boot' / 'loader' / 'entries'))
    (tmp_path / 'etc' / 'default').mkdir(parents=True)
    (tmp_path / 'etc' / 'default' / 'grub').write_text('GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M rhgb quiet"\n')
    read = _rdma_state.read_boot_args(str(tmp_path))
    assert sorted(read['read']['bls']) == ['2f0d1c6a9b8e4e57a0c5d3f1e2b4a697-5.14.0-503.14.1.el9_5.x86_64.conf',
                                           '2f0d1c6a9b8e4e57a0c5d3f1e2b4a697-5.14.0-503.21.1.el9_5.x86_64.conf']
    kernel = {'rdma': {'boot_args': read, 'peermem_module': {'read': {'rc': 0, 'stdout': 'ib_core,nvidia\n',
                                                                      'stderr': ''}}}}
    facts = json.loads(json.dumps({'kernel_state': kernel}))
    assert resolve_gathered(facts, True, HOSTNAME) == ([], None)
    rdma = facts['kernel_state']['rdma']
    assert rdma['boot_args']['grub_cmdline_linux'] == 'crashkernel=1G-4G:192M rhgb quiet'
    assert rdma['boot_args']['grub_cmdline_linux_default'] == ''
    assert rdma['boot_args']['bls'][ENTRY] == OPTIONS
    assert rdma['peermem_module'] == {'found': True, 'depends': ['ib_core', 'nvidia']}
    assert rdma == _rdma_reads.rdma_from_read(json.loads(json.dumps({'rdma': kernel['rdma']})))['rdma']
    big = {'rdma': {'boot_args': {'read': {'bls': {}, 'grub': {'over_limit': 65536}}}}}
    facts = {'kernel_state': big}
    assert resolve_gathered(facts, True, HOSTNAME)[1] == {
        'msg': 'kernel facts: host gpu-a01: /etc/default/grub is larger than 65536 characters (the most the gather '
               'returns)', 'subset': 'kernel'}


# ---------------------------------------------------------------- this host, through Ansible

def _stable(shm):
    # /dev/shm's use changes between two reads on a shared machine.
    return dict((k, v) for k, v in shm.items() if k not in ('used_bytes', 'free_bytes'))


def test_through_ansible_the_gather_gives_the_standalone_modules_facts():
    """``ansible -m gpu_node_facts`` (the action plugin parses on the controller) and ``-m shm_facts`` /
    ``-m nic_facts`` (parsed on the node) agree on this host."""
    gathered = ansible_adhoc('gpu_node_facts', {'gather_subset': ['shm', 'nic'], 'nic_interfaces': ['lo']})
    facts = gathered['ansible_facts']
    assert facts['nodeprep_errors'] == {}
    shm = ansible_adhoc('shm_facts', {})['ansible_facts']['shm']
    assert _stable(facts['shm']) == _stable(shm) and facts['shm']['mounted'] is True
    nics = ansible_adhoc('nic_facts', {'interfaces': ['lo']})['ansible_facts']['nics']
    assert facts['nics'] == nics and list(nics) == ['lo']

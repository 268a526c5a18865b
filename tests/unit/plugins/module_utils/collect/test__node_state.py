# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import hashlib
import os

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FakeModule
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _node_records as ns
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _node_state

# systemctl show --property=Id,LoadState,ActiveState,SubState,UnitFileState,FragmentPath,DropInPaths over three units:
# one block per unit in the order asked, a blank line between them; a missing unit still gets its block.
SHOW_THREE = """Id=nvidia-persistenced.service
LoadState=loaded
ActiveState=active
SubState=running
FragmentPath=/usr/lib/systemd/system/nvidia-persistenced.service
DropInPaths=
UnitFileState=enabled

Id=slurmd.service
LoadState=loaded
ActiveState=active
SubState=running
FragmentPath=/usr/lib/systemd/system/slurmd.service
DropInPaths=/etc/systemd/system/slurmd.service.d/nodeprep-memlock.conf /run/systemd/system/slurmd.service.d/x.conf
UnitFileState=enabled

Id=nodeprep-gpu-settings.service
LoadState=not-found
ActiveState=inactive
SubState=dead
FragmentPath=
DropInPaths=
UnitFileState=
"""
NAMES = ['nvidia-persistenced.service', 'slurmd.service', 'nodeprep-gpu-settings.service']


@pytest.mark.parametrize('given, expected', [
    ('nvidia-persistenced', 'nvidia-persistenced.service'),
    ('nvidia-persistenced.service', 'nvidia-persistenced.service'),
    ('dev-shm.mount', 'dev-shm.mount'),
    ('multi-user.target', 'multi-user.target'),
    ('getty@tty1', 'getty@tty1.service'),
])
def test_unit_name(given, expected):
    assert ns.unit_name(given) == expected


@pytest.mark.parametrize('bad', ['', ' ', 'two words', '--all'])
def test_unit_name_rejects_non_names(bad):
    with pytest.raises(ns.NodeStateError) as err:
        ns.unit_name(bad)
    assert "units: '{0}' is not a unit name".format(bad) in str(err.value)


def test_units_argv_is_one_call():
    assert ns.units_argv('/usr/bin/systemctl', NAMES) == [
        '/usr/bin/systemctl', 'show',
        '--property=Id,LoadState,ActiveState,SubState,UnitFileState,FragmentPath,DropInPaths', '--'] + NAMES


def test_parse_units_show_three_blocks():
    units = ns.parse_units_show(SHOW_THREE, NAMES)
    assert units == {
        'nvidia-persistenced.service': {
            'load': 'loaded', 'active': 'active', 'sub': 'running', 'enabled': 'enabled',
            'fragment': '/usr/lib/systemd/system/nvidia-persistenced.service', 'dropins': []},
        'slurmd.service': {
            'load': 'loaded', 'active': 'active', 'sub': 'running', 'enabled': 'enabled',
            'fragment': '/usr/lib/systemd/system/slurmd.service',
            'dropins': ['/etc/systemd/system/slurmd.service.d/nodeprep-memlock.conf',
                        '/run/systemd/system/slurmd.service.d/x.conf']},
        'nodeprep-gpu-settings.service': {
            'load': 'not-found', 'active': 'inactive', 'sub': 'dead', 'enabled': None, 'fragment': None,
            'dropins': []},
    }


def test_parse_units_show_alias_matched_by_position():
    text = 'Id=ssh.service\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n'
    assert ns.parse_units_show(text, ['sshd.service'])['sshd.service']['active'] == 'active'


def test_parse_units_show_missing_block_is_not_found():
    text = SHOW_THREE.split('\n\n', maxsplit=1)[0] + '\n'
    units = ns.parse_units_show(text, NAMES)
    assert units['nvidia-persistenced.service']['load'] == 'loaded'
    assert units['slurmd.service'] == {'load': 'not-found', 'active': None, 'sub': None, 'enabled': None,
                                       'fragment': None, 'dropins': []}


def test_file_states(tmp_path):
    regular = tmp_path / 'nccl.conf'
    regular.write_text(u'NCCL_DEBUG=WARN\n')
    os.chmod(str(regular), 0o640)
    link = tmp_path / 'masked.service'
    os.symlink('/dev/null', str(link))
    big = tmp_path / 'big'
    big.write_bytes(b'x' * (ns.SHA1_MAX_BYTES + 1))
    state = _node_state.collect_files([str(regular), str(link), str(tmp_path), str(big), str(tmp_path / 'none'),
                                       str(regular) + '/below'])
    st = os.lstat(str(regular))
    assert state[str(regular)] == {
        'exists': True, 'type': 'file', 'mode': '0640', 'uid': st.st_uid, 'gid': st.st_gid, 'size': 16,
        'sha1': hashlib.sha1(b'NCCL_DEBUG=WARN\n').hexdigest(), 'target': None}
    assert state[str(link)]['type'] == 'link'
    assert state[str(link)]['target'] == '/dev/null'
    assert state[str(link)]['sha1'] is None
    assert state[str(tmp_path)]['type'] == 'directory'
    assert state[str(tmp_path)]['sha1'] is None
    assert state[str(big)]['type'] == 'file'
    assert state[str(big)]['size'] == ns.SHA1_MAX_BYTES + 1
    assert state[str(big)]['sha1'] is None
    assert state[str(tmp_path / 'none')] == ns.missing_file()
    assert state[str(regular) + '/below']['exists'] is False


@pytest.mark.parametrize('bad', ['', 'etc/nccl.conf', './x'])
def test_relative_path_rejected(bad):
    with pytest.raises(ns.NodeStateError) as err:
        _node_state.read_file_state(bad)
    assert 'is not an absolute path' in str(err.value)


@pytest.mark.parametrize('bad', ['', 'two words', '-a'])
def test_package_name_rejected(bad):
    with pytest.raises(ns.NodeStateError) as err:
        ns.check_package_name(bad)
    assert 'is not a package name' in str(err.value)


def test_collect_units_one_call(monkeypatch):
    monkeypatch.setattr(_node_state.os.path, 'isdir', lambda path: path == '/run/systemd/system')
    module = FakeModule({'systemctl': '/bin/systemctl'}, [(0, SHOW_THREE, '')])
    units, error = _node_state.collect_units(module, ['nvidia-persistenced', 'slurmd.service', 'nodeprep-gpu-settings',
                                             'slurmd'])
    assert error is None
    assert module.seen == [ns.units_argv('/bin/systemctl', NAMES)]
    assert sorted(units) == sorted(NAMES)


def test_collect_units_without_systemd(monkeypatch):
    monkeypatch.setattr(_node_state.os.path, 'isdir', lambda path: False)
    module = FakeModule({'systemctl': '/bin/systemctl'}, [])
    assert _node_state.collect_units(module, ['slurmd']) == (
        {}, 'this host was not booted with systemd (/run/systemd/system is missing)')
    assert module.seen == []


def test_collect_units_systemctl_fails(monkeypatch):
    monkeypatch.setattr(_node_state.os.path, 'isdir', lambda path: True)
    module = FakeModule({'systemctl': '/bin/systemctl'}, [(1, '', 'Failed to connect to bus\n')])
    assert _node_state.collect_units(module, ['slurmd']) == ({}, 'systemctl show failed (rc=1): Failed to connect to bus')

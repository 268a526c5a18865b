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
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._path_changes import path_change
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan

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


# ---------------------------------------------------------------------------------------------------------------
# path_change on a real tree, as the plans compare the paths they manage with what the gather read (_plan.want_path)

CONF = u'NCCL_DEBUG=WARN\nNCCL_IB_TIMEOUT=22\n'


def path_changes(files, wants):
    """The reasons of every path that would change (what _plan.want_path adds to a plan)."""
    return [reason for reason in (path_change(files.get(want['path']), want) for want in wants) if reason]


@pytest.fixture
def tree(tmp_path):
    conf = tmp_path / 'nccl.conf'
    conf.write_text(CONF)
    os.chmod(str(conf), 0o644)
    folder = tmp_path / 'd'
    folder.mkdir()
    os.chmod(str(folder), 0o755)
    os.symlink(str(conf), str(tmp_path / 'link'))
    return tmp_path


def wants(tree, sha1=None, mode='0644', uid=None):
    uid = os.getuid() if uid is None else uid
    gid = os.getgid()
    return [
        {'path': str(tree / 'nccl.conf'), 'sha1': sha1 or hashlib.sha1(CONF.encode('utf-8')).hexdigest(), 'mode': mode, 'uid': uid,
         'gid': gid},
        {'path': str(tree / 'd'), 'state': 'directory', 'mode': '0755', 'uid': uid, 'gid': gid},
        {'path': str(tree / 'link'), 'state': 'link', 'src': str(tree / 'nccl.conf')},
        {'path': str(tree / 'gone'), 'state': 'absent'},
    ]


def gathered(tree):
    return _node_state.collect_files([str(tree / 'nccl.conf'), str(tree / 'd'), str(tree / 'link'), str(tree / 'gone')])


def test_nothing_differs_on_a_right_tree(tree):
    assert path_changes(gathered(tree), wants(tree)) == []


@pytest.mark.parametrize('change, reason', [
    (lambda t: (t / 'nccl.conf').write_text(u'NCCL_DEBUG=INFO\n'), 'nccl.conf: content differs'),
    (lambda t: os.chmod(str(t / 'nccl.conf'), 0o600), 'nccl.conf: mode 0600, not 0644'),
    (lambda t: os.remove(str(t / 'nccl.conf')), 'nccl.conf: missing'),
    (lambda t: os.rmdir(str(t / 'd')), 'd: missing'),
    (lambda t: os.chmod(str(t / 'd'), 0o700), 'd: mode 0700, not 0755'),
    (lambda t: (os.remove(str(t / 'link')), os.symlink('/dev/null', str(t / 'link'))), 'link: points to /dev/null, not {tree}/nccl.conf'),
    (lambda t: (t / 'gone').write_text(u'x'), 'gone: exists'),
])
def test_each_difference_is_a_reason(tree, change, reason):
    change(tree)
    # The whole list: one sentence, naming the full path.
    assert path_changes(gathered(tree), wants(tree)) == [str(tree) + '/' + reason.format(tree=tree)]


def test_owner_and_type_differences(tree):
    reasons = path_changes(gathered(tree), wants(tree, uid=os.getuid() + 1)[:1])
    assert reasons == ['{0}: uid {1}, not {2}'.format(tree / 'nccl.conf', os.getuid(), os.getuid() + 1)]
    want = [{'path': str(tree / 'd'), 'sha1': 'x'}]
    assert path_changes(gathered(tree), want) == ['{0}: is a directory, not a file'.format(tree / 'd')]


def test_what_cannot_be_told_is_a_change(tree):
    files = gathered(tree)
    assert path_changes({}, wants(tree)[:1]) == ['{0}: not gathered'.format(tree / 'nccl.conf')]
    files[str(tree / 'nccl.conf')]['sha1'] = None
    assert 'content not known' in path_changes(files, wants(tree)[:1])[0]


def test_sha1_of_a_template_matches_the_gather(tree):
    assert gathered(tree)[str(tree / 'nccl.conf')]['sha1'] == hashlib.sha1(CONF.encode('utf-8')).hexdigest()


def test_glob_gathers_each_match(tree):
    (tree / 'a.env').write_text(u'A')
    (tree / 'b.env').write_text(u'B')
    assert sorted(_node_state.collect_files([str(tree / '*.env')])) == [str(tree / 'a.env'), str(tree / 'b.env')]


def test_node_sha1_matches_the_plans_sha1(tmp_path):
    """A plan compares _plan.sha1_text(content) with the sha1 gpu_node_facts read on the node."""
    text = u'NCCL_SOCKET_IFNAME=ib0\nNCCL_IB_HCA=mlx5\n'
    path = tmp_path / 'f'
    path.write_text(text)
    assert _node_state.sha1_of(str(path)) == _plan.sha1_text(text)
